package engine

import (
	"errors"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
)

// onCommit indexes a committed transaction before its producers hear back
// (the flush loop calls it, see Partition.index): batches are its records
// in offset order, Offset set, valid only during the call; next is the
// partition's new high watermark. When the partition is behind (a restart, a failed append whose outcome
// was unknown) it leaves the records to the catch-up, which reads them
// from the log.
func (kv *kvIndex) onCommit(p *Partition, batches [][]record.Record, next int64) {
	if !p.t.indexed() || len(batches) == 0 || len(batches[0]) == 0 {
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
	base := batches[0][0].Offset
	if base > kp.applied {
		kp.setLagging()
		kv.nudge()
		return
	}
	if next <= kp.applied {
		return
	}
	b := kv.ix.NewBatch()
	defer b.Close()
	compacted := p.t.Compacted()
	for _, recs := range batches {
		for i := range recs {
			if recs[i].Offset >= kp.applied {
				if err := applyRecord(b, p.t.id, p.id, compacted, &recs[i]); err != nil {
					kv.applyFailed(kp, err)
					return
				}
			}
		}
	}
	if err := kv.commit(b, kp, next); err != nil {
		kv.applyFailed(kp, err)
		return
	}
	if kp.applied >= p.HighWatermark() {
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
