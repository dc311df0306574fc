package txn

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"
)

// Description is one transactional id as DescribeTransactions and
// ListTransactions show it.
type Description struct {
	ID         string
	State      State
	ProducerID int64
	Epoch      int16
	TimeoutMs  int32
	StartMs    int64 // -1 when no transaction is running
	Partitions []TopicPartition
	Groups     []string
}

func describe(id string, rec record) Description {
	d := Description{ID: id, State: rec.State, ProducerID: rec.PID, Epoch: rec.Epoch, TimeoutMs: rec.TimeoutMs, StartMs: -1,
		Partitions: rec.parts(), Groups: append([]string(nil), rec.Groups...)}
	if rec.State != Empty {
		d.StartMs = rec.StartMs
	}
	return d
}

// Describe describes one transactional id this broker coordinates:
// ErrTransactionalIDNotFound when there is none, ErrNotCoordinator when
// another broker coordinates it.
func (c *Coordinator) Describe(ctx context.Context, id string) (Description, error) {
	e, err := c.locked(ctx, id, false)
	if err != nil {
		return Description{}, err
	}
	if e != nil {
		defer e.mu.Unlock()
	}
	if e == nil || e.raw == "" {
		return Description{}, fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, id)
	}
	return describe(id, e.rec), nil
}

// ListFilter selects transactions for List; zero values select all.
type ListFilter struct {
	States      []State
	ProducerIDs []int64
	// MinDuration keeps transactions running at least that long; < 0 or
	// 0 keeps all.
	MinDuration time.Duration
	IDPattern   *regexp.Regexp
}

// List returns the transactional ids this broker coordinates that pass f,
// sorted by id (ListTransactions asks every broker).
func (c *Coordinator) List(f ListFilter, now time.Time) []Description {
	var out []Description
	for _, e := range c.held() {
		e.mu.Lock()
		rec, gone, stored := e.rec, e.gone, e.raw != ""
		e.mu.Unlock()
		if gone || !stored || !c.owns(e.id) {
			continue
		}
		if len(f.States) > 0 && !contains(f.States, rec.State) {
			continue
		}
		if len(f.ProducerIDs) > 0 && !contains(f.ProducerIDs, rec.PID) {
			continue
		}
		if f.MinDuration > 0 && (rec.State == Empty || now.Sub(time.UnixMilli(rec.StartMs)) < f.MinDuration) {
			continue
		}
		if f.IDPattern != nil && !f.IDPattern.MatchString(e.id) {
			continue
		}
		out = append(out, describe(e.id, rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// CheckOffsets is the transaction check of TxnOffsetCommit: the id's
// producer id and epoch, and the group added to its Ongoing transaction
// (AddOffsetsToTxn). It reads Redis, so any broker may ask (the group's
// coordinator need not be the transaction's).
func (c *Coordinator) CheckOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	rec, err := c.stored(ctx, id, pid, epoch)
	if err != nil {
		return err
	}
	if rec.State != Ongoing || !rec.hasGroup(group) {
		return fmt.Errorf("%w: group %q was not added to the transaction of %q (%s)", ErrInvalidTxnState, group, id, rec.State)
	}
	return nil
}

// VerifyPartition is the produce path's check of a transactional batch
// (KIP-890 part 1): the partition must be in the producer's Ongoing
// transaction. It reads Redis, so the partition's leader may ask.
// ErrProducerFenced for a wrong epoch, ErrInvalidTxnState for a partition
// not added, ErrInvalidProducerIDMapping for an unknown id or producer.
func (c *Coordinator) VerifyPartition(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	rec, err := c.stored(ctx, id, pid, epoch)
	if err != nil {
		return err
	}
	if rec.State != Ongoing || !rec.hasPart(TopicPartition{topic, partition}) {
		return fmt.Errorf("%w: %s:%d was not added to the transaction of %q (%s)", ErrInvalidTxnState, topic, partition, id, rec.State)
	}
	return nil
}

// stored reads id from Redis and checks its producer id and epoch.
func (c *Coordinator) stored(ctx context.Context, id string, pid int64, epoch int16) (record, error) {
	rec, _, err := c.storedRaw(ctx, id, pid, epoch)
	return rec, err
}

// storedRaw is stored with the stored JSON, for a compare-and-set.
func (c *Coordinator) storedRaw(ctx context.Context, id string, pid int64, epoch int16) (record, string, error) {
	rec, raw, found, err := c.read(ctx, id)
	if err != nil {
		return record{}, "", err
	}
	if !found {
		return record{}, "", fmt.Errorf("%w: no transactional id %q", ErrInvalidProducerIDMapping, id)
	}
	if pid != rec.PID {
		return record{}, "", fmt.Errorf("%w: transactional id %q has producer id %d, not %d", ErrInvalidProducerIDMapping, id, rec.PID, pid)
	}
	if epoch != rec.Epoch {
		return record{}, "", fmt.Errorf("%w: epoch %d, transactional id %q is at %d", ErrProducerFenced, epoch, id, rec.Epoch)
	}
	return rec, raw, nil
}
