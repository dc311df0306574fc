package engine

import (
	"cmp"
	"slices"

	"github.com/korvet/korvet/engine/record"
)

// The KV view and transactions. The index applies a partition's log as a
// read_committed consumer reads it: up to the last stable offset (LSO),
// leaving out control records (commit and abort markers) and the records
// of aborted transactions. So the checkpoint never passes the LSO: while a
// transaction is open, what comes after its first record (transactional or
// not) waits for its marker, and a partition counts as caught up once the
// index has reached the LSO. A record of producer P at offset o is aborted
// iff the aborted index holds an entry of P with first <= o <= marker.
// Compaction works below the checkpoint, so below the LSO too.

// abortedSet answers "is this record of an aborted transaction?" for a
// stretch of the log, from the partition's aborted index.
type abortedSet struct {
	list  []abortedTxn // by marker offset; shared with the partition, read only
	byPid map[int64][]abortedTxn
}

// stableView returns kvTarget and the partition's aborted transactions
// whose marker is at or after from, read under one lock: every transaction
// that ended below that target and was aborted is in the set.
func (p *Partition) stableView(from int64) (int64, *abortedSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.aborted, from, func(a abortedTxn, off int64) int { return cmp.Compare(a.marker, off) })
	// p.aborted is only appended to or replaced, never changed in place,
	// so the slice stays valid after the lock.
	return max(p.lastStableLocked(), p.start.Load()), &abortedSet{list: p.aborted[i:len(p.aborted):len(p.aborted)]}
}

// kvTarget is the offset the index may apply the partition up to: its
// LSO, or the log start when records were deleted past it (nothing below
// is readable, and what comes after still waits).
func (p *Partition) kvTarget() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.lastStableLocked(), p.start.Load())
}

// aborted reports whether the record of producer pid at off belongs to an
// aborted transaction. A producer's transactions in a partition do not
// overlap, so the first entry of pid whose marker is at or after off is
// the only candidate.
func (a *abortedSet) aborted(pid, off int64) bool {
	if a == nil || len(a.list) == 0 || pid < 0 {
		return false
	}
	if a.byPid == nil {
		a.byPid = make(map[int64][]abortedTxn)
		for _, t := range a.list {
			a.byPid[t.pid] = append(a.byPid[t.pid], t)
		}
	}
	l := a.byPid[pid]
	i, _ := slices.BinarySearchFunc(l, off, func(t abortedTxn, o int64) int { return cmp.Compare(t.marker, o) })
	return i < len(l) && l[i].first <= off
}

// skipTxn reports whether record i (at off) of a read is no key's value:
// a control record or a record of an aborted transaction. txns is the
// read's per-record transaction info, empty when none is transactional.
func skipTxn(txns []record.Txn, i int, off int64, ab *abortedSet) bool {
	if i >= len(txns) {
		return false
	}
	t := &txns[i]
	return t.Control || ab.aborted(t.ProducerID, off)
}
