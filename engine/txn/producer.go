package txn

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Bounds on what one client can make the coordinator store: the state of
// an id lives in memory and is rewritten whole at every change.
const (
	MaxIDBytes      = 4096
	MaxGroupsPerTxn = 1000
)

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	ID        string
	TimeoutMs int32
	// ProducerID and Epoch are the producer's current ones when it
	// recovers (KIP-360, InitProducerId v3+); -1 and -1 otherwise.
	ProducerID int64
	Epoch      int16
}

// InitProducerID gives the transactional producer of req.ID its producer
// id and epoch, fencing every older producer of that id, as Kafka's
// coordinator does:
//   - a new id gets a new producer id, epoch 0;
//   - an id in Empty or Complete* gets its epoch bumped (a new producer
//     id when the epoch is exhausted); a producer naming its current id
//     and epoch (KIP-360) is bumped too, and a retry of that bump (the
//     previous epoch) answered without another;
//   - an Ongoing transaction is aborted with the epoch bumped, and the
//     caller told ErrConcurrentTransactions: it retries once the abort is
//     done;
//   - during PrepareCommit or PrepareAbort: ErrConcurrentTransactions.
func (c *Coordinator) InitProducerID(ctx context.Context, req InitRequest) (int64, int16, error) {
	if req.ID == "" || len(req.ID) > MaxIDBytes {
		return -1, -1, fmt.Errorf("%w: transactional id of %d bytes (1 to %d)", ErrInvalidRequest, len(req.ID), MaxIDBytes)
	}
	if req.TimeoutMs <= 0 || time.Duration(req.TimeoutMs)*time.Millisecond > c.opts.MaxTimeout {
		return -1, -1, fmt.Errorf("%w: %dms (allowed 1ms to %s, kafka.transaction_max_timeout)", ErrInvalidTransactionTimeout, req.TimeoutMs, c.opts.MaxTimeout)
	}
	e, err := c.locked(ctx, req.ID, true)
	if err != nil {
		return -1, -1, err
	}
	defer e.mu.Unlock()
	recovering := req.ProducerID >= 0
	if e.raw == "" {
		pid, err := c.opts.NewProducerID(ctx)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		next := record{PID: pid, Epoch: 0, PrevPID: -1, PrevEpoch: -1, TxnPID: pid, TimeoutMs: req.TimeoutMs, State: Empty}
		if err := c.write(ctx, e, next); err != nil {
			return -1, -1, err
		}
		c.log.Debug("transactional id registered", "transactional_id", req.ID, "producer_id", pid)
		return pid, 0, nil
	}
	cur := e.rec
	if recovering && cur.Epoch >= 0 && req.ProducerID != cur.PID &&
		(req.ProducerID != cur.PrevPID || !exhausted(req.Epoch)) {
		return -1, -1, fmt.Errorf("%w: producer id %d epoch %d, transactional id %q has %d epoch %d", ErrProducerFenced, req.ProducerID, req.Epoch, req.ID, cur.PID, cur.Epoch)
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort:
		c.startCompletion(e)
		return -1, -1, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, req.ID, cur.State)
	case Ongoing:
		// Fence the running producer and abort its transaction; the
		// caller retries and is bumped once more when the abort is done.
		if err := c.abortFenced(ctx, e, "a new producer initialized"); err != nil {
			return -1, -1, err
		}
		return -1, -1, fmt.Errorf("%w: aborting the ongoing transaction of %q first", ErrConcurrentTransactions, req.ID)
	}
	next := cur.clone()
	next.State, next.Partitions, next.Groups, next.TimeoutMs = Empty, nil, nil, req.TimeoutMs
	switch {
	case exhausted(cur.Epoch) && (!recovering || req.Epoch == cur.Epoch):
		pid, err := c.opts.NewProducerID(ctx)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		next.PrevPID, next.PrevEpoch = cur.PID, -1
		if recovering {
			next.PrevEpoch = cur.Epoch
		}
		next.PID, next.Epoch = pid, 0
	case !recovering:
		next.Epoch, next.PrevEpoch = cur.Epoch+1, -1
	case req.Epoch == cur.Epoch:
		next.Epoch, next.PrevEpoch = cur.Epoch+1, cur.Epoch
	case req.Epoch == cur.PrevEpoch:
		// A retry of a bump whose answer was lost: answer it again.
		return cur.PID, cur.Epoch, nil
	default:
		return -1, -1, fmt.Errorf("%w: epoch %d, transactional id %q is at %d", ErrProducerFenced, req.Epoch, req.ID, cur.Epoch)
	}
	next.TxnPID, next.TxnEpoch = next.PID, next.Epoch
	if err := c.write(ctx, e, next); err != nil {
		return -1, -1, err
	}
	return next.PID, next.Epoch, nil
}

// abortFenced aborts e's Ongoing transaction with the epoch bumped, so
// that its producer is fenced, and starts the completion (e.mu held).
func (c *Coordinator) abortFenced(ctx context.Context, e *entry, why string) error {
	next := e.rec.clone()
	if next.Epoch < math.MaxInt16 {
		next.Epoch++
	}
	next.PrevEpoch = -1
	next.State = PrepareAbort
	if err := c.write(ctx, e, next); err != nil {
		return err
	}
	c.log.Info("aborting a transaction and fencing its producer", "transactional_id", e.id, "producer_id", next.PID, "epoch", next.Epoch, "why", why)
	c.startCompletion(e)
	return nil
}

// check is the producer check of AddPartitionsToTxn, AddOffsetsToTxn and
// the verifications: the id's producer id and epoch, and no transaction
// completing.
func check(id string, rec record, pid int64, epoch int16) error {
	if pid != rec.PID {
		return fmt.Errorf("%w: transactional id %q has producer id %d, not %d", ErrInvalidProducerIDMapping, id, rec.PID, pid)
	}
	if epoch != rec.Epoch {
		return fmt.Errorf("%w: epoch %d, transactional id %q is at %d", ErrProducerFenced, epoch, id, rec.Epoch)
	}
	if rec.State == PrepareCommit || rec.State == PrepareAbort {
		return fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, id, rec.State)
	}
	return nil
}

// existing returns the locked entry of an id that must exist: ErrInvalidProducerIDMapping
// when it does not, as Kafka answers.
func (c *Coordinator) existing(ctx context.Context, id string) (*entry, error) {
	e, err := c.locked(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("%w: no transactional id %q", ErrInvalidProducerIDMapping, id)
	}
	if e.raw == "" {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: no transactional id %q", ErrInvalidProducerIDMapping, id)
	}
	return e, nil
}

// AddPartitions adds partitions to the producer's transaction, beginning
// it when the id is Empty or Complete*.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) error {
	return c.add(ctx, id, pid, epoch, parts, "")
}

// AddOffsets adds a group to the producer's transaction, whose
// TxnOffsetCommit offsets then complete with it.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalidRequest)
	}
	return c.add(ctx, id, pid, epoch, nil, group)
}

func (c *Coordinator) add(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition, group string) error {
	e, err := c.existing(ctx, id)
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	cur := e.rec
	if err := check(id, cur, pid, epoch); err != nil {
		return err
	}
	next := cur.clone()
	changed := false
	if cur.State != Ongoing {
		next.State, next.Partitions, next.Groups = Ongoing, nil, nil
		next.StartMs = time.Now().UnixMilli()
		next.TxnPID, next.TxnEpoch = cur.PID, cur.Epoch
		changed = true
	}
	for _, tp := range parts {
		if !next.hasPart(tp) {
			next.Partitions = append(next.Partitions, partKey(tp))
			changed = true
		}
	}
	if group != "" && !next.hasGroup(group) {
		if len(next.Groups) >= MaxGroupsPerTxn {
			return fmt.Errorf("%w: transaction of %q already has %d groups, the most one may have", ErrInvalidRequest, id, MaxGroupsPerTxn)
		}
		next.Groups = append(next.Groups, group)
		changed = true
	}
	if !changed {
		return nil
	}
	return c.write(ctx, e, next)
}

// VerifyPartitions answers AddPartitionsToTxn v4+ with VerifyOnly (a
// partition leader asking, KIP-890 part 1): nil for each partition in the
// producer's Ongoing transaction, ErrInvalidTxnState for the others. The
// error is for the producer as a whole.
func (c *Coordinator) VerifyPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) ([]error, error) {
	e, err := c.existing(ctx, id)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	if err := check(id, e.rec, pid, epoch); err != nil {
		return nil, err
	}
	out := make([]error, len(parts))
	for i, tp := range parts {
		if e.rec.State != Ongoing || !e.rec.hasPart(tp) {
			out[i] = fmt.Errorf("%w: %s:%d is not in the transaction of %q", ErrInvalidTxnState, tp.Topic, tp.Partition, id)
		}
	}
	return out, nil
}

// EndResult is the producer id and epoch a producer carries on with after
// EndTxn: new ones in the KIP-890 flow, else those it ended with.
type EndResult struct {
	ProducerID int64
	Epoch      int16
}

// EndTxn commits or aborts the producer's transaction: PrepareCommit or
// PrepareAbort is stored before it returns, the rest completes in the
// background. v2 is the KIP-890 flow (EndTxn v5+): every end bumps the
// epoch (a new producer id when exhausted), an abort with no transaction
// is allowed, and a retry after the bump is recognised by the old epoch.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, v2 bool) (EndResult, error) {
	e, err := c.existing(ctx, id)
	if err != nil {
		return EndResult{}, err
	}
	defer e.mu.Unlock()
	cur := e.rec
	// A retry of a v2 end that bumped the epoch (or rotated the id). A
	// fencing bump (timeout, new producer) forgets the previous epoch, so
	// the fenced producer is not taken for a retry.
	retry := v2 && cur.V2 && cur.State != Ongoing && cur.State != Empty &&
		((pid == cur.PID && int(epoch)+1 == int(cur.Epoch) && epoch == cur.PrevEpoch) ||
			(pid == cur.PrevPID && pid != cur.PID && cur.TxnPID == pid && epoch == cur.TxnEpoch))
	switch {
	case pid != cur.PID && !retry:
		return EndResult{}, fmt.Errorf("%w: transactional id %q has producer id %d, not %d", ErrInvalidProducerIDMapping, id, cur.PID, pid)
	case epoch != cur.Epoch && !retry:
		return EndResult{}, fmt.Errorf("%w: epoch %d, transactional id %q is at %d", ErrProducerFenced, epoch, id, cur.Epoch)
	}
	same := EndResult{cur.PID, cur.Epoch}
	wrong := func() error {
		return fmt.Errorf("%w: cannot %s, transactional id %q is in %s", ErrInvalidTxnState, endWord(commit), id, cur.State)
	}
	switch cur.State {
	case Ongoing:
	case PrepareCommit, PrepareAbort:
		if (cur.State == PrepareCommit) != commit {
			return EndResult{}, wrong()
		}
		c.startCompletion(e)
		return EndResult{}, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, id, cur.State)
	case CompleteCommit, CompleteAbort:
		if (cur.State == CompleteCommit) == commit && (!v2 || retry) {
			return same, nil // a retry of an end already done
		}
		if !v2 || commit || retry {
			return EndResult{}, wrong()
		}
		return c.emptyAbort(ctx, e)
	case Empty:
		if !v2 || commit || retry {
			return EndResult{}, wrong()
		}
		return c.emptyAbort(ctx, e)
	}
	next := cur.clone()
	next.State = PrepareAbort
	if commit {
		next.State = PrepareCommit
	}
	if v2 {
		next.V2 = true
		if err := c.bump(ctx, &next); err != nil {
			return EndResult{}, err
		}
	}
	if err := c.write(ctx, e, next); err != nil {
		return EndResult{}, err
	}
	c.startCompletion(e)
	return EndResult{next.PID, next.Epoch}, nil
}

// emptyAbort is the KIP-890 abort of a producer with no transaction: the
// epoch is bumped and nothing else happens (e.mu held).
func (c *Coordinator) emptyAbort(ctx context.Context, e *entry) (EndResult, error) {
	next := e.rec.clone()
	next.V2 = true
	next.TxnPID, next.TxnEpoch = next.PID, next.Epoch
	if err := c.bump(ctx, &next); err != nil {
		return EndResult{}, err
	}
	next.State, next.Partitions, next.Groups = CompleteAbort, nil, nil
	if err := c.write(ctx, e, next); err != nil {
		return EndResult{}, err
	}
	return EndResult{next.PID, next.Epoch}, nil
}

// bump gives next the epoch after its current one, or a new producer id
// when that epoch is exhausted; the previous ones are kept so that a retry
// is recognised.
func (c *Coordinator) bump(ctx context.Context, next *record) error {
	if !exhausted(next.Epoch) {
		next.PrevEpoch = next.Epoch
		next.Epoch++
		return nil
	}
	pid, err := c.opts.NewProducerID(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	}
	next.PrevPID, next.PrevEpoch = next.PID, next.Epoch
	next.PID, next.Epoch = pid, 0
	return nil
}

func endWord(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}
