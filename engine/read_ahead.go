package engine

import (
	"context"
	"sync"
	"unsafe"

	"github.com/korvet/korvet/engine/record"
)

// ReadAhead is a read of a partition started before a fetch asks for it:
// a consumer sends its next fetch only once it has taken the last answer,
// so reading the next records from Redis while it does keeps Redis, korvet
// and the consumer busy at once instead of one after the other.
//
// A read-ahead answers a later read only if that read asks for the same
// records (offset, limits, isolation) and nothing that could change them
// happened since it started: no record left the log (compaction, a trim by
// retention or DeleteRecords, a segment dropped or the registry reloaded:
// the partition's removal count), the partition kept its leader and epoch,
// and the offset is still at or above the log start. Its records are
// committed (below the high watermark, and below the last stable offset
// for read_committed, when it started), and both only grow.
type ReadAhead struct {
	p                  *Partition
	offset             int64
	maxBytes, wholeMax int
	limit              int64
	removals           uint64
	epoch              int32
	lead               bool

	done chan struct{} // closed when the read has ended
	mu   sync.Mutex
	res  *ReadResult
	err  error
	over bool // taken or discarded: the read's result goes back at once
}

// StartReadAhead starts, in the background, the read that
// ReadWholeBelow(offset, maxBytes, wholeMax, limit) would make now
// (wholeMax <= maxBytes: ReadBelow's). ctx bounds the read. The caller
// must Take or Discard it.
func (p *Partition) StartReadAhead(ctx context.Context, offset int64, maxBytes, wholeMax int, limit int64) *ReadAhead {
	a := &ReadAhead{
		p: p, offset: offset, maxBytes: maxBytes, wholeMax: wholeMax, limit: limit,
		// Taken before the read: a removal the read may have missed is
		// counted after it.
		removals: p.removals.Load(), epoch: p.leaderEpoch.Load(), lead: p.lead.Load(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		res, err := p.read(ctx, offset, readLimits{maxBytes: maxBytes, wholeMax: wholeMax}, untilOf(limit))
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.over {
			if res != nil {
				res.Release()
			}
			return
		}
		a.res, a.err = res, err
	}()
	return a
}

// Take returns the read-ahead's result if it answers
// ReadWholeBelow(offset, maxBytes, wholeMax, limit) now, waiting for the
// read to end; otherwise, or when ctx ends first, it returns false and
// drops the result. The caller owns what it returns.
func (a *ReadAhead) Take(ctx context.Context, offset int64, maxBytes, wholeMax int, limit int64) (*ReadResult, bool) {
	select {
	case <-a.done:
	case <-ctx.Done():
		a.Discard()
		return nil, false
	}
	a.mu.Lock()
	res, err := a.res, a.err
	a.res, a.over = nil, true
	a.mu.Unlock()
	if err != nil || res == nil {
		return nil, false
	}
	if !a.answers(res, offset, maxBytes, wholeMax, limit) {
		res.Release()
		return nil, false
	}
	p := a.p
	res.HighWatermark = max(res.HighWatermark, p.hw.Load())
	res.LogStart = p.start.Load()
	return res, true
}

// answers tells whether res, the read-ahead's result, is what a read of
// these arguments would return now, but for records committed since.
func (a *ReadAhead) answers(res *ReadResult, offset int64, maxBytes, wholeMax int, limit int64) bool {
	p := a.p
	switch {
	case offset != a.offset || maxBytes != a.maxBytes:
		return false
	case (limit < 0) != (a.limit < 0) || limit < a.limit:
		// Another isolation level, or a last stable offset that went back.
		return false
	case p.removals.Load() != a.removals || p.leaderEpoch.Load() != a.epoch || p.lead.Load() != a.lead:
		return false
	case offset < p.start.Load():
		return false
	}
	whole := func(w int) int {
		if w <= maxBytes {
			return 0
		}
		return w
	}
	// A whole read that did not go past maxBytes is also a plain read.
	return whole(wholeMax) == whole(a.wholeMax) || whole(wholeMax) == 0 && res.size <= maxBytes
}

// Discard drops the read-ahead: its result goes back now, or when its
// read ends.
func (a *ReadAhead) Discard() {
	a.mu.Lock()
	res := a.res
	a.res, a.over = nil, true
	a.mu.Unlock()
	if res != nil {
		res.Release()
	}
}

// Held estimates the memory the result holds: the replies its records
// point into, the record slices and the decoder's arenas.
func (r *ReadResult) Held() int {
	return r.replyBytes + cap(r.Records)*int(unsafe.Sizeof(record.Record{})) + cap(r.Codecs) +
		cap(r.Txns)*int(unsafe.Sizeof(record.Txn{})) + r.dec.Held()
}

// Size is what the records count (Record.Size) when they were read from
// Redis; 0 for the cold tier's.
func (r *ReadResult) Size() int { return r.size }

// Cut tells whether the read stopped at its limits before the end of
// what it could read: more records may follow the last one.
func (r *ReadResult) Cut() bool { return r.cut }

// noteRemoval counts that records may have left the partition's log: read-
// aheads started before it are not taken.
func (p *Partition) noteRemoval() { p.removals.Add(1) }
