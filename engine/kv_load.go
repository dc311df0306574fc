package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/korvet/korvet/engine/index"
)

// loadBudget bounds the memory a partition's bulk load collects before it
// writes a table; a rebuild loads up to 4 partitions at once (fillAll),
// and a nightly rebuild runs under MemoryHigh=512M.
const loadBudget = 32 << 20

// partLoad is a bulk fill's pending table.
type partLoad struct {
	l    *index.Loader
	next int64 // records below are in l or the index
}

// loadChunk is applyChunk for a bulk index: the chunk's records go into
// the partition's Loader, with the same rules (kv_txn.go, applyRecord),
// and the Loader is written as a table once it holds loadBudget bytes.
// The latest record of a key wins within a table, and a later table wins
// over an earlier one, as later batches do.
func (kv *kvIndex) loadChunk(ctx context.Context, kp *kvPart, c *fillChunk, limit int64, gen uint64, ld *partLoad, progress *atomic.Int64) error {
	p := kp.p
	if c.from > ld.next && c.from > p.LogStart() {
		// Unreachable while reads start where the load is; refuse rather
		// than leave a hole.
		return fmt.Errorf("catch-up read at %d past %d", c.from, ld.next)
	}
	end := c.next
	if limit >= 0 {
		end = min(end, limit)
	}
	if end <= ld.next {
		return nil
	}
	// Taken now, after the reads' target, as in applyChunk; transactions
	// that ended below ld.next have no record at or past it.
	_, ab := p.stableView(ld.next)
	compacted := p.t.Compacted()
	n := 0
	for i := range c.recs {
		r := &c.recs[i]
		if r.Offset < ld.next || r.Offset >= end {
			continue
		}
		if skipTxn(c.txns, i, r.Offset, ab) {
			continue
		}
		n++
		if r.Key == nil {
			continue
		}
		if !ld.l.Fits(r.Key) {
			// The table being written holds keys in order and r.Key
			// comes before its last: the table ends here, every record
			// below r.Offset in it.
			ld.next = r.Offset
			if err := kv.loadFlush(ctx, kp, gen, ld); err != nil {
				return err
			}
		}
		if r.Value == nil && !compacted {
			ld.l.Delete(r.Key)
		} else {
			ld.l.Set(r.Key, index.Pointer{Partition: p.id, Offset: r.Offset, Tombstone: r.Value == nil})
		}
	}
	ld.next = end
	kp.mu.Lock()
	kp.loaded = end
	kp.mu.Unlock()
	if progress != nil {
		progress.Add(int64(n))
	}
	budget := loadBudget
	if kv.loadBudget > 0 {
		budget = kv.loadBudget
	}
	if ld.l.Size() >= budget {
		return kv.loadFlush(ctx, kp, gen, ld)
	}
	return nil
}

// loadFlush writes the pending table with the checkpoint ld.next.
func (kv *kvIndex) loadFlush(ctx context.Context, kp *kvPart, gen uint64, ld *partLoad) error {
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if kv.closed {
		return errKVClosed
	}
	if kv.gen != gen {
		return errKVSwapped
	}
	if ld.next <= kp.applied {
		ld.l.Reset() // nothing read past the checkpoint
		return nil
	}
	if err := ld.l.Flush(ctx, ld.next); err != nil {
		return fmt.Errorf("key index: load %s/%d: %w", kp.p.t.name, kp.p.id, err)
	}
	kp.applied = ld.next
	kp.advanced()
	kp.err = nil
	kp.kt.dirty.Store(true)
	return nil
}
