package txn

import (
	"context"
	"fmt"
	"time"
)

// casAttempts bounds how often an implicit add retries after losing its
// compare-and-set to another writer of the same id.
const casAttempts = 10

// AddPartitionImplicit is the produce path of the KIP-890 (transaction
// version 2) flow: a producer's first transactional batch for a partition
// adds the partition to its transaction, beginning the transaction when
// the id is Empty or Complete*. Any broker may call it (the partition's
// leader need not coordinate the id): the add is a compare-and-set on the
// stored state, which the coordinator re-reads before it decides anything
// (refresh). ErrProducerFenced for a wrong epoch, ErrInvalidProducerIDMapping
// for an unknown id or producer, ErrConcurrentTransactions while the last
// transaction is still completing (after waiting up to completionWait).
func (c *Coordinator) AddPartitionImplicit(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	tp := TopicPartition{topic, partition}
	return c.addImplicit(ctx, id, pid, epoch, &tp, "")
}

// AddOffsetsImplicit is TxnOffsetCommit v5+ (KIP-890): the group is added
// to the producer's transaction, beginning it if need be, then checked as
// CheckOffsets does. Any broker may call it, as AddPartitionImplicit.
func (c *Coordinator) AddOffsetsImplicit(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalidRequest)
	}
	return c.addImplicit(ctx, id, pid, epoch, nil, group)
}

func (c *Coordinator) addImplicit(ctx context.Context, id string, pid int64, epoch int16, tp *TopicPartition, group string) error {
	deadline := time.Now().Add(completionWait)
	backoff := 5 * time.Millisecond
	for attempt := 0; ; attempt++ {
		rec, raw, err := c.storedRaw(ctx, id, pid, epoch)
		if err != nil {
			return err
		}
		switch rec.State {
		case PrepareCommit, PrepareAbort:
			// The next transaction begins right after EndTxn, usually
			// while the last one's markers are being written: wait a
			// little rather than send the client into its longer backoff.
			if !time.Now().Before(deadline) {
				return fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, id, rec.State)
			}
			// When this broker runs the completion, its end wakes us
			// at once; else poll Redis with a growing pause.
			done := c.completing(id)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w: waiting for the last transaction of %q to complete: %v", ErrConcurrentTransactions, id, ctx.Err())
			case <-done:
				t.Stop()
			case <-t.C:
			}
			backoff = min(2*backoff, 100*time.Millisecond)
			continue
		case Ongoing:
			if (tp == nil || rec.hasPart(*tp)) && (group == "" || rec.hasGroup(group)) {
				return nil
			}
		}
		next := rec.clone()
		if rec.State != Ongoing {
			next.State, next.Partitions, next.Groups = Ongoing, nil, nil
			next.StartMs = time.Now().UnixMilli()
			next.TxnPID, next.TxnEpoch = rec.PID, rec.Epoch
			next.V2 = true
		}
		if tp != nil && !next.hasPart(*tp) {
			next.Partitions = append(next.Partitions, partKey(*tp))
		}
		if group != "" && !next.hasGroup(group) {
			if len(next.Groups) >= MaxGroupsPerTxn {
				return fmt.Errorf("%w: transaction of %q already has %d groups, the most one may have", ErrInvalidRequest, id, MaxGroupsPerTxn)
			}
			next.Groups = append(next.Groups, group)
		}
		next.Ver = rec.Ver + 1
		next.UpdateMs = time.Now().UnixMilli()
		_, ok, err := c.cas(ctx, id, raw, &next)
		if err != nil {
			return err
		}
		if ok {
			if rec.State != Ongoing {
				c.log.Debug("transaction begun by its first write", "transactional_id", id, "producer_id", pid, "epoch", epoch)
			}
			return nil
		}
		if attempt >= casAttempts {
			return fmt.Errorf("%w: transactional id %q keeps changing under another writer", ErrConcurrentTransactions, id)
		}
	}
}

// refresh makes e hold what Redis holds for its id (e.mu held): a
// partition leader or group coordinator elsewhere may have added to the
// transaction (AddPartitionImplicit, AddOffsetsImplicit) since e was read.
func (c *Coordinator) refresh(ctx context.Context, e *entry) error {
	rec, raw, found, err := c.read(ctx, e.id)
	if err != nil {
		return err
	}
	c.adopt(e, rec, raw, found)
	return nil
}

// adopt replaces e's state by a newer stored one (e.mu held).
func (c *Coordinator) adopt(e *entry, rec record, raw string, found bool) {
	if !found {
		rec, raw = record{}, ""
	}
	if raw == e.raw {
		return
	}
	e.rec, e.raw = rec, raw
	c.resume(e)
}

// completing returns a channel closed when this broker's running
// completion of id ends, or nil (blocks forever in a select) when none
// runs here.
func (c *Coordinator) completing(id string) <-chan struct{} {
	c.mu.Lock()
	e := c.txns[id]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ending
}
