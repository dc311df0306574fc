package engine

import (
	"context"
	"fmt"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// keyScanCount is the most entries one catch-up read asks Redis for. More
// reads in flight beat bigger ones (kv_catchup.go): a reply of 10000
// entries of 256 B values outgrows the Redis client's pooled buffers.
const keyScanCount = 1000

// hasValue stands for a record's value in what readKeys returns:
// indexing needs to know only whether a record is a tombstone.
var hasValue = []byte{}

// readKeys reads, for indexing, the records at or after from and below to
// (up to keyScanCount of them) and appends them to recs: offsets, keys,
// and Value nil for a tombstone or hasValue otherwise; txns, parallel to
// recs, their transaction (left empty while none is transactional, as
// ReadResult.Txns). next is the offset after the range the read covered,
// n the size of the reply. A local segment is read with one XRANGE whose
// reply is not parsed again once framed: the framer marks its elements
// (resp.Pipeline.MarkElements; a rebuild is bound by this loop); an
// archived segment goes through Read. release frees the records' bytes.
func (p *Partition) readKeys(ctx context.Context, from, to int64, recs []record.Record, txns []record.Txn) (_ []record.Record, _ []record.Txn, next int64, n int, release func(), err error) {
	hw, start := p.hw.Load(), p.start.Load()
	to = min(to, hw)
	if from < start {
		return recs, txns, 0, 0, nil, fmt.Errorf("%w: %d below the log start %d", ErrOffsetOutOfRange, from, start)
	}
	if from >= to {
		return recs, txns, from, 0, func() {}, nil
	}
	p.mu.Lock()
	segs := p.segs
	p.mu.Unlock()
	seg, end := int64(0), to-1
	if len(segs) > 0 {
		i := segmentFor(segs, from)
		if i < 0 || !segs[i].Local {
			return p.readKeysVia(ctx, from, to, recs, txns)
		}
		seg = segs[i].ID
		if i < len(segs)-1 {
			end = min(end, segs[i+1].Base-1)
		}
	}
	var pl resp.Pipeline
	pl.Cmd("XRANGE", p.streamKey(seg), from, end, "COUNT", keyScanCount)
	pl.MarkElements()
	rs, err := p.t.e.rc.Exec(ctx, &pl)
	if err != nil {
		return recs, txns, 0, 0, nil, fmt.Errorf("%w: read %s/%d at %d: %v", ErrStorageUnavailable, p.t.name, p.id, from, err)
	}
	rep := rs.At(0)
	if err := rep.Err(); err != nil {
		rs.Release()
		return recs, txns, 0, 0, nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, from, err)
	}
	base := len(recs)
	if marks := rs.Marks(0); marks != nil {
		recs, txns, err = parseKeyMarks(rep.Raw, marks, recs, txns)
	} else {
		recs, txns, err = parseKeyEntriesTxn(rep.Raw, recs, txns)
	}
	if err != nil {
		rs.Release()
		return recs, txns, 0, 0, nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, from, err)
	}
	next = end + 1
	if k := len(recs); k > base {
		next = recs[k-1].Offset + 1
	}
	return recs, txns, next, len(rep.Raw), rs.Release, nil
}

// readKeysVia is readKeys through Read, for segments not in Redis.
func (p *Partition) readKeysVia(ctx context.Context, from, to int64, recs []record.Record, txns []record.Txn) ([]record.Record, []record.Txn, int64, int, func(), error) {
	res, err := p.Read(ctx, from, 8<<20)
	if err != nil {
		return recs, txns, 0, 0, nil, err
	}
	got := res.Records
	next := to
	for i := range got {
		if got[i].Offset >= to {
			got = got[:i]
			break
		}
	}
	if n := len(got); n > 0 && n == len(res.Records) {
		next = got[n-1].Offset + 1
	}
	size := 0
	for i := range got {
		size += len(got[i].Key) + len(got[i].Value)
	}
	if len(res.Txns) > 0 || len(txns) > 0 {
		txns = append(padTxns(txns, len(recs)), res.Txns[:min(len(res.Txns), len(got))]...)
		txns = padTxns(txns, len(recs)+len(got))
	}
	return append(recs, got...), txns, next, size, res.Release, nil
}

// parseKeyEntries walks the raw RESP2 reply of XRANGE (an array of [id,
// [field, value, ...]]) and appends one record per entry: offset, key (a
// sub-slice of b), and whether it has a value (see the entry package for
// the fields).
func parseKeyEntries(b []byte, recs []record.Record) ([]record.Record, error) {
	recs, _, err := parseKeyEntriesTxn(b, recs, nil)
	return recs, err
}

// parseKeyEntriesTxn is parseKeyEntries that also appends to txns each
// entry's transaction (__txn, __ctl), parallel to recs (records already in
// recs count as of no transaction), once one entry has one: txns stays as
// it came while no entry is transactional.
func parseKeyEntriesTxn(b []byte, recs []record.Record, txns []record.Txn) ([]record.Record, []record.Txn, error) {
	w := resp.NewWalker(b)
	n, err := w.Array()
	if err != nil {
		return recs, txns, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
	}
	var scratch [16][]byte // an entry's names and values, reused
	fields := scratch[:0]
	for range n {
		var id []byte
		id, fields, err = w.Entry(fields[:0])
		if err != nil {
			return recs, txns, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
		}
		if recs, txns, err = appendKeyEntry(id, fields, recs, txns); err != nil {
			return recs, txns, err
		}
	}
	if len(txns) > 0 {
		txns = padTxns(txns, len(recs))
	}
	return recs, txns, nil
}

// parseKeyMarks is parseKeyEntriesTxn on the Marks the reply's framing
// left (resp.Pipeline.MarkElements): the elements are found already, so
// the reply is not parsed again, only its shape checked.
func parseKeyMarks(b []byte, marks []resp.Mark, recs []record.Record, txns []record.Txn) ([]record.Record, []record.Txn, error) {
	if len(marks) == 0 || !marks[0].IsArray() {
		return recs, txns, fmt.Errorf("%w: XRANGE reply is not an array", entry.ErrMalformed)
	}
	var scratch [16][]byte
	fields := scratch[:0]
	k := 1
	for range marks[0].Len() {
		if len(marks)-k < 3 || !marks[k].IsArray() || marks[k].Len() != 2 || marks[k+1].IsArray() ||
			!marks[k+2].IsArray() || marks[k+2].Len()%2 != 0 || len(marks)-k-3 < marks[k+2].Len() {
			return recs, txns, fmt.Errorf("%w: element %d of the XRANGE reply is not a stream entry", entry.ErrMalformed, k)
		}
		id := marks[k+1].Bulk(b)
		fields = fields[:0]
		for _, m := range marks[k+3 : k+3+marks[k+2].Len()] {
			if m.IsArray() {
				return recs, txns, fmt.Errorf("%w: a stream entry's field is an array", entry.ErrMalformed)
			}
			fields = append(fields, m.Bulk(b))
		}
		k += 3 + marks[k+2].Len()
		var err error
		if recs, txns, err = appendKeyEntry(id, fields, recs, txns); err != nil {
			return recs, txns, err
		}
	}
	if k != len(marks) {
		return recs, txns, fmt.Errorf("%w: XRANGE reply of %d elements past its entries", entry.ErrMalformed, len(marks)-k)
	}
	if len(txns) > 0 {
		txns = padTxns(txns, len(recs))
	}
	return recs, txns, nil
}

// appendKeyEntry appends the record of the entry id with fields (names
// and values in turn) to recs, and its transaction to txns as
// parseKeyEntriesTxn says.
func appendKeyEntry(id []byte, fields [][]byte, recs []record.Record, txns []record.Txn) ([]record.Record, []record.Txn, error) {
	off, _, err := entry.ParseID(id)
	if err != nil {
		return recs, txns, err
	}
	rec := record.Record{Offset: off}
	txn := record.Txn{ProducerID: -1}
	for j := 0; j+1 < len(fields); j += 2 {
		name, val := fields[j], fields[j+1]
		switch {
		case string(name) == "__key":
			rec.Key = val
		case string(name) == "__txn":
			pid, epoch, ok := entry.ParseTxn(val)
			if !ok {
				return recs, txns, fmt.Errorf("%w: offset %d: bad __txn %q", entry.ErrMalformed, off, val)
			}
			txn.ProducerID, txn.Epoch = pid, epoch
		case string(name) == "__ctl":
			txn.Control = true
		case entry.IsValueField(name):
			rec.Value = hasValue
		}
	}
	if txn.Control && txn.ProducerID < 0 {
		return recs, txns, fmt.Errorf("%w: offset %d: control entry without __txn", entry.ErrMalformed, off)
	}
	recs = append(recs, rec)
	if txn.ProducerID >= 0 || len(txns) > 0 {
		txns = append(padTxns(txns, len(recs)-1), txn)
	}
	return recs, txns, nil
}

// padTxns extends txns to n with records of no transaction.
func padTxns(txns []record.Txn, n int) []record.Txn {
	for len(txns) < n {
		txns = append(txns, record.Txn{ProducerID: -1})
	}
	return txns
}
