package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// maxReadCount caps the entries one XRANGE asks for.
const maxReadCount = 10000

// ReadResult holds records read from a partition. The records point into
// buffers the result owns: call Release when done with them.
type ReadResult struct {
	Records []record.Record
	// Codecs holds, per record, the compression codec its producer used
	// (0 for none, and for records read from the cold tier).
	Codecs []int8
	// Txns holds, per record, the transaction it belongs to, and is empty
	// when no record read belongs to one (the common case); records of no
	// transaction have ProducerID -1.
	Txns          []record.Txn
	HighWatermark int64
	LogStart      int64

	rss        []*resp.Replies // the replies the records point into
	replyBytes int             // their size
	dec        entry.Decoder
	pl         resp.Pipeline // readAt's XRANGE
	key        []byte        // readAt's stream key
	// cut: the read stopped (for maxBytes or its entry count) before the
	// end of the range it read, so records may follow the last one.
	cut bool
	// size is what the records count (Record.Size), for local reads.
	size int
}

var readResults = sync.Pool{New: func() any { return new(ReadResult) }}

// newReadResult returns a pooled ReadResult whose decoder reads p's
// compressed values.
func (p *Partition) newReadResult() *ReadResult {
	res := readResults.Get().(*ReadResult)
	res.dec.Dicts = p.t.z.dicts
	return res
}

// Release returns the result's buffers for reuse.
func (r *ReadResult) Release() {
	for _, rs := range r.rss {
		rs.Release()
	}
	clear(r.rss)
	r.rss, r.replyBytes = r.rss[:0], 0
	clear(r.Records)
	r.Records, r.Codecs, r.Txns = r.Records[:0], r.Codecs[:0], r.Txns[:0]
	r.cut, r.size = false, 0
	r.dec.Reset()
	r.dec.Dicts = nil
	readResults.Put(r)
}

// Read returns committed records from offset on, about maxBytes of them
// (at least one record when any is there, as Kafka's fetch requires).
// It returns ErrOffsetOutOfRange when offset is below the log start or
// beyond the high watermark.
func (p *Partition) Read(ctx context.Context, offset int64, maxBytes int) (*ReadResult, error) {
	return p.read(ctx, offset, readLimits{maxBytes: maxBytes}, -1)
}

// ReadWhole is Read for the first partition of a fetch to return records
// (KIP-74): when maxBytes cuts the append holding the first record, the
// read goes on to that append's end, up to wholeMax bytes of records, so a
// consumer whose limits are smaller than what a producer sent still gets
// it whole and moves on by whole batches, as with Kafka. korvet stores
// one entry per record; the batches stream has where each append ends
// (an append is a flush round: one produced batch, or several that came
// together, within MaxAppendBytes unless one alone is larger). wholeMax
// is raised to maxBytes when below it.
func (p *Partition) ReadWhole(ctx context.Context, offset int64, maxBytes, wholeMax int) (*ReadResult, error) {
	return p.ReadWholeBelow(ctx, offset, maxBytes, wholeMax, -1)
}

// ReadBelow is Read of the records below offset limit only (none when
// limit is -1): a read_committed fetch reads below the last stable offset.
func (p *Partition) ReadBelow(ctx context.Context, offset int64, maxBytes int, limit int64) (*ReadResult, error) {
	return p.read(ctx, offset, readLimits{maxBytes: maxBytes}, untilOf(limit))
}

// ReadWholeBelow is ReadWhole of the records below offset limit only
// (none when limit is -1).
func (p *Partition) ReadWholeBelow(ctx context.Context, offset int64, maxBytes, wholeMax int, limit int64) (*ReadResult, error) {
	return p.read(ctx, offset, readLimits{maxBytes: maxBytes, wholeMax: wholeMax}, untilOf(limit))
}

// readAt returns the record at offset, if there is one: the KV view's
// read of one record. A local segment's entry is read alone (XRANGE of
// its own id, COUNT 1) through the engine's Batcher, so that concurrent
// reads share round trips; none comes back when the entry is gone
// (compaction deleted it). Elsewhere (a cold segment, offset at the high
// watermark) it is Read of one record, which may return the record after
// offset. ErrOffsetOutOfRange as Read.
func (p *Partition) readAt(ctx context.Context, offset int64) (*ReadResult, error) {
	hw, start := p.hw.Load(), p.start.Load()
	if offset < start || offset > hw {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, start, hw)
	}
	p.mu.Lock()
	segs := p.segs
	p.mu.Unlock()
	i := segmentFor(segs, offset)
	if offset == hw || i < 0 || !segs[i].Local {
		return p.Read(ctx, offset, 1)
	}
	res := p.newReadResult()
	res.HighWatermark, res.LogStart = hw, start
	res.key = p.t.e.k.AppendStream(res.key[:0], p.t.name, p.id, segs[i].ID)
	pl := &res.pl
	pl.Reset()
	pl.Array(6)
	pl.String("XRANGE")
	pl.Bulk(res.key)
	pl.Int(offset)
	pl.Int(offset)
	pl.String("COUNT")
	pl.Int(1)
	rs, err := p.t.e.reads.Exec(ctx, pl)
	if err != nil {
		res.Release()
		return nil, fmt.Errorf("read %s/%d at %d: %w: %v", p.t.name, p.id, offset, ErrStorageUnavailable, err)
	}
	res.rss = append(res.rss, rs)
	rep := rs.At(0)
	if err := rep.Err(); err != nil {
		res.Release()
		return nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, offset, err)
	}
	if rep.Len() > 0 {
		ent, ok := rep.First()
		if !ok {
			res.Release()
			return nil, fmt.Errorf("read %s/%d at %d: malformed XRANGE reply", p.t.name, p.id, offset)
		}
		if _, err := res.appendEntry(ent); err != nil {
			res.Release()
			return nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, offset, err)
		}
	}
	res.fitTxns(len(res.Records))
	return res, nil
}

// noRecords is read's until for a range that holds nothing: -1 already
// means no bound.
const noRecords = -2

// untilOf turns an exclusive limit (-1: none) into read's inclusive until.
func untilOf(limit int64) int64 {
	switch {
	case limit < 0:
		return -1
	case limit == 0:
		return noRecords
	}
	return limit - 1
}

// readLimits bound one read: about maxBytes of records and, when wholeMax
// is larger (ReadWhole), up to wholeMax of those of the append holding the
// first record. It also carries the read's progress across the XRANGEs
// it takes.
type readLimits struct {
	maxBytes, wholeMax int
	// wholeEnd is the last offset of the append holding the first record
	// (-1: none found), once looked is set.
	wholeEnd int64
	looked   bool
	// size is what the records read so far count (Record.Size).
	size int
	// avg is the partition's average entry size, for XRANGE counts.
	avg int64
}

// whole tells whether the read may go past maxBytes for the first append.
func (l *readLimits) whole() bool { return l.wholeMax > l.maxBytes }

// limitAt is the bytes the records up to one at offset off may take.
func (l *readLimits) limitAt(off int64) int {
	if l.whole() && l.looked && off <= l.wholeEnd {
		return l.wholeMax
	}
	return l.maxBytes
}

// setEnd takes the first append's end from an XRANGE of the batches
// stream (see parseBatchEntry).
func (l *readLimits) setEnd(r resp.Reply) {
	l.looked, l.wholeEnd = true, -1
	if r.Err() != nil {
		return
	}
	if end, _, ok := parseBatchEntry(r); ok {
		l.wholeEnd = end
	}
}

// read is Read up to offset until (inclusive) when until >= 0.
func (p *Partition) read(ctx context.Context, offset int64, lim readLimits, until int64) (*ReadResult, error) {
	res := p.newReadResult()
	hw, start := p.hw.Load(), p.start.Load()
	res.HighWatermark, res.LogStart = hw, start
	if offset < start || offset > hw {
		res.Release()
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, start, hw)
	}
	last := hw - 1
	if until >= 0 {
		last = min(last, until)
	}
	if offset > last || lim.maxBytes <= 0 || until == noRecords {
		return res, nil
	}
	// Ask Redis for about as many entries as fit in maxBytes, judged by
	// the size of the records the last large read found, or else by the
	// partition's average entry size less what the entry's field names
	// and timestamp add. (Asking for too few cuts the fetch short, too
	// many decodes records only to drop them.)
	p.mu.Lock()
	lim.avg = p.readSize.Load()
	if lim.avg <= 0 {
		lim.avg = 100
		if p.next > 0 && p.bytes > 0 {
			lim.avg = max(p.bytes/p.next-entryFieldsSize, 9)
		}
	}
	segs := p.segs
	p.mu.Unlock()
	count := min(readCount(lim.maxBytes, lim.avg), maxReadCount)

	// Walk the segments from the one holding offset: one may hold nothing
	// at or after it (compaction deletes records), so go on to the next.
	for i := max(segmentFor(segs, offset), 0); i < len(segs) && offset <= last; i++ {
		sg := segs[i]
		end := last
		if i < len(segs)-1 {
			end = min(end, segs[i+1].Base-1)
		}
		if offset > end {
			continue
		}
		var err error
		switch {
		case sg.Local:
			err = p.readStreamLimits(ctx, res, sg.ID, offset, end, min(count, end-offset+1), &lim)
		default:
			err = p.readColdInto(ctx, res, sg, offset, end, &lim)
		}
		if err != nil {
			res.Release()
			return nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, offset, err)
		}
		if n := len(res.Records); n > 0 {
			res.size = lim.size
			if n >= 64 {
				p.readSize.Store(max(int64(lim.size/n), 1))
			}
			res.fitTxns(n)
			return res, nil
		}
		offset = end + 1
	}
	res.fitTxns(len(res.Records))
	return res, nil
}

// entryFieldsSize is what entry.EncodedSize counts for a keyed record
// with a value beyond what Record.Size does: the entry, its timestamp and
// the field names.
const entryFieldsSize = 49

// readCount is the entries an XRANGE asks for to fill maxBytes with
// records of about avg bytes: a few more than that, so that records a
// little smaller than the average do not cut the read short.
func readCount(maxBytes int, avg int64) int64 {
	n := int64(maxBytes) / max(avg, 1)
	return n + n/64 + 1
}

// readColdInto reads records [from, to] of an archived segment into res.
// A ReadWhole cut within its first append reads that append again, up to
// wholeMax (cold reads come from cached row groups).
func (p *Partition) readColdInto(ctx context.Context, res *ReadResult, sg Segment, from, to int64, lim *readLimits) error {
	recs, txns, err := p.readCold(ctx, sg, from, lim.maxBytes)
	if err != nil {
		return err
	}
	for len(recs) > 0 && recs[len(recs)-1].Offset > to {
		recs = recs[:len(recs)-1] // past until
	}
	cut := len(recs) > 0 && recs[len(recs)-1].Offset < to
	if cut && lim.whole() {
		if err := p.lookupWholeEnd(ctx, recs[0].Offset, lim); err == nil && lim.wholeEnd > recs[len(recs)-1].Offset {
			hi := min(lim.wholeEnd, to)
			more, moreTxns, err := p.readCold(ctx, sg, from, lim.wholeMax)
			if err == nil && len(more) > len(recs) {
				recs, txns = more, moreTxns
				for len(recs) > 0 && recs[len(recs)-1].Offset > hi {
					recs = recs[:len(recs)-1]
				}
				cut = len(recs) > 0 && recs[len(recs)-1].Offset < to
			}
		}
	}
	res.Records = append(res.Records, recs...)
	res.Codecs = append(res.Codecs, make([]int8, len(recs))...)
	if len(txns) > 0 {
		res.Txns = append(res.Txns, txns[:len(recs)]...)
	}
	res.cut = cut
	return nil
}

// lookupWholeEnd finds the end of the append holding offset from, for a
// ReadWhole, in a round trip of its own.
func (p *Partition) lookupWholeEnd(ctx context.Context, from int64, lim *readLimits) error {
	if lim.looked {
		return nil
	}
	r, err := p.t.e.rc.Do(ctx, "XRANGE", p.batchesKey, strconv.FormatInt(from, 10), "+", "COUNT", 1)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
	}
	lim.setEnd(r)
	return nil
}

// readStream reads entries [from, to] of one segment stream into res, at
// most count of them and about maxBytes (at least one record).
func (p *Partition) readStream(ctx context.Context, res *ReadResult, seg, from, to, count int64, maxBytes int) error {
	return p.readStreamLimits(ctx, res, seg, from, to, count, &readLimits{maxBytes: maxBytes, avg: 100})
}

// readStreamLimits reads entries [from, to] of one segment stream into
// res, starting with one XRANGE of count entries. A ReadWhole looks up
// where the first append ends in the same round trip when that XRANGE may
// not reach the range's end, and reads on from the last record (never
// again from the first) while the append goes on and wholeMax allows.
func (p *Partition) readStreamLimits(ctx context.Context, res *ReadResult, seg, from, to, count int64, lim *readLimits) error {
	key := p.streamKey(seg)
	hi := to // the end of what this XRANGE reads
	for {
		var pl resp.Pipeline
		pl.Cmd("XRANGE", key, strconv.FormatInt(from, 10), strconv.FormatInt(hi, 10), "COUNT", count)
		lookup := lim.whole() && !lim.looked && count < hi-from+1
		if lookup {
			pl.Cmd("XRANGE", p.batchesKey, strconv.FormatInt(from, 10), "+", "COUNT", 1)
		}
		rs, err := p.t.e.rc.Exec(ctx, &pl)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
		}
		res.rss = append(res.rss, rs)
		res.replyBytes += len(rs.At(0).Raw)
		if lookup {
			lim.setEnd(rs.At(1))
		}
		full, err := res.walkRange(rs.At(0), hi, count, lim)
		if err != nil {
			return err
		}
		if !res.cut {
			// [from, hi] is read; records may follow when hi is the
			// first append's end.
			res.cut = hi < to
			return nil
		}
		n := len(res.Records)
		if n == 0 || !lim.whole() || lim.size >= lim.wholeMax {
			return nil
		}
		if lim.looked && lim.wholeEnd < res.Records[0].Offset {
			// Looked up from an offset compaction emptied: the first
			// record is in a later append.
			lim.looked = false
		} else if full && lim.looked {
			return nil // the limits were the right ones
		}
		if err := p.lookupWholeEnd(ctx, res.Records[0].Offset, lim); err != nil {
			return nil // what was read is a fine answer
		}
		lastOff := res.Records[n-1].Offset
		if lim.wholeEnd <= lastOff {
			return nil
		}
		// Read on through the rest of the first append.
		from, hi = lastOff+1, min(lim.wholeEnd, to)
		count = min(readCount(lim.wholeMax-lim.size, lim.avg), maxReadCount, hi-from+1)
	}
}

// walkRange decodes the entries of an XRANGE reply of at most count
// entries up to offset hi onto res, within lim, and sets res.cut when
// records may follow in [.., hi]. full: a byte limit stopped it.
func (res *ReadResult) walkRange(rep resp.Reply, hi, count int64, lim *readLimits) (full bool, err error) {
	if err := rep.Err(); err != nil {
		return false, err
	}
	w := resp.NewWalker(rep.Raw)
	n, err := w.Array()
	if err != nil {
		return false, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
	}
	// Fewer entries than asked for means the range ended; otherwise more
	// may follow, unless the last one is the range's end (checked below).
	res.cut = int64(n) == count
	for range n {
		rec, err := res.walkEntry(&w)
		if err != nil {
			return false, err
		}
		limit := lim.limitAt(rec.Offset)
		// Past the limit only the first record stays (KIP-74).
		size := rec.Size()
		if lim.size+size > limit && len(res.Records) > 1 {
			res.Records = res.Records[:len(res.Records)-1]
			res.Codecs = res.Codecs[:len(res.Codecs)-1]
			res.cut = true
			return true, nil
		}
		if lim.size += size; lim.size >= limit {
			res.cut = true
			full = true
			break
		}
	}
	if n := len(res.Records); n > 0 && res.Records[n-1].Offset >= hi {
		res.cut = false
	}
	return full, nil
}

// OffsetForTime returns the first offset whose record has a timestamp at or
// after ts, or the high watermark when there is none (Kafka's ListOffsets).
func (p *Partition) OffsetForTime(ctx context.Context, ts int64) (offset, timestamp int64, err error) {
	hw, start := p.hw.Load(), p.start.Load()
	if start >= hw {
		return hw, -1, nil
	}
	// The batches stream maps each append's last offset to the running max
	// timestamp, which never decreases: binary search it for the first
	// append whose max reaches ts; the record is inside that append.
	lo, hi := start, hw-1 // search over offsets
	found := int64(-1)
	for lo <= hi {
		mid := lo + (hi-lo)/2
		r, err := p.t.e.rc.Do(ctx, "XRANGE", p.batchesKey, strconv.FormatInt(mid, 10), "+", "COUNT", 1)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: list offsets by time: %v", ErrStorageUnavailable, err)
		}
		last, maxTs, ok := parseBatchEntry(r)
		if !ok {
			break
		}
		if maxTs >= ts {
			found = last
			hi = mid - 1
		} else {
			lo = last + 1
		}
	}
	if found < 0 {
		return hw, -1, nil
	}
	// Scan from the start of that append (at most the previous append's
	// end) for the first record at or after ts.
	from := start
	if found > start {
		// An end ID without a sequence means "<offset>-max": this finds
		// the append that ends before found.
		r, err := p.t.e.rc.Do(ctx, "XREVRANGE", p.batchesKey, strconv.FormatInt(found-1, 10), "-", "COUNT", 1)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: list offsets by time: %v", ErrStorageUnavailable, err)
		}
		if prev, _, ok := parseBatchEntry(r); ok {
			from = max(prev+1, start)
		}
	}
	for from <= found {
		res, err := p.Read(ctx, from, 1<<20)
		if err != nil {
			return 0, 0, err
		}
		for i := range res.Records {
			if res.Records[i].Timestamp >= ts {
				o, t := res.Records[i].Offset, res.Records[i].Timestamp
				res.Release()
				return o, t, nil
			}
		}
		if len(res.Records) == 0 {
			res.Release()
			break
		}
		from = res.Records[len(res.Records)-1].Offset + 1
		res.Release()
	}
	return hw, -1, nil
}

// parseBatchEntry reads the first entry of an XRANGE reply on the batches
// stream: (last offset, running max timestamp).
func parseBatchEntry(r resp.Reply) (last, maxTs int64, ok bool) {
	if r.Len() == 0 {
		return 0, 0, false
	}
	var ents, pair, fields []resp.Reply
	ents = r.Elems(ents)
	pair = ents[0].Elems(pair)
	if len(pair) != 2 {
		return 0, 0, false
	}
	last, _, err := entry.ParseID(pair[0].Bytes())
	if err != nil {
		return 0, 0, false
	}
	fields = pair[1].Elems(fields)
	maxTs = -1
	for i := 0; i+1 < len(fields); i += 2 {
		if string(fields[i].Bytes()) == "t" {
			maxTs, _ = strconv.ParseInt(string(fields[i+1].Bytes()), 10, 64)
		}
	}
	return last, maxTs, true
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3), or (-1, -1) for an empty log.
func (p *Partition) MaxTimestamp(ctx context.Context) (offset, timestamp int64, err error) {
	p.mu.Lock()
	maxTs := p.maxTs
	p.mu.Unlock()
	if p.start.Load() >= p.hw.Load() {
		return -1, -1, nil
	}
	off, ts, err := p.OffsetForTime(ctx, maxTs)
	if err != nil || ts < 0 {
		return -1, -1, err
	}
	return off, ts, nil
}

// retentionTarget computes the offset retention trims the log to.
func (p *Partition) retentionTarget(ctx context.Context, now time.Time) (int64, error) {
	s := p.t.currentSettings()
	if s.retentionMs < 0 && s.retentionBytes < 0 {
		return -1, nil
	}
	p.mu.Lock()
	total := p.bytes
	p.mu.Unlock()
	hw := p.hw.Load()
	cutoff := now.UnixMilli() - s.retentionMs
	target := int64(-1)
	from := "-"
	for {
		r, err := p.t.e.rc.Do(ctx, "XRANGE", p.batchesKey, from, "+", "COUNT", 500)
		if err != nil {
			return -1, fmt.Errorf("retention scan: %w", err)
		}
		var ents, pair, fields []resp.Reply
		ents = r.Elems(ents)
		if len(ents) == 0 {
			return target, nil
		}
		for _, ent := range ents {
			pair = ent.Elems(pair[:0])
			if len(pair) != 2 {
				return target, nil
			}
			last, _, err := entry.ParseID(pair[0].Bytes())
			if err != nil {
				return target, nil
			}
			var t, b int64
			fields = pair[1].Elems(fields[:0])
			for i := 0; i+1 < len(fields); i += 2 {
				v, _ := strconv.ParseInt(string(fields[i+1].Bytes()), 10, 64)
				switch string(fields[i].Bytes()) {
				case "t":
					t = v
				case "b":
					b = v
				}
			}
			expired := s.retentionMs >= 0 && t < cutoff
			// Like Kafka, size retention never leaves less than
			// retention.bytes behind.
			tooBig := s.retentionBytes >= 0 && total-b >= s.retentionBytes
			if !expired && !tooBig {
				return target, nil
			}
			target = min(last+1, hw)
			from = string(entry.AppendID([]byte("("), last, 0))
		}
	}
}

// applyRetention trims the log when retention allows it. The trim is
// committed by the partition's flush, in the same transaction as any
// append then in flight.
func (p *Partition) applyRetention(ctx context.Context, now time.Time) error {
	target, err := p.retentionTarget(ctx, now)
	if err != nil || target <= p.start.Load() {
		return err
	}
	p.mu.Lock()
	if target > p.trimTo {
		p.trimTo = target
	}
	p.kickLocked()
	p.mu.Unlock()
	return nil
}

// appendEntry decodes one stream entry (its ID and fields) onto
// res.Records, res.Codecs and res.Txns.
func (res *ReadResult) appendEntry(ent resp.Reply) (*record.Record, error) {
	w := resp.NewWalker(ent.Raw)
	return res.walkEntry(&w)
}

// walkEntry is appendEntry for the next entry of w, an XRANGE-style
// reply walked without a Reply per element: fetches decode thousands of
// entries per read.
func (res *ReadResult) walkEntry(w *resp.Walker) (*record.Record, error) {
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
		return nil, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
	}
	off, codec, err := entry.ParseID(id)
	if err != nil {
		return nil, err
	}
	res.dec.Begin()
	for j := 0; j < nf; j += 2 {
		name, err := w.Bulk()
		var val []byte
		if err == nil {
			val, err = w.Bulk()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: offset %d: %v", entry.ErrMalformed, off, err)
		}
		res.dec.Field(name, val)
	}
	res.Records = append(res.Records, record.Record{Offset: off})
	res.Codecs = append(res.Codecs, codec)
	rec := &res.Records[len(res.Records)-1]
	var txn record.Txn
	if err := res.dec.FinishTxn(rec, &txn); err != nil {
		return nil, fmt.Errorf("offset %d: %w", off, err)
	}
	if txn.ProducerID >= 0 || len(res.Txns) > 0 {
		n := len(res.Records) - 1
		for len(res.Txns) < n {
			res.Txns = append(res.Txns, record.Txn{ProducerID: -1})
		}
		res.Txns = append(res.Txns[:n], txn)
	}
	return rec, nil
}

// fitTxns makes Txns n long, unless it is empty (no transactions).
func (res *ReadResult) fitTxns(n int) {
	if len(res.Txns) == 0 {
		return
	}
	if len(res.Txns) > n {
		res.Txns = res.Txns[:n]
	}
	for len(res.Txns) < n {
		res.Txns = append(res.Txns, record.Txn{ProducerID: -1})
	}
}
