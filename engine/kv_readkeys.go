package engine

import (
	"context"
	"fmt"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// keyScanCount is how many entries one catch-up read asks Redis for.
const keyScanCount = 10000

// hasValue stands for a record's value in what readKeys returns:
// indexing needs to know only whether a record is a tombstone.
var hasValue = []byte{}

// readKeys reads, for indexing, the records at or after from and below to
// (up to keyScanCount of them): offsets, keys, and Value nil for a
// tombstone or hasValue otherwise; txns, per record, their transaction
// (empty when none is transactional, as ReadResult.Txns). next is the
// offset after the range the read covered. A local segment is read with one XRANGE whose reply is
// walked once, skipping the values (a rebuild is bound by this loop); an
// archived segment goes through Read. release frees the records' bytes.
func (p *Partition) readKeys(ctx context.Context, from, to int64) (recs []record.Record, txns []record.Txn, next int64, release func(), err error) {
	hw, start := p.hw.Load(), p.start.Load()
	to = min(to, hw)
	if from < start {
		return nil, nil, 0, nil, fmt.Errorf("%w: %d below the log start %d", ErrOffsetOutOfRange, from, start)
	}
	if from >= to {
		return nil, nil, from, func() {}, nil
	}
	p.mu.Lock()
	segs := p.segs
	p.mu.Unlock()
	seg, end := int64(0), to-1
	if len(segs) > 0 {
		i := segmentFor(segs, from)
		if i < 0 || !segs[i].Local {
			return p.readKeysVia(ctx, from, to)
		}
		seg = segs[i].ID
		if i < len(segs)-1 {
			end = min(end, segs[i+1].Base-1)
		}
	}
	var pl resp.Pipeline
	pl.Cmd("XRANGE", p.streamKey(seg), from, end, "COUNT", keyScanCount)
	rs, err := p.t.e.rc.Exec(ctx, &pl)
	if err != nil {
		return nil, nil, 0, nil, fmt.Errorf("%w: read %s/%d at %d: %v", ErrStorageUnavailable, p.t.name, p.id, from, err)
	}
	rep := rs.At(0)
	if err := rep.Err(); err != nil {
		rs.Release()
		return nil, nil, 0, nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, from, err)
	}
	recs, txns, err = parseKeyEntriesTxn(rep.Raw, make([]record.Record, 0, min(keyScanCount, end-from+1)), nil)
	if err != nil {
		rs.Release()
		return nil, nil, 0, nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, from, err)
	}
	next = end + 1
	if n := len(recs); n > 0 {
		next = recs[n-1].Offset + 1
	}
	return recs, txns, next, rs.Release, nil
}

// readKeysVia is readKeys through Read, for segments not in Redis.
func (p *Partition) readKeysVia(ctx context.Context, from, to int64) ([]record.Record, []record.Txn, int64, func(), error) {
	res, err := p.Read(ctx, from, 8<<20)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	recs, txns := res.Records, res.Txns
	next := to
	for i := range recs {
		if recs[i].Offset >= to {
			recs = recs[:i]
			break
		}
	}
	if n := len(recs); n > 0 && n == len(res.Records) {
		next = recs[n-1].Offset + 1
	}
	if len(txns) > len(recs) {
		txns = txns[:len(recs)]
	}
	return recs, txns, next, res.Release, nil
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
// entry's transaction (__txn, __ctl), parallel to recs, once one entry has
// one: txns stays as it came while no entry is transactional.
func parseKeyEntriesTxn(b []byte, recs []record.Record, txns []record.Txn) ([]record.Record, []record.Txn, error) {
	w := resp.NewWalker(b)
	n, err := w.Array()
	if err != nil {
		return recs, txns, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
	}
	base := len(recs) // txns, when used, is parallel to recs[base:]
	for range n {
		var id []byte
		var nf int
		two, err := w.Array()
		if err == nil && two != 2 {
			err = fmt.Errorf("stream entry of %d elements", two)
		}
		if err == nil {
			id, err = w.Bulk()
		}
		if err == nil {
			nf, err = w.Array()
		}
		if err == nil && nf%2 != 0 {
			err = fmt.Errorf("stream entry of %d fields and values", nf)
		}
		if err != nil {
			return recs, txns, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
		}
		off, _, err := entry.ParseID(id)
		if err != nil {
			return recs, txns, err
		}
		rec := record.Record{Offset: off}
		txn := record.Txn{ProducerID: -1}
		for j := 0; j < nf; j += 2 {
			name, err := w.Bulk()
			var val []byte
			if err == nil {
				val, err = w.Bulk()
			}
			if err != nil {
				return recs, txns, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
			}
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
			txns = append(padTxns(txns, len(recs)-base-1), txn)
		}
	}
	if len(txns) > 0 {
		txns = padTxns(txns, len(recs)-base)
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
