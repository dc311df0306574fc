package engine

import (
	"context"
	"fmt"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
)

// Appends: queued on the partition and answered once the flush loop has
// committed them.

// Pending is an append in flight. Wait for it with Wait.
type Pending struct {
	recs          []record.Record
	prod          Producer
	codec         int8
	size          int64
	base          int64
	logAppendTime int64
	err           error
	done          chan struct{}
	// allReplicas: acks=all; acknowledged once WaitReplicas replicas
	// have the round.
	allReplicas bool
	// txnTag is the __txn value of a transactional batch's records (and
	// a marker's), nil otherwise; marker makes the append a marker.
	txnTag []byte
	marker *markerReq
	// zc and frames: the values compressed when queued, for a topic with
	// korvet.storage.compression=zstd (frames[i] nil, or frames nil: not
	// compressed, being too short or not smaller).
	zc     *entry.Compressor
	frames [][]byte
}

// Producer identifies an idempotent producer's batch. ID < 0: none.
// Transactional batches belong to the producer's open transaction on the
// partition, which the batch opens if there is none; TransactionalID is
// its transactional id then.
type Producer struct {
	ID              int64
	Epoch           int16
	FirstSeq        int32
	Transactional   bool
	TransactionalID string
}

// NoProducer is the Producer of plain (non-idempotent) appends.
var NoProducer = Producer{ID: -1}

// Wait blocks until the append is committed or failed and returns the
// offset of its first record and, for LogAppendTime topics, the time
// stamped on the records (-1 otherwise).
func (pd *Pending) Wait(ctx context.Context) (base, logAppendTime int64, err error) {
	select {
	case <-pd.done:
		return pd.base, pd.logAppendTime, pd.err
	case <-ctx.Done():
		return -1, -1, fmt.Errorf("waiting for append: %w", ctx.Err())
	}
}

// Append queues records for the log and returns at once; offsets are
// assigned in the order of Append calls. recs must stay untouched until the
// Pending is done; their Offset fields are set by the engine.
func (p *Partition) Append(recs []record.Record) *Pending {
	return p.AppendBatch(NoProducer, 0, recs)
}

// AppendBatch is Append for one record batch, of an idempotent producer
// unless prod is NoProducer: the batch is checked against the producer's
// sequence in the same step that assigns offsets, and a retry of a recent
// batch answers that batch's offset without appending again. codec is the
// compression the batch arrived with (Kafka's attribute bits: 0 none, 1
// gzip, 2 snappy, 3 lz4, 4 zstd), which fetches then use again.
func (p *Partition) AppendBatch(prod Producer, codec int8, recs []record.Record) *Pending {
	return p.AppendBatchAcks(prod, codec, recs, false)
}

// AppendBatchAcks is AppendBatch for a producer that asked for acks=all
// when allReplicas is true: with Options.WaitReplicas set, the append is
// acknowledged once that many Redis replicas have it (WAIT), and fails
// with ErrNotEnoughReplicas, written all the same, when they do not
// confirm within Options.WaitTimeout.
func (p *Partition) AppendBatchAcks(prod Producer, codec int8, recs []record.Record, allReplicas bool) *Pending {
	if prod.ID < 0 {
		prod.Transactional = false
	}
	if !prod.Transactional {
		prod.TransactionalID = ""
	}
	return p.queueAppend(prod, codec, recs, allReplicas, nil)
}

// queueAppend queues an append, or a marker when m is set.
func (p *Partition) queueAppend(prod Producer, codec int8, recs []record.Record, allReplicas bool, m *markerReq) *Pending {
	if codec < 0 || codec > entry.MaxCodec {
		codec = 0
	}
	pd := &Pending{recs: recs, prod: prod, codec: codec, done: make(chan struct{}), logAppendTime: -1, allReplicas: allReplicas, marker: m}
	if prod.Transactional || m != nil {
		pd.txnTag = entry.AppendTxn(nil, prod.ID, prod.Epoch)
		pd.size += int64(len(recs) * entry.TxnEncodedSize(m != nil))
	}
	for i := range recs {
		pd.size += int64(entry.EncodedSize(&recs[i]))
	}
	if m == nil {
		if set := p.t.currentSettings(); set.zstd {
			c := p.t.compressor()
			pd.compress(c, set.zstdMin)
			p.t.noteCompressed(c)
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pd.err = fmt.Errorf("%w: %s", ErrTopicDeleted, p.t.name)
		close(pd.done)
		return pd
	}
	if p.leadEpoch == 0 || p.handoff {
		p.mu.Unlock()
		pd.err = p.notLeader()
		if p.t.e.isClosed() {
			pd.err = fmt.Errorf("%w: %s/%d", ErrClosed, p.t.name, p.id)
		}
		close(pd.done)
		return pd
	}
	p.queue = append(p.queue, pd)
	p.kickLocked()
	p.mu.Unlock()
	return pd
}

// kickLocked starts the flush loop unless it runs; p.mu must be held.
// Once the engine is closed no loop starts, and what is queued fails.
func (p *Partition) kickLocked() {
	if p.flushing || p.closed {
		return
	}
	if !p.t.e.startFlusher() {
		p.failQueuedLocked(fmt.Errorf("%w: %s/%d", ErrClosed, p.t.name, p.id))
		return
	}
	p.flushing = true
	go p.flushLoop()
}

// failQueuedLocked fails every append, trim wait and archive mark waiting
// for a flush; p.mu must be held.
func (p *Partition) failQueuedLocked(err error) {
	for _, op := range p.queue {
		op.err = err
		close(op.done)
	}
	for _, w := range p.trimWait {
		w <- err
	}
	for _, a := range p.archives {
		a.done <- err
	}
	p.queue, p.trimWait, p.archives = nil, nil, nil
}
