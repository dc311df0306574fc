package engine

import (
	"errors"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
)

// kvBatch is one committed batch for onCommit: its records, and its
// producer when the batch is transactional (else -1).
type kvBatch struct {
	recs []record.Record
	pid  int64
}

// onCommit indexes a committed round before its producers hear back (the
// flush loop calls it, see Partition.index, after the partition's state
// took the round): batches are its records in offset order, Offset set,
// valid only during the call; next is the partition's new high watermark.
// It applies up to the last stable offset only (kv_txn.go): a round behind
// an open transaction waits for its marker, and the records of a
// transaction that ends in a later round are read back from the log by the
// catch-up then. When the partition is behind (a restart, a failed append
// whose outcome was unknown, a transaction just ended) it leaves the
// records to the catch-up, which reads them from the log.
func (kv *kvIndex) onCommit(p *Partition, batches []kvBatch, next int64) {
	if !p.t.indexed() {
		return
	}
	kt, err := kv.topic(p.t)
	if err != nil {
		if !errors.Is(err, errKVClosed) {
			kv.log.Warn("key index", "topic", p.t.name, "err", err)
		}
		return
	}
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return
	}
	kp := kt.part(p.id)
	if kp == nil {
		return
	}
	kp.mu.Lock()
	defer kp.mu.Unlock()
	lso, ab := p.stableView(kp.applied)
	end := min(next, lso)
	if end <= kp.applied {
		return // nothing new below the LSO
	}
	base := int64(-1)
	for _, b := range batches {
		if len(b.recs) > 0 {
			base = b.recs[0].Offset
			break
		}
	}
	if base < 0 || base > kp.applied {
		// Records below the round (a gap, or a transaction that ended in
		// this round with records in earlier ones) come from the log.
		kp.setLagging()
		kv.nudge()
		return
	}
	b := kv.ix.NewBatch()
	defer b.Close()
	compacted := p.t.Compacted()
	for _, bt := range batches {
		for i := range bt.recs {
			r := &bt.recs[i]
			if r.Offset < kp.applied || r.Offset >= end {
				continue
			}
			if bt.pid >= 0 && ab.aborted(bt.pid, r.Offset) {
				continue
			}
			if err := applyRecord(b, p.t.id, p.id, compacted, r); err != nil {
				kv.applyFailed(kp, err)
				return
			}
		}
	}
	if err := kv.commit(b, kp, end); err != nil {
		kv.applyFailed(kp, err)
		return
	}
	if kp.applied >= lso {
		kp.setReady()
	}
}

// applyFailed leaves the partition to the catch-up; kp.mu must be held.
func (kv *kvIndex) applyFailed(kp *kvPart, err error) {
	kp.err = err
	kp.setLagging()
	kv.nudge()
	kv.log.Warn("key index: apply failed; catching up from the log", "topic", kp.p.t.name, "partition", kp.p.id, "err", err)
}

// commit writes b with the partition's new checkpoint; kp.mu must be held.
func (kv *kvIndex) commit(b *index.Batch, kp *kvPart, next int64) error {
	if err := b.SetCheckpoint(kp.p.t.id, kp.p.id, next); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	kp.applied = next
	kp.advanced()
	kp.err = nil
	kp.kt.dirty.Store(true)
	return nil
}

// applyRecord adds one record's effect to b. On a compacted topic a
// tombstone leaves a tombstone pointer, so that compaction can tell the
// latest tombstone of a key from older ones; elsewhere it deletes the key.
func applyRecord(b *index.Batch, topic [16]byte, part int32, compacted bool, r *record.Record) error {
	switch {
	case r.Key == nil:
		return nil
	case r.Value == nil && !compacted:
		return b.Delete(topic, r.Key)
	default:
		return b.Set(topic, r.Key, index.Pointer{Partition: part, Offset: r.Offset, Tombstone: r.Value == nil})
	}
}
