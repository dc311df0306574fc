package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/txn"
	"github.com/korvet/korvet/resp"
)

// Transactions in the log: records of transactional batches carry their
// producer (entry field __txn), each partition keeps its open transactions
// in its meta hash (txn:<pid>) and its aborted ones in an index stream
// (keys.Aborted), and a transaction ends in a partition with a control
// record, its marker, written at its own offset by WriteMarker.

// Marker is a transaction's end in one partition.
type Marker = txn.Marker

// TopicPartition names one partition.
type TopicPartition = txn.TopicPartition

// AbortedTxn is an aborted transaction of a partition, as read_committed
// fetches report it.
type AbortedTxn struct{ ProducerID, FirstOffset int64 }

// OpenTxn is a transaction with records in a partition and no marker yet.
type OpenTxn struct {
	ProducerID      int64
	Epoch           int16
	FirstOffset     int64
	TransactionalID string
}

// abortedTxn is an aborted-index entry: the transaction and its marker.
type abortedTxn struct {
	pid, first, marker int64
}

// openTxn is the value of a txn:<pid> field.
type openTxn struct {
	epoch int16
	first int64
	tid   string
}

func (o *openTxn) encode() string {
	return strconv.Itoa(int(o.epoch)) + "," + strconv.FormatInt(o.first, 10) + "," + o.tid
}

// parseOpenTxn reads "<epoch>,<first offset>,<transactional id>"; the id
// is last as it may hold commas.
func parseOpenTxn(v string) (*openTxn, error) {
	ep, rest, ok1 := strings.Cut(v, ",")
	first, tid, ok2 := strings.Cut(rest, ",")
	e, err1 := strconv.ParseInt(ep, 10, 16)
	f, err2 := strconv.ParseInt(first, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || f < 0 {
		return nil, fmt.Errorf("bad open transaction %q", v)
	}
	return &openTxn{epoch: int16(e), first: f, tid: tid}, nil
}

// txnField is the meta hash field of a producer's open transaction.
func txnField(pid int64) string { return "txn:" + strconv.FormatInt(pid, 10) }

// Control record types (the key's second int16).
const (
	controlAbort  = 0
	controlCommit = 1
)

// ControlKey and ControlValue are a marker's control record bytes, as
// Kafka writes them: key version 0 and type (0 abort, 1 commit); value
// version 0 and the coordinator epoch.
func ControlKey(commit bool) []byte {
	k := make([]byte, 4)
	if commit {
		binary.BigEndian.PutUint16(k[2:], controlCommit)
	}
	return k
}

// ControlValue: see ControlKey.
func ControlValue(coordinatorEpoch int32) []byte {
	v := make([]byte, 6)
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return v
}

// WriteMarker appends the control record for m when the partition has an
// open transaction of m.ProducerID at an epoch not above m.Epoch, in flush
// order with the appends, closing the open transaction and, for an abort,
// adding it to the aborted index, all in one MULTI. With no such open
// transaction it writes nothing and returns -1, nil: a coordinator retrying
// after a crash may ask twice. It returns the marker's offset.
func (p *Partition) WriteMarker(ctx context.Context, m Marker) (int64, error) {
	return p.writeMarker(ctx, m, -1)
}

// writeMarker is WriteMarker; with first >= 0 only for the open transaction
// that starts there (the resolver's check against a later transaction of
// the same producer and epoch).
func (p *Partition) writeMarker(ctx context.Context, m Marker, first int64) (int64, error) {
	recs := []record.Record{{Timestamp: time.Now().UnixMilli(), Key: ControlKey(m.Commit), Value: ControlValue(m.CoordinatorEpoch)}}
	pd := p.queueAppend(Producer{ID: m.ProducerID, Epoch: m.Epoch, FirstSeq: -1}, 0, recs, false, &markerReq{m: m, first: first})
	base, _, err := pd.Wait(ctx)
	if err != nil {
		return -1, fmt.Errorf("transaction marker for producer %d on %s/%d: %w", m.ProducerID, p.t.name, p.id, err)
	}
	return base, nil
}

// markerReq is what makes a Pending a marker.
type markerReq struct {
	m     Marker
	first int64 // -1: any open transaction of the producer
}

// LastStable is the last stable offset: the first offset of the oldest
// open transaction, else the high watermark.
func (p *Partition) LastStable() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastStableLocked()
}

func (p *Partition) lastStableLocked() int64 {
	lso := p.hw.Load()
	for _, o := range p.txns {
		lso = min(lso, o.first)
	}
	return lso
}

// AbortedTxns lists the aborted transactions whose marker is at or after
// from and whose first record is at or before to, by marker offset.
func (p *Partition) AbortedTxns(from, to int64) []AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.aborted, from, func(a abortedTxn, off int64) int { return cmp.Compare(a.marker, off) })
	var out []AbortedTxn
	for _, a := range p.aborted[i:] {
		if a.first <= to {
			out = append(out, AbortedTxn{ProducerID: a.pid, FirstOffset: a.first})
		}
	}
	return out
}

// OpenTxns lists the partition's open transactions by first offset.
func (p *Partition) OpenTxns() []OpenTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]OpenTxn, 0, len(p.txns))
	for pid, o := range p.txns {
		out = append(out, OpenTxn{ProducerID: pid, Epoch: o.epoch, FirstOffset: o.first, TransactionalID: o.tid})
	}
	slices.SortFunc(out, func(a, b OpenTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.ProducerID, b.ProducerID))
	})
	return out
}

// HasOpenTxn reports whether pid has an open transaction here at epoch.
func (p *Partition) HasOpenTxn(pid int64, epoch int16) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.txns[pid]
	return o != nil && o.epoch == epoch
}

// parseAborted reads the aborted index (XRANGE) into memory order.
func parseAborted(r resp.Reply) ([]abortedTxn, error) {
	if err := r.Err(); err != nil {
		return nil, err
	}
	var out []abortedTxn
	var ents, pair, fields []resp.Reply
	ents = r.Elems(ents)
	for _, ent := range ents {
		pair = ent.Elems(pair[:0])
		if len(pair) != 2 {
			return nil, fmt.Errorf("malformed aborted-index entry")
		}
		marker, _, err := entry.ParseID(pair[0].Bytes())
		if err != nil {
			return nil, fmt.Errorf("aborted index: %w", err)
		}
		a := abortedTxn{pid: -1, first: -1, marker: marker}
		fields = pair[1].Elems(fields[:0])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseInt(string(fields[i+1].Bytes()), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("aborted index entry %d: bad %s", marker, fields[i].Bytes())
			}
			switch string(fields[i].Bytes()) {
			case "pid":
				a.pid = v
			case "first":
				a.first = v
			}
		}
		if a.pid < 0 || a.first < 0 {
			return nil, fmt.Errorf("aborted index entry %d lacks pid or first", marker)
		}
		out = append(out, a)
	}
	return out, nil
}

// planTxn applies a batch of a transactional producer to the round's
// state: the transaction opens at the batch's first offset unless open.
// It reports whether the txn:<pid> field changes.
func (st *flushState) planTxn(op *Pending) {
	o := st.txns[op.prod.ID]
	if o != nil && o.epoch >= op.prod.Epoch {
		return
	}
	st.cloneTxns()
	n := &openTxn{epoch: op.prod.Epoch, first: op.base, tid: op.prod.TransactionalID}
	if o != nil {
		// An older epoch's transaction still open (its marker is due):
		// the LSO stays at its start.
		n.first = o.first
		if n.tid == "" {
			n.tid = o.tid
		}
	}
	st.txns[op.prod.ID] = n
	st.markTxn(op.prod.ID)
}

func (st *flushState) cloneTxns() {
	if st.txnsCopied {
		return
	}
	n := make(map[int64]*openTxn, len(st.txns)+1)
	for k, v := range st.txns {
		n[k] = v
	}
	st.txns, st.txnsCopied = n, true
}

func (st *flushState) markTxn(pid int64) {
	if !slices.Contains(st.txnChanged, pid) {
		st.txnChanged = append(st.txnChanged, pid)
	}
}

// checkTxn fences a batch against the producer's open transaction: an
// older epoch than the open transaction's is a zombie's, and a plain
// batch of a producer in a transaction is refused, as Kafka does.
func (st *flushState) checkTxn(op *Pending) error {
	o := st.txns[op.prod.ID]
	switch {
	case o == nil:
		return nil
	case op.prod.Epoch < o.epoch:
		return fmt.Errorf("%w: %d < %d of the open transaction", ErrInvalidProducerEpoch, op.prod.Epoch, o.epoch)
	case !op.prod.Transactional:
		return fmt.Errorf("%w: a non-transactional batch from producer %d while its transaction is open", ErrInvalidTxnState, op.prod.ID)
	}
	return nil
}

// planMarker decides whether a marker goes in: only when its producer has
// an open transaction at an epoch not above the marker's (and, for the
// resolver, starting where it saw it). The transaction closes, an abort
// joins the aborted index, and a marker of a newer epoch moves the
// producer to it, fencing the old epoch's batches. ok is false when
// nothing is written.
func (st *flushState) planMarker(op *Pending, prods map[int64]*producerState, copied *bool, changed *[]int64) (map[int64]*producerState, bool) {
	m := op.marker.m
	o := st.txns[m.ProducerID]
	if o == nil || o.epoch > m.Epoch || op.marker.first >= 0 && o.first != op.marker.first {
		return prods, false
	}
	if cur := prods[m.ProducerID]; cur == nil || cur.epoch < m.Epoch {
		if !*copied {
			prods = maps.Clone(prods)
			if prods == nil {
				prods = map[int64]*producerState{}
			}
			*copied = true
		}
		prods[m.ProducerID] = &producerState{epoch: m.Epoch}
		if !slices.Contains(*changed, m.ProducerID) {
			*changed = append(*changed, m.ProducerID)
		}
	}
	st.cloneTxns()
	delete(st.txns, m.ProducerID)
	st.markTxn(m.ProducerID)
	if !m.Commit {
		st.newAborted = append(st.newAborted, abortedTxn{pid: m.ProducerID, first: o.first, marker: st.next})
	}
	return prods, true
}

// abortedAfter is the XRANGE start that reads the aborted index entries
// newer than those in memory.
func (p *Partition) abortedAfter() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.aborted); n > 0 {
		return "(" + strconv.FormatInt(p.aborted[n-1].marker, 10) + "-1"
	}
	return "-"
}

// addAborted appends aborted index entries read from Redis (by marker
// offset) that are newer than those in memory, then drops those below the
// log start.
func (p *Partition) addAborted(as []abortedTxn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range as {
		if n := len(p.aborted); n == 0 || p.aborted[n-1].marker < a.marker {
			p.aborted = append(p.aborted, a)
		}
	}
	p.trimAbortedLocked(p.start.Load())
}

// trimAbortedLocked drops index entries whose marker is below start; p.mu
// must be held.
func (p *Partition) trimAbortedLocked(start int64) {
	i := 0
	for i < len(p.aborted) && p.aborted[i].marker < start {
		i++
	}
	if i > 0 {
		p.aborted = slices.Clone(p.aborted[i:])
	}
}
