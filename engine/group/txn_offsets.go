package group

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/resp"
)

// Offsets committed inside transactions (TxnOffsetCommit, KIP-447). They
// wait in the group's txnoffsets hash, one field per producer and
// partition, until the transaction coordinator ends the transaction:
// CompleteTxn moves a producer's pending offsets to the committed ones
// (commit) or drops them (abort), in one Lua script on the group's slot.
//
// Only the group's coordinator adds pending offsets (TxnCommit), so its
// copy in memory holds every pending offset there is. CompleteTxn may run
// on any broker (the transaction's coordinator need not be the group's):
// a broker that does not own the group announces the change (Options.
// Announce) and the owner rereads the group's offsets on next use
// (StaleOffsets). Until it has, it may still see as pending what was
// completed: OffsetFetch with RequireStable then answers
// UNSTABLE_OFFSET_COMMIT a moment longer, which clients retry, and never
// an offset that is not committed.

// TxnCommitRequest is a TxnOffsetCommit. Generation -1 with an empty
// member and instance id is a producer outside group management (or a
// client before KIP-447), which needs no membership.
type TxnCommitRequest struct {
	Group, MemberID, InstanceID string
	Generation                  int32
	ProducerID                  int64
	ProducerEpoch               int16
	Offsets                     []PartitionCommit
	// Recheck, when set, asks the transaction coordinator again, once the
	// offsets are stored, whether the transaction is still ongoing. The
	// first check came before the write: a transaction that ended in
	// between (timed out, say) has completed its offsets already and
	// would leave these pending for good. On an error they are taken out
	// again and TxnCommit returns it. A transaction's state is durable
	// before its offsets are completed, so a recheck that passes means
	// the completion will find them.
	Recheck func(ctx context.Context) error
}

// txnOffsetField is the txnoffsets field of pid's offset for tp:
// "<pid>:<topic>:<partition>".
func txnOffsetField(pid int64, tp TopicPartition) string {
	return strconv.FormatInt(pid, 10) + ":" + offsetField(tp)
}

func parseTxnOffsetField(f string) (int64, TopicPartition, bool) {
	i := strings.IndexByte(f, ':')
	if i <= 0 {
		return 0, TopicPartition{}, false
	}
	pid, err := strconv.ParseInt(f[:i], 10, 64)
	if err != nil {
		return 0, TopicPartition{}, false
	}
	tp, ok := parseOffsetField(f[i+1:])
	return pid, tp, ok
}

// pendingAt reports whether some open transaction holds an offset for tp;
// under g.mu.
func (g *group) pendingAt(tp TopicPartition) bool {
	for _, offs := range g.txn {
		if _, ok := offs[tp]; ok {
			return true
		}
	}
	return false
}

// pendingFields lists the txnoffsets fields of every producer's offset
// for the partitions of tps; under g.mu.
func (g *group) pendingFields(tps []TopicPartition) []string {
	var out []string
	for pid, offs := range g.txn {
		for _, tp := range tps {
			if _, ok := offs[tp]; ok {
				out = append(out, txnOffsetField(pid, tp))
			}
		}
	}
	return out
}

// dropPending forgets every producer's offset for tps; under g.mu.
func (g *group) dropPending(tps []TopicPartition) {
	for pid, offs := range g.txn {
		for _, tp := range tps {
			delete(offs, tp)
		}
		if len(offs) == 0 {
			delete(g.txn, pid)
		}
	}
}

// TxnCommit handles a TxnOffsetCommit: it checks the member as Kafka does
// for transactional commits and stores the offsets as pending for the
// producer, until CompleteTxn. It returns an error per offset, or one for
// the whole commit. Whether the transaction is ongoing and has the group
// is the transaction coordinator's to check, before.
func (c *Coordinator) TxnCommit(ctx context.Context, req TxnCommitRequest) ([]error, error) {
	g, err := c.groupToCommit(ctx, req.Group, req.Generation)
	if err != nil {
		return nil, err
	}
	defer g.commitMu.Unlock()
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return nil, notOwned(req.Group)
	}
	err = g.validateTxnCommit(req)
	protocolType := g.protocolType
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(req.Offsets))
	now := time.Now()
	n := 0
	for i := range req.Offsets {
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
	var pl resp.Pipeline
	pl.Cmd("MULTI")
	pl.Array(2 + 2*n)
	pl.String("HSET")
	pl.String(c.k.GroupTxnOffsets(g.name))
	for i, o := range req.Offsets {
		if errs[i] == nil {
			pl.String(txnOffsetField(req.ProducerID, o.TopicPartition))
			pl.String(encodeOffset(o.Commit))
		}
	}
	pl.Cmd("HSET", c.k.Groups(), g.name, protocolType)
	pl.Cmd("EXEC")
	if err := c.execTx(ctx, &pl); err != nil {
		return nil, fmt.Errorf("%w: store transactional offsets of group %q: %v", ErrCoordinatorNotAvailable, g.name, err)
	}
	if req.Recheck != nil {
		if err := req.Recheck(ctx); err != nil {
			return nil, g.unstoreTxnOffsets(ctx, req, errs, err)
		}
	}
	g.mu.Lock()
	g.stored = true
	offs := g.txn[req.ProducerID]
	if offs == nil {
		offs = make(map[TopicPartition]Commit)
		g.txn[req.ProducerID] = offs
	}
	for i, o := range req.Offsets {
		if errs[i] == nil {
			offs[o.TopicPartition] = o.Commit
		}
	}
	g.mu.Unlock()
	return errs, nil
}

// unstoreTxnOffsets takes out the offsets TxnCommit stored for a
// transaction its recheck found ended, under commitMu: only this
// coordinator adds pending offsets, so the fields hold these values or
// were completed already. It returns why, or why it could not.
func (g *group) unstoreTxnOffsets(ctx context.Context, req TxnCommitRequest, errs []error, why error) error {
	var fields []any
	fields = append(fields, "HDEL", g.c.k.GroupTxnOffsets(g.name))
	var tps []TopicPartition
	for i, o := range req.Offsets {
		if errs[i] == nil {
			fields = append(fields, txnOffsetField(req.ProducerID, o.TopicPartition))
			tps = append(tps, o.TopicPartition)
		}
	}
	r, err := g.c.rc.Do(ctx, fields...)
	if err == nil {
		err = r.Err()
	}
	g.mu.Lock()
	if offs := g.txn[req.ProducerID]; offs != nil {
		for _, tp := range tps {
			delete(offs, tp)
		}
		if len(offs) == 0 {
			delete(g.txn, req.ProducerID)
		}
	}
	if err != nil {
		g.loaded = false // Redis may still have them: reread
	}
	g.mu.Unlock()
	if err != nil {
		g.c.log.Warn("transactional offsets of an ended transaction could not be taken out; they stay pending until the producer's next transaction ends", "group", g.name, "producer", req.ProducerID, "err", err)
		return fmt.Errorf("%w (and taking the offsets out again failed: %v)", why, err)
	}
	return why
}

// validateTxnCommit applies Kafka's checks of a transactional commit,
// under g.mu. Unlike a plain commit, one without member id, instance id
// and generation is taken whatever the group's state (older producers
// send none), and a rebalance under way is no reason to refuse: the
// transaction is fenced by generation alone.
func (g *group) validateTxnCommit(req TxnCommitRequest) error {
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	anonymous := req.Generation < 0 && req.MemberID == "" && req.InstanceID == ""
	if cg := g.cg; cg != nil {
		if anonymous || req.Generation < 0 && len(cg.members) == 0 {
			return nil
		}
		m := cg.members[req.MemberID]
		if m == nil {
			return fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
		}
		// A stale epoch is ILLEGAL_GENERATION here: TxnOffsetCommit
		// before v6 has no STALE_MEMBER_EPOCH.
		if req.Generation != m.epoch {
			return fmt.Errorf("%w: transactional commit at epoch %d, member is at %d", ErrIllegalGeneration, req.Generation, m.epoch)
		}
		return nil
	}
	if req.Generation < 0 && g.state == Empty || anonymous {
		return nil
	}
	if req.InstanceID != "" {
		id, ok := g.statics[req.InstanceID]
		if !ok {
			return fmt.Errorf("%w: no member has instance id %q", ErrUnknownMemberID, req.InstanceID)
		}
		if id != req.MemberID {
			return ErrFencedInstanceID
		}
	} else if g.members[req.MemberID] == nil {
		return fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
	}
	if req.Generation != g.generation {
		return fmt.Errorf("%w: %d, group is at %d", ErrIllegalGeneration, req.Generation, g.generation)
	}
	return nil
}

// completeScript moves (ARGV[2] "1") or drops ("0") the pending offsets
// of one producer. KEYS: txnoffsets, offsets, the group registry. ARGV:
// the producer's field prefix "<pid>:", commit, the group's name. It
// returns the fields it took out of txnoffsets, without the prefix, each
// followed by its value. Commands take at most 500 fields at a time: Lua's
// unpack has a bounded stack.
const completeScript = `
local all = redis.call('HGETALL', KEYS[1])
local p = ARGV[1]
local out = {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, #p) == p then
    out[#out+1] = string.sub(all[i], #p+1)
    out[#out+1] = all[i+1]
  end
end
local chunk = 500
for i = 1, #out, 2*chunk do
  local del, set = {}, {}
  for j = i, math.min(i+2*chunk-1, #out), 2 do
    del[#del+1] = p .. out[j]
    set[#set+1] = out[j]
    set[#set+1] = out[j+1]
  end
  redis.call('HDEL', KEYS[1], unpack(del))
  if ARGV[2] == '1' then
    redis.call('HSET', KEYS[2], unpack(set))
  end
end
if #out > 0 and ARGV[2] == '1' then
  redis.call('HSETNX', KEYS[3], ARGV[3], '')
end
return out
`

var completeSHA = func() string {
	h := sha1.Sum([]byte(completeScript))
	return hex.EncodeToString(h[:])
}()

// CompleteTxn ends producer pid's transaction for the group's offsets:
// its pending offsets become the committed ones (commit) or are dropped
// (abort), atomically. Any broker may call it; it is idempotent, so a
// coordinator that retries after a crash may call it again.
func (c *Coordinator) CompleteTxn(ctx context.Context, name string, pid int64, commit bool) error {
	var g *group
	if c.owns(name) {
		g = c.held(name)
	}
	if g != nil {
		// No commit of the group's may land between the script and the
		// update of memory.
		g.commitMu.Lock()
		defer g.commitMu.Unlock()
	}
	flag := "0"
	if commit {
		flag = "1"
	}
	keys := []any{c.k.GroupTxnOffsets(name), c.k.GroupOffsets(name), c.k.Groups()}
	args := []any{strconv.FormatInt(pid, 10) + ":", flag, name}
	r, err := c.evalsha(ctx, completeScript, completeSHA, keys, args)
	if err != nil {
		return fmt.Errorf("%w: complete transactional offsets of producer %d in group %q: %v", ErrCoordinatorNotAvailable, pid, name, err)
	}
	var elems []resp.Reply
	elems = r.Elems(elems)
	done := make(map[TopicPartition]Commit, len(elems)/2)
	for i := 0; i+1 < len(elems); i += 2 {
		tp, ok := parseOffsetField(string(elems[i].Bytes()))
		o, err := decodeOffset(string(elems[i+1].Bytes()))
		if !ok || err != nil {
			c.log.Warn("skipping bad transactional offset", "group", name, "producer", pid, "field", string(elems[i].Bytes()))
			continue
		}
		done[tp] = o
	}
	if g != nil {
		g.mu.Lock()
		if g.loaded {
			for tp := range g.txn[pid] {
				if _, ok := done[tp]; !ok {
					// Redis no longer had it: completed elsewhere.
					// Reread rather than guess what is committed.
					g.loaded = false
				}
			}
			delete(g.txn, pid)
			if commit {
				for tp, o := range done {
					g.offsets[tp] = o
				}
			}
		}
		g.mu.Unlock()
	}
	if len(elems) > 0 && !c.owns(name) && c.opts.Announce != nil {
		if err := c.opts.Announce(ctx, name); err != nil {
			// Written, but the owner may answer RequireStable with
			// UNSTABLE_OFFSET_COMMIT until the next resync.
			c.log.Warn("transactional offsets completed but the group's coordinator was not told", "group", name, "producer", pid, "err", err)
		}
	}
	c.log.Debug("transactional offsets completed", "group", name, "producer", pid, "commit", commit, "offsets", len(done))
	return nil
}

// StaleOffsets is for when another broker completed a transaction's
// offsets for the group: its committed and pending offsets are reread from
// Redis on next use. name "" marks every group with pending offsets (after
// a resync, when events may have been missed).
func (c *Coordinator) StaleOffsets(name string) {
	var gs []*group
	if name == "" {
		gs = c.all()
	} else if g := c.held(name); g != nil {
		gs = []*group{g}
	}
	for _, g := range gs {
		g.mu.Lock()
		if name != "" || len(g.txn) > 0 {
			// Loads happen under commitMu, so a commit under way
			// finishes before the reread.
			g.loaded = false
		}
		g.mu.Unlock()
	}
}

// evalsha runs a Lua script by its digest, sending its source when Redis
// does not have it (it restarted, or its script cache was flushed).
func (c *Coordinator) evalsha(ctx context.Context, src, sha string, keys, args []any) (resp.Reply, error) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", sha, len(keys))
	cmd = append(cmd, keys...)
	cmd = append(cmd, args...)
	r, err := c.rc.Do(ctx, cmd...)
	if err == nil {
		err = r.Err()
	}
	var re *resp.Error
	if err != nil && errors.As(err, &re) && re.Prefix == "NOSCRIPT" {
		cmd[0], cmd[1] = "EVAL", src
		r, err = c.rc.Do(ctx, cmd...)
		if err == nil {
			err = r.Err()
		}
	}
	return r, err
}
