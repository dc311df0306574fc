package group

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/resp"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Commit is a committed offset.
type Commit struct {
	Offset      int64
	LeaderEpoch int32 // -1 when the client sent none
	Metadata    string
	Time        time.Time
}

// PartitionCommit is a partition's commit: one partition of an
// OffsetCommit, or of an OffsetFetch answer (Offset -1 when nothing is
// committed).
type PartitionCommit struct {
	TopicPartition
	Commit
	// Err is set in an OffsetFetch answer for a partition that has no
	// stable offset (ErrUnstableOffsetCommit).
	Err error
}

// CommitRequest is an OffsetCommit. Generation -1 with an empty member id
// is a commit from outside group management (a consumer using assign(),
// or an admin), allowed while the group is empty.
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	Offsets    []PartitionCommit
}

// encodeOffset is the Redis value of a commit:
// "<offset>,<leader epoch>,<commit unix ms>,<metadata>". The metadata
// comes last so it may hold anything.
func encodeOffset(o Commit) string {
	var b []byte
	b = strconv.AppendInt(b, o.Offset, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(o.LeaderEpoch), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, o.Time.UnixMilli(), 10)
	b = append(b, ',')
	b = append(b, o.Metadata...)
	return string(b)
}

func decodeOffset(v string) (Commit, error) {
	f := strings.SplitN(v, ",", 4)
	if len(f) != 4 {
		return Commit{}, fmt.Errorf("bad committed offset %q", v)
	}
	off, err1 := strconv.ParseInt(f[0], 10, 64)
	epoch, err2 := strconv.ParseInt(f[1], 10, 32)
	ms, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Commit{}, fmt.Errorf("bad committed offset %q: %w", v, err)
	}
	return Commit{Offset: off, LeaderEpoch: int32(epoch), Time: time.UnixMilli(ms), Metadata: f[3]}, nil
}

func offsetField(tp TopicPartition) string {
	return tp.Topic + ":" + strconv.Itoa(int(tp.Partition))
}

func parseOffsetField(f string) (TopicPartition, bool) {
	i := strings.LastIndexByte(f, ':')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(f[i+1:], 10, 32)
	if err != nil {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: f[:i], Partition: int32(p)}, true
}

// ensureLoaded reads the group's committed offsets from Redis the first
// time they are needed.
func (g *group) ensureLoaded(ctx context.Context) error {
	g.mu.Lock()
	loaded := g.loaded
	g.mu.Unlock()
	if loaded {
		return nil
	}
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	return g.loadLocked(ctx)
}

// loadLocked is ensureLoaded for a caller holding commitMu.
func (g *group) loadLocked(ctx context.Context) error {
	g.mu.Lock()
	loaded := g.loaded
	g.mu.Unlock()
	if loaded {
		return nil
	}
	key, txnKey := g.c.k.GroupOffsets(g.name), g.c.k.GroupTxnOffsets(g.name)
	var pl resp.Pipeline
	pl.Cmd("HGETALL", key)
	pl.Cmd("HGETALL", txnKey)
	rs, err := g.c.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("%w: load offsets of group %q: %v", ErrCoordinatorNotAvailable, g.name, err)
	}
	defer rs.Release()
	for i := range 2 {
		if err := rs.At(i).Err(); err != nil {
			return fmt.Errorf("%w: load offsets of group %q: %v", ErrCoordinatorNotAvailable, g.name, err)
		}
	}
	offsets := make(map[TopicPartition]Commit)
	var elems []resp.Reply
	elems = rs.At(0).Elems(elems)
	for i := 0; i+1 < len(elems); i += 2 {
		field, val := string(elems[i].Bytes()), string(elems[i+1].Bytes())
		tp, ok := parseOffsetField(field)
		o, err := decodeOffset(val)
		if !ok || err != nil {
			g.c.log.Warn("skipping bad committed offset", "key", key, "field", field, "value", val)
			continue
		}
		offsets[tp] = o
	}
	txn := make(map[int64]map[TopicPartition]Commit)
	elems = rs.At(1).Elems(elems[:0])
	for i := 0; i+1 < len(elems); i += 2 {
		field, val := string(elems[i].Bytes()), string(elems[i+1].Bytes())
		pid, tp, ok := parseTxnOffsetField(field)
		o, err := decodeOffset(val)
		if !ok || err != nil {
			g.c.log.Warn("skipping bad transactional offset", "key", txnKey, "field", field, "value", val)
			continue
		}
		if txn[pid] == nil {
			txn[pid] = make(map[TopicPartition]Commit)
		}
		txn[pid][tp] = o
	}
	g.mu.Lock()
	g.offsets = offsets
	g.txn = txn
	g.loaded = true
	g.mu.Unlock()
	return nil
}

// groupToCommit finds the group an offset commit (plain or
// transactional) writes to, with its commitMu held and its offsets
// loaded. A group this coordinator does not know is made, Empty, for a
// commit from outside group management (generation -1), as Kafka makes a
// "simple" group; a member of a generation it never saw must rejoin.
func (c *Coordinator) groupToCommit(ctx context.Context, name string, generation int32) (*group, error) {
	g, err := c.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		if generation >= 0 {
			return nil, fmt.Errorf("%w: group %q has no generation %d", ErrIllegalGeneration, name, generation)
		}
		if g, err = c.findOrCreate(ctx, name); err != nil {
			return nil, err
		}
	}
	g.commitMu.Lock()
	if err := g.loadLocked(ctx); err != nil {
		g.commitMu.Unlock()
		return nil, err
	}
	return g, nil
}

// Commit handles an OffsetCommit. It returns an error per offset, or an
// error for the whole commit (group membership checks, Redis failure).
func (c *Coordinator) Commit(ctx context.Context, req CommitRequest) ([]error, error) {
	simple := req.Generation < 0 && req.MemberID == "" && req.InstanceID == ""
	g, err := c.groupToCommit(ctx, req.Group, req.Generation)
	if err != nil {
		return nil, err
	}
	defer g.commitMu.Unlock()
	errs := make([]error, len(req.Offsets))
	g.mu.Lock()
	if g.gone {
		// Dropped while this commit waited: the new owner takes it.
		g.mu.Unlock()
		return nil, notOwned(req.Group)
	}
	err = g.validateCommit(req, simple, errs)
	protocolType := g.protocolType
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	key := g.c.k.GroupOffsets(g.name)
	var pl resp.Pipeline
	pl.Cmd("MULTI")
	n := 0
	for i := range req.Offsets {
		if errs[i] != nil {
			continue
		}
		if len(req.Offsets[i].Metadata) > c.opts.MaxMetadataBytes {
			errs[i] = fmt.Errorf("%w: %d bytes, at most %d", ErrMetadataTooLarge, len(req.Offsets[i].Metadata), c.opts.MaxMetadataBytes)
			continue
		}
		req.Offsets[i].Time = now
		n++
	}
	if n == 0 {
		return errs, nil
	}
	var committed []TopicPartition
	for i, o := range req.Offsets {
		if errs[i] == nil {
			committed = append(committed, o.TopicPartition)
		}
	}
	// A plain commit after a transactional one for the same partition
	// wins over it whatever the transaction's outcome, as in Kafka
	// (where the later record in the offsets log wins).
	g.mu.Lock()
	superseded := g.pendingFields(committed)
	g.mu.Unlock()
	pl.Array(2 + 2*n)
	pl.String("HSET")
	pl.String(key)
	for i, o := range req.Offsets {
		if errs[i] == nil {
			pl.String(offsetField(o.TopicPartition))
			pl.String(encodeOffset(o.Commit))
		}
	}
	if len(superseded) > 0 {
		pl.Array(2 + len(superseded))
		pl.String("HDEL")
		pl.String(c.k.GroupTxnOffsets(g.name))
		for _, f := range superseded {
			pl.String(f)
		}
	}
	pl.Cmd("HSET", c.k.Groups(), g.name, protocolType)
	pl.Cmd("EXEC")
	if err := c.execTx(ctx, &pl); err != nil {
		return nil, fmt.Errorf("%w: commit offsets of group %q: %v", ErrCoordinatorNotAvailable, g.name, err)
	}
	g.mu.Lock()
	g.stored = true
	for i, o := range req.Offsets {
		if errs[i] == nil {
			g.offsets[o.TopicPartition] = o.Commit
		}
	}
	if len(superseded) > 0 {
		g.dropPending(committed)
	}
	g.mu.Unlock()
	return errs, nil
}

// validateCommit applies Kafka's membership checks to a commit, under g.mu.
func (g *group) validateCommit(req CommitRequest, simple bool, errs []error) error {
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return g.validateConsumerCommit(req, errs)
	}
	if simple {
		if g.state != Empty {
			// Only an empty group takes commits from outside it.
			return fmt.Errorf("%w: group %q has members; commits need a member id and generation", ErrUnknownMemberID, g.name)
		}
		return nil
	}
	if g.fenced(req.InstanceID, req.MemberID) {
		return ErrFencedInstanceID
	}
	m := g.members[req.MemberID]
	if req.MemberID != "" && m == nil {
		return ErrUnknownMemberID
	}
	if req.Generation != g.generation {
		return fmt.Errorf("%w: %d, group is at %d", ErrIllegalGeneration, req.Generation, g.generation)
	}
	switch g.state {
	case CompletingRebalance:
		// The member has its new generation but not its assignment yet.
		return ErrRebalanceInProgress
	case Stable, PreparingRebalance:
		// A commit during PreparingRebalance is allowed; the heartbeat
		// tells the member to rejoin.
		if m != nil {
			g.touch(m)
		}
	}
	return nil
}

// execTx runs a MULTI ... EXEC pipeline and checks every reply.
func (c *Coordinator) execTx(ctx context.Context, pl *resp.Pipeline) error {
	rs, err := c.rc.Exec(ctx, pl)
	if err != nil {
		return err
	}
	defer rs.Release()
	ex := rs.At(rs.Len() - 1)
	if err := ex.Err(); err != nil {
		for i := 1; i < rs.Len()-1; i++ {
			if qerr := rs.At(i).Err(); qerr != nil {
				return qerr
			}
		}
		return err
	}
	if ex.IsNil() {
		return errors.New("transaction aborted")
	}
	var failed error
	ex.ForEach(func(r resp.Reply) bool {
		failed = r.Err()
		return failed == nil
	})
	return failed
}

// Fetch handles an OffsetFetch for one group: the committed offsets of
// parts, or of every partition the group committed when parts is nil.
// With requireStable, a partition with an offset pending in an open
// transaction has no offset and Err ErrUnstableOffsetCommit, as Kafka
// answers OffsetFetch's RequireStable.
func (c *Coordinator) Fetch(ctx context.Context, name string, parts []TopicPartition, requireStable bool) ([]PartitionCommit, error) {
	g, err := c.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		out := make([]PartitionCommit, len(parts))
		for i, tp := range parts {
			out[i] = PartitionCommit{TopicPartition: tp, Commit: Commit{Offset: -1, LeaderEpoch: -1}}
		}
		return out, nil
	}
	if err := g.ensureLoaded(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []PartitionCommit
	if parts == nil {
		out = g.sortedOffsets()
	} else {
		out = make([]PartitionCommit, len(parts))
		for i, tp := range parts {
			o, ok := g.offsets[tp]
			if !ok {
				o = Commit{Offset: -1, LeaderEpoch: -1}
			}
			out[i] = PartitionCommit{TopicPartition: tp, Commit: o}
		}
	}
	if requireStable && len(g.txn) > 0 {
		for i := range out {
			if g.pendingAt(out[i].TopicPartition) {
				out[i].Commit = Commit{Offset: -1, LeaderEpoch: -1}
				out[i].Err = ErrUnstableOffsetCommit
			}
		}
	}
	return out, nil
}

func (g *group) sortedOffsets() []PartitionCommit {
	out := make([]PartitionCommit, 0, len(g.offsets))
	for tp, o := range g.offsets {
		out = append(out, PartitionCommit{TopicPartition: tp, Commit: o})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// DeleteGroups deletes groups that have no members, with their committed
// offsets; it returns an error per group (ErrGroupNotFound,
// ErrNonEmptyGroup).
func (c *Coordinator) DeleteGroups(ctx context.Context, names []string) []error {
	errs := make([]error, len(names))
	for i, name := range names {
		errs[i] = c.deleteGroup(ctx, name)
	}
	return errs
}

func (c *Coordinator) deleteGroup(ctx context.Context, name string) error {
	g, err := c.find(ctx, name)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return notOwned(name)
	}
	switch g.state {
	case Dead:
		g.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	case Empty:
	default:
		g.mu.Unlock()
		return fmt.Errorf("%w: %q is %s with %d members", ErrNonEmptyGroup, name, g.state, len(g.members))
	}
	// Dead from here: joins and commits racing the delete are told to
	// retry, and find a fresh group.
	g.state = Dead
	g.mu.Unlock()
	var pl resp.Pipeline
	pl.Cmd("MULTI")
	pl.Cmd("UNLINK", c.k.GroupOffsets(name), c.k.GroupTxnOffsets(name))
	pl.Cmd("UNLINK", c.k.GroupState(name), c.k.ConsumerGroupState(name))
	pl.Cmd("HDEL", c.k.Groups(), name)
	pl.Cmd("EXEC")
	if err := c.execTx(ctx, &pl); err != nil {
		g.mu.Lock()
		g.state = Empty
		g.mu.Unlock()
		return fmt.Errorf("%w: delete group %q: %v", ErrCoordinatorNotAvailable, name, err)
	}
	c.forget(g)
	c.log.Info("group deleted", "group", name)
	return nil
}

// DeleteOffsets handles an OffsetDelete. A group with members keeps the
// offsets of topics it is subscribed to (ErrSubscribedToTopic);
// subscribedTopics decodes a member's metadata for the group's protocol
// type (it knows the consumer protocol; the coordinator does not) and
// reports false when it cannot tell, which counts as subscribed to all.
func (c *Coordinator) DeleteOffsets(ctx context.Context, name string, parts []TopicPartition, subscribedTopics func(protocolType string, metadata []byte) ([]string, bool)) ([]error, error) {
	g, err := c.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	if err := g.loadLocked(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(parts))
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return nil, notOwned(name)
	}
	switch g.state {
	case Dead:
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	case Empty:
	default:
		subscribed, known := map[string]bool{}, true
		if g.cg != nil {
			for _, t := range g.consumerSubscribedTopics() {
				subscribed[t] = true
			}
		}
		for _, m := range g.members {
			ts, ok := subscribedTopics(g.protocolType, m.metadataFor(g.protocol))
			if !ok {
				known = false
				break
			}
			for _, t := range ts {
				subscribed[t] = true
			}
		}
		for i, tp := range parts {
			if !known || subscribed[tp.Topic] {
				errs[i] = fmt.Errorf("%w: %s", ErrSubscribedToTopic, tp.Topic)
			}
		}
	}
	var deleted []TopicPartition
	for i, tp := range parts {
		if errs[i] == nil {
			deleted = append(deleted, tp)
		}
	}
	// Pending transactional offsets of the partitions go too, as Kafka's
	// tombstone takes them.
	pendingFields := g.pendingFields(deleted)
	g.mu.Unlock()
	if len(deleted) == 0 {
		return errs, nil
	}
	var pl resp.Pipeline
	pl.Cmd("MULTI")
	pl.Array(2 + len(deleted))
	pl.String("HDEL")
	pl.String(c.k.GroupOffsets(name))
	for _, tp := range deleted {
		pl.String(offsetField(tp))
	}
	if len(pendingFields) > 0 {
		pl.Array(2 + len(pendingFields))
		pl.String("HDEL")
		pl.String(c.k.GroupTxnOffsets(name))
		for _, f := range pendingFields {
			pl.String(f)
		}
	}
	pl.Cmd("EXEC")
	if err := c.execTx(ctx, &pl); err != nil {
		return nil, fmt.Errorf("%w: delete offsets of group %q: %v", ErrCoordinatorNotAvailable, name, err)
	}
	g.mu.Lock()
	for _, tp := range deleted {
		delete(g.offsets, tp)
	}
	g.dropPending(deleted)
	g.mu.Unlock()
	return errs, nil
}
