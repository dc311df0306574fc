package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// startCompletion runs the completion of e's Prepare state in the
// background unless one runs already (e.mu held, c.mu not).
func (c *Coordinator) startCompletion(e *entry) {
	if e.ending != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	e.ending = make(chan struct{})
	c.wg.Add(1)
	go c.complete(e)
}

// complete finishes e's transaction: the groups' offsets, the markers,
// then CompleteCommit or CompleteAbort. A failed attempt is retried with
// backoff until it succeeds, the id moves to another coordinator or the
// coordinator closes (a new one resumes from the stored Prepare state).
func (c *Coordinator) complete(e *entry) {
	defer c.wg.Done()
	backoff := c.opts.RetryBackoff
	for {
		e.mu.Lock()
		rec := e.rec.clone()
		if e.gone || !c.owns(e.id) || (rec.State != PrepareCommit && rec.State != PrepareAbort) {
			e.endDone()
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.bg, completeTimeout)
		err := c.finish(ctx, e.id, rec)
		if err == nil {
			e.mu.Lock()
			if e.gone || e.rec.Ver != rec.Ver {
				e.endDone()
				e.mu.Unlock()
				cancel()
				return
			}
			next := rec.clone()
			next.State = CompleteAbort
			if rec.State == PrepareCommit {
				next.State = CompleteCommit
			}
			next.Partitions, next.Groups = nil, nil
			err = c.write(ctx, e, next)
			if err == nil || errors.Is(err, ErrNotCoordinator) {
				e.endDone()
				e.mu.Unlock()
				cancel()
				if err == nil {
					c.log.Debug("transaction completed", "transactional_id", e.id, "state", next.State, "producer_id", rec.TxnPID)
				}
				return
			}
			e.mu.Unlock()
		}
		cancel()
		if c.bg.Err() != nil {
			e.mu.Lock()
			e.endDone()
			e.mu.Unlock()
			return
		}
		c.log.Warn("could not complete a transaction; retrying", "transactional_id", e.id, "state", rec.State, "producer_id", rec.TxnPID, "err", err)
		select {
		case <-c.bg.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.opts.CheckInterval)
	}
}

// endDone marks e's completion finished and wakes the calls waiting for
// it (e.mu held).
func (e *entry) endDone() {
	close(e.ending)
	e.ending = nil
}

// finish does the idempotent part of a completion: the groups' pending
// offsets, then the markers in every partition.
func (c *Coordinator) finish(ctx context.Context, id string, rec record) error {
	commit := rec.State == PrepareCommit
	if c.opts.Offsets != nil {
		for _, g := range rec.Groups {
			if err := c.opts.Offsets.CompleteTxn(ctx, g, rec.TxnPID, commit); err != nil {
				return fmt.Errorf("complete offsets of group %q for transactional id %q: %w", g, id, err)
			}
		}
	}
	parts := rec.parts()
	if c.opts.Markers != nil && len(parts) > 0 {
		if err := c.opts.Markers.WriteTxnMarkers(ctx, markerOf(rec), parts); err != nil {
			return fmt.Errorf("write markers of transactional id %q: %w", id, err)
		}
	}
	return nil
}

// markerOf is the marker ending rec's transaction. It carries the epoch
// the coordinator holds now, which a bump at the end (fencing, KIP-890)
// may have raised above the records' one; after a new producer id at the
// end, the old id's next epoch.
func markerOf(rec record) Marker {
	m := Marker{ProducerID: rec.TxnPID, Epoch: rec.Epoch, Commit: rec.State == PrepareCommit}
	if rec.TxnPID != rec.PID {
		m.Epoch = rec.TxnEpoch
		if m.Epoch < math.MaxInt16 {
			m.Epoch++
		}
	}
	return m
}

// sweepLoop runs sweep every CheckInterval until Close.
func (c *Coordinator) sweepLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.bg.Done():
			return
		case <-t.C:
			c.sweep(time.Now())
		}
	}
}

// sweep aborts the transactions past their timeout (fencing their
// producers), restarts completions that are not running and deletes the
// ids idle longer than IDExpiration.
func (c *Coordinator) sweep(now time.Time) {
	for _, e := range c.held() {
		if !c.owns(e.id) {
			c.drop(e.id)
			continue
		}
		ctx, cancel := context.WithTimeout(c.bg, completeTimeout)
		if err := c.sweepOne(ctx, e, now); err != nil && c.bg.Err() == nil {
			c.log.Warn("transaction sweep", "transactional_id", e.id, "err", err)
		}
		cancel()
	}
}

func (c *Coordinator) sweepOne(ctx context.Context, e *entry, now time.Time) error {
	if err := e.lock(); err != nil {
		return nil
	}
	defer e.mu.Unlock()
	// A transaction begun by an implicit add elsewhere times out too.
	if err := c.refresh(ctx, e); err != nil {
		return err
	}
	if e.raw == "" {
		return nil
	}
	rec := e.rec
	switch rec.State {
	case Ongoing:
		if now.UnixMilli()-rec.StartMs >= int64(rec.TimeoutMs) {
			return c.abortFenced(ctx, e, fmt.Sprintf("timed out after %dms", rec.TimeoutMs))
		}
	case PrepareCommit, PrepareAbort:
		c.startCompletion(e)
	case Empty, CompleteCommit, CompleteAbort:
		if now.Sub(time.UnixMilli(rec.UpdateMs)) < c.opts.IDExpiration {
			return nil
		}
		_, ok, err := c.cas(ctx, e.id, e.raw, nil)
		if err != nil {
			return err
		}
		e.gone = true
		c.mu.Lock()
		if c.txns[e.id] == e {
			delete(c.txns, e.id)
		}
		c.mu.Unlock()
		if ok {
			c.log.Info("transactional id expired", "transactional_id", e.id, "idle_since", time.UnixMilli(rec.UpdateMs).UTC())
		}
	}
	return nil
}
