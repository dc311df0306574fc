package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// Ending transactions in partitions: the coordinator's marker delivery
// (WriteTxnMarkers) and the resolver, by which a partition leader ends an
// open transaction whose coordinator decided its outcome but could not
// deliver the marker (it died, or the leader did while it waited).

// DefaultTxnResolveInterval is how often a leader checks its partitions'
// open transactions against the coordinator's state.
const DefaultTxnResolveInterval = 5 * time.Second

// markerRepublish is how often WriteTxnMarkers asks a remote leader again.
const markerRepublish = time.Second

// maxMarkerWriters bounds the partitions WriteTxnMarkers works on at once.
const maxMarkerWriters = 16

// WriteTxnMarkers writes m to every listed partition: directly where this
// broker leads it, else by asking the leader (events.Txn) and polling
// Redis until the partition's open transaction of m.ProducerID is gone.
// It returns nil once every partition has its marker (or never had the
// transaction); ctx bounds the wait. A partition of a topic this broker
// does not know, even after reloading it from Redis (deleted), counts as
// done.
func (e *Engine) WriteTxnMarkers(ctx context.Context, m Marker, parts []TopicPartition) error {
	errs := make([]error, len(parts))
	sem := make(chan struct{}, maxMarkerWriters)
	var wg sync.WaitGroup
	for i, tp := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = e.writeTxnMarker(ctx, m, tp)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e *Engine) writeTxnMarker(ctx context.Context, m Marker, tp TopicPartition) error {
	t := e.Topic(tp.Topic)
	if t == nil {
		// Perhaps created on another broker and not loaded here yet.
		if err := e.ReloadTopic(ctx, tp.Topic); err != nil {
			return fmt.Errorf("transaction marker for producer %d on %s/%d: %w", m.ProducerID, tp.Topic, tp.Partition, err)
		}
		t = e.Topic(tp.Topic)
	}
	var p *Partition
	if t != nil {
		p = t.Partition(tp.Partition)
	}
	if p == nil {
		e.log.Debug("no marker for a partition that is gone", "topic", tp.Topic, "partition", tp.Partition, "producer", m.ProducerID)
		return nil
	}
	var published time.Time
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.IsLeader() {
			_, err := p.WriteMarker(ctx, m)
			if err == nil || !errors.Is(err, ErrNotLeader) {
				return err
			}
		} else {
			done, tid, err := e.markerDone(ctx, p, m)
			if err != nil && ctx.Err() == nil {
				e.log.Debug("checking a remote marker", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
			if done {
				return nil
			}
			if err == nil && time.Since(published) >= markerRepublish {
				result := "abort"
				if m.Commit {
					result = "commit"
				}
				if perr := e.events.Publish(ctx, events.Txn, "topic", tp.Topic, "partition", strconv.Itoa(int(tp.Partition)),
					"id", tid, "pid", strconv.FormatInt(m.ProducerID, 10), "epoch", strconv.Itoa(int(m.Epoch)), "result", result); perr == nil {
					published = time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("transaction marker for producer %d on %s/%d: %w", m.ProducerID, tp.Topic, tp.Partition, ctx.Err())
		case <-tick.C:
		}
	}
}

// markerDone reads whether p has no open transaction of m's producer at
// an epoch m covers, and the transactional id of the one it has.
func (e *Engine) markerDone(ctx context.Context, p *Partition, m Marker) (bool, string, error) {
	r, err := e.rc.Do(ctx, "HGET", p.metaKey, txnField(m.ProducerID))
	if err != nil {
		return false, "", fmt.Errorf("read open transaction: %w", err)
	}
	if r.IsNil() {
		return true, "", nil
	}
	o, err := parseOpenTxn(string(r.Bytes()))
	if err != nil {
		return false, "", err
	}
	return o.epoch > m.Epoch, o.tid, nil
}

// txnStateView is what the resolver reads of the coordinator's state for
// a transactional id (keys.Transactions, JSON written by engine/txn).
type txnStateView struct {
	PID     int64  `json:"pid"`
	Epoch   int16  `json:"epoch"`
	PrevPID *int64 `json:"prev_pid"`
	State   string `json:"state"`
}

// resolveDecision decides an open transaction's fate from the
// coordinator's state (nil: none): write a marker or not, which one, and
// at what epoch. Ongoing at the transaction's own epoch is left alone: the
// coordinator times it out.
func resolveDecision(o OpenTxn, st *txnStateView) (write, commit bool, epoch int16) {
	if st == nil {
		return true, false, o.Epoch
	}
	committing := st.State == "PrepareCommit" || st.State == "CompleteCommit"
	switch {
	case st.PID == o.ProducerID:
		switch {
		case st.Epoch < o.Epoch:
			return false, false, 0 // the state is older than the data: wait for it
		case committing:
			return true, true, st.Epoch
		case st.State == "Ongoing" && st.Epoch == o.Epoch:
			return false, false, 0
		}
		return true, false, st.Epoch
	case st.PrevPID != nil && *st.PrevPID == o.ProducerID && committing:
		// The commit moved the producer to a new id (epoch exhausted).
		return true, true, o.Epoch
	}
	return true, false, o.Epoch // a newer producer owns the id
}

// resolveTxns ends p's open transactions whose outcome the coordinator's
// state in Redis decides. Only the leader writes.
func (e *Engine) resolveTxns(ctx context.Context, p *Partition) error {
	if !p.IsLeader() {
		return nil
	}
	open := p.OpenTxns()
	if len(open) == 0 {
		return nil
	}
	var pl resp.Pipeline
	for _, o := range open {
		pl.Cmd("HGET", e.k.Transactions(), o.TransactionalID)
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("read transaction states: %w", err)
	}
	states := make([]*txnStateView, len(open))
	for i := range open {
		r := rs.At(i)
		if err := r.Err(); err != nil {
			rs.Release()
			return fmt.Errorf("read transaction state of %q: %w", open[i].TransactionalID, err)
		}
		if r.IsNil() {
			continue
		}
		var st txnStateView
		if err := json.Unmarshal(r.Bytes(), &st); err != nil {
			// Never end a transaction on a state we cannot read.
			rs.Release()
			return fmt.Errorf("transaction state of %q: %w", open[i].TransactionalID, err)
		}
		states[i] = &st
	}
	rs.Release()
	var errs []error
	for i, o := range open {
		write, commit, epoch := resolveDecision(o, states[i])
		if !write {
			continue
		}
		off, err := p.writeMarker(ctx, Marker{ProducerID: o.ProducerID, Epoch: epoch, Commit: commit}, o.FirstOffset)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if off >= 0 {
			e.log.Info("ended a transaction the coordinator left open", "topic", p.t.name, "partition", p.id,
				"transactional_id", o.TransactionalID, "producer", o.ProducerID, "commit", commit, "marker", off)
		}
	}
	return errors.Join(errs...)
}

// txnResolver runs the resolver: for partitions queued (leadership
// gained, a txn event) and, every interval, for every led partition with
// open transactions.
type txnResolver struct {
	mu    sync.Mutex
	queue map[*Partition]struct{}
	wake  chan struct{}
}

// queueResolve asks the resolver to look at p soon.
func (e *Engine) queueResolve(p *Partition) {
	r := &e.txnRes
	r.mu.Lock()
	if r.queue == nil {
		r.queue = map[*Partition]struct{}{}
	}
	r.queue[p] = struct{}{}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) txnResolveLoop() {
	defer e.wg.Done()
	r := &e.txnRes
	tick := time.NewTicker(e.opts.TxnResolveInterval)
	defer tick.Stop()
	for {
		var parts []*Partition
		select {
		case <-e.bg.Done():
			return
		case <-r.wake:
			r.mu.Lock()
			for p := range r.queue {
				parts = append(parts, p)
			}
			r.queue = nil
			r.mu.Unlock()
		case <-tick.C:
			for _, p := range e.allPartitions() {
				if p.IsLeader() && len(p.OpenTxns()) > 0 {
					parts = append(parts, p)
				}
			}
		}
		for _, p := range parts {
			ctx, cancel := context.WithTimeout(e.bg, 30*time.Second)
			if err := e.resolveTxns(ctx, p); err != nil && ctx.Err() == nil {
				e.log.Warn("resolving open transactions", "topic", p.t.name, "partition", p.id, "err", err)
			}
			cancel()
		}
	}
}

// subscribeTxn queues a partition named by a txn event for the resolver
// when this broker leads it.
func (e *Engine) subscribeTxn() {
	e.events.Subscribe(events.Txn, func(ev events.Event) {
		t := e.Topic(ev.Get("topic"))
		n, err := strconv.ParseInt(ev.Get("partition"), 10, 32)
		if t == nil || err != nil {
			return
		}
		if p := t.Partition(int32(n)); p != nil && p.IsLeader() {
			e.queueResolve(p)
		}
	})
}
