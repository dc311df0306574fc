package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// Partition leadership. The partition meta hash holds "leader" (node id),
// "leader_epoch", "leader_instance" (the lease token of the process that
// leads, so that a restarted broker with the same node id claims anew)
// and "epoch:{E}" (the offset epoch E started at; the last 64 kept). The
// desired leader is the rendezvous-hash winner among live, non-leaving
// brokers. Leadership moves only by moveScript, which bumps the epoch and
// announces the move in the events stream atomically; every append round
// checks the epoch in the same script that writes it (flush.go), so a
// deposed leader cannot write.

// moveScript claims a partition or transfers it.
//
// KEYS: partition meta, topics hash, events stream.
// ARGV: this node, lease key prefix, topic, partition, mode ("claim" or
// "transfer"), target node, expected epoch (transfer), events MAXLEN, our
// lease token.
//
// A claim succeeds when the partition has no leader, when its leader is
// this node id (any incarnation) or when the leader's lease is gone, and
// only while we hold our own lease. A transfer succeeds when we lead at
// the expected epoch and the target holds a lease. Returns {1, leader,
// epoch} on success, {0, leader, epoch} when refused, {-1, "", 0} when
// the topic is gone.
var moveScript = newScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 then return {-1, '', 0} end
local m = redis.call('HMGET', KEYS[1], 'leader', 'leader_epoch', 'next')
local cur, ep, nxt = m[1], tonumber(m[2]) or 0, m[3] or '0'
local target, inst
if ARGV[5] == 'claim' then
  if redis.call('GET', ARGV[2] .. ARGV[1]) ~= ARGV[9] then return {0, cur or '', ep} end
  if cur and cur ~= ARGV[1] and redis.call('EXISTS', ARGV[2] .. cur) == 1 then return {0, cur, ep} end
  target, inst = ARGV[1], ARGV[9]
else
  if cur ~= ARGV[1] or ep ~= tonumber(ARGV[7]) then return {0, cur or '', ep} end
  target = ARGV[6]
  inst = redis.call('GET', ARGV[2] .. target)
  if not inst then return {0, cur, ep} end
end
ep = ep + 1
redis.call('HSET', KEYS[1], 'leader', target, 'leader_epoch', ep, 'leader_instance', inst, 'epoch:' .. ep, nxt)
if ep > 64 then redis.call('HDEL', KEYS[1], 'epoch:' .. (ep - 64)) end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'kind', 'leader', 'node', ARGV[1],
  'topic', ARGV[3], 'partition', ARGV[4], 'leader', target, 'epoch', ep)
return {1, target, ep}
`)

// hrwKey is the partition's key for rendezvous hashing.
func (p *Partition) hrwKey() string { return p.t.name + "\x00" + strconv.Itoa(int(p.id)) }

// observe records the leader and epoch seen in Redis or an event.
func (p *Partition) observe(node, epoch int32) {
	p.leaderNode.Store(node)
	p.leaderEpoch.Store(epoch)
}

// stepDown stops leading: queued appends fail with ErrNotLeader, and the
// partition reloads from Redis before it leads again.
func (p *Partition) stepDown() {
	p.mu.Lock()
	p.stepDownLocked()
	p.mu.Unlock()
}

// stepDownBelow steps down unless this broker leads at epoch or later.
func (p *Partition) stepDownBelow(epoch int32) {
	p.mu.Lock()
	if p.leadEpoch != 0 && p.leadEpoch < epoch {
		p.stepDownLocked()
	}
	p.mu.Unlock()
}

func (p *Partition) stepDownLocked() {
	if p.leadEpoch == 0 && !p.handoff {
		return
	}
	if p.leadEpoch != 0 {
		p.t.e.log.Info("partition leadership lost", "topic", p.t.name, "partition", p.id, "epoch", p.leadEpoch)
	}
	p.leadEpoch, p.handoff = 0, false
	p.lead.Store(false)
	p.needSync = true
	p.failQueuedLocked(p.notLeader())
}

func (p *Partition) notLeader() error {
	if p.t.e.cl.unreachable.Load() {
		return fmt.Errorf("%w: %s/%d: Redis did not answer for a broker lease time, so this broker stopped leading until it answers again", ErrStorageUnavailable, p.t.name, p.id)
	}
	return fmt.Errorf("%w: %s/%d (leader %d, epoch %d)", ErrNotLeader, p.t.name, p.id, p.leaderNode.Load(), p.leaderEpoch.Load())
}

// wakeControl asks the control loop for a leadership check soon.
func (e *Engine) wakeControl() {
	select {
	case e.cl.wake <- struct{}{}:
	default:
	}
}

// partitionsChanged is for code that loads topics or partitions another
// broker created (the topic event's reload): the new partitions get a
// leader without waiting for the next periodic check.
func (e *Engine) partitionsChanged() { e.wakeControl() }

// subscribeCluster reacts to other brokers' changes.
func (e *Engine) subscribeCluster() {
	e.events.Subscribe(events.Brokers, func(events.Event) { e.wakeControl() })
	e.events.Subscribe(events.Topic, func(events.Event) { e.wakeControl() })
	e.events.Subscribe(events.Resync, func(events.Event) { e.wakeControl() })
	e.events.Subscribe(events.Leader, func(ev events.Event) {
		t := e.Topic(ev.Get("topic"))
		if t == nil || e.cl.paused.Load() {
			return
		}
		pid, err1 := strconv.ParseInt(ev.Get("partition"), 10, 32)
		node, err2 := strconv.ParseInt(ev.Get("leader"), 10, 32)
		epoch, err3 := strconv.ParseInt(ev.Get("epoch"), 10, 32)
		p := t.Partition(int32(pid))
		if err1 != nil || err2 != nil || err3 != nil || p == nil {
			return
		}
		if int32(epoch) < p.leaderEpoch.Load() {
			return // older than what we saw
		}
		p.observe(int32(node), int32(epoch))
		if int32(node) != e.opts.NodeID {
			p.stepDownBelow(int32(epoch))
			return
		}
		e.wakeControl() // handed to us: take it up
	})
}

// controlLoop renews the view of live brokers and checks every
// partition's leadership every lease/4, and when woken by an event.
func (e *Engine) controlLoop() {
	defer e.wg.Done()
	tick := time.NewTicker(e.cl.lease / 4)
	defer tick.Stop()
	for {
		select {
		case <-e.bg.Done():
			return
		case <-tick.C:
		case <-e.cl.wake:
		}
		if e.cl.paused.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(e.bg, 2*e.cl.lease)
		if err := e.refreshLive(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("broker refresh", "err", err)
		}
		if err := e.checkLeadership(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("partition leadership check", "err", err)
		}
		cancel()
	}
}

func (e *Engine) allPartitions() []*Partition {
	var out []*Partition
	for _, t := range e.Topics() {
		out = append(out, t.Partitions()...)
	}
	return out
}

// checkLeadership reads every partition's leader from Redis and acts:
// takes up partitions handed to this process, claims leaderless ones (or
// ones whose leader's lease is gone) that it should lead, hands the ones
// it leads to their desired leader, and steps down where another leads.
// A partition leaderless for longer than a lease is claimed by any
// broker, in case its desired leader does not know the topic yet; it
// moves to the desired one later.
func (e *Engine) checkLeadership(ctx context.Context) error {
	c := &e.cl
	c.leadMu.Lock()
	defer c.leadMu.Unlock()
	c.mu.Lock()
	token, leaving := c.token, c.leaving || c.left
	c.mu.Unlock()
	if leaving {
		return nil
	}
	parts := e.allPartitions()
	if len(parts) == 0 {
		return nil
	}
	var pl resp.Pipeline
	for _, p := range parts {
		pl.Cmd("HMGET", p.metaKey, "leader", "leader_epoch", "leader_instance")
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("read partition leaders: %w", err)
	}
	defer rs.Release()
	self := e.opts.NodeID
	nodes := e.liveNodes()
	now := time.Now()
	var become []*Partition
	var becomeAt []int32
	var claims []*Partition
	var moves []move
	var f []resp.Reply
	for i, p := range parts {
		f = rs.At(i).Elems(f[:0])
		if len(f) != 3 {
			continue
		}
		cur, curOK := int32(-1), false
		if !f[0].IsNil() {
			if n, err := strconv.ParseInt(string(f[0].Bytes()), 10, 32); err == nil {
				cur, curOK = int32(n), true
			}
		}
		ep64, _ := strconv.ParseInt(string(f[1].Bytes()), 10, 32)
		ep, inst := int32(ep64), string(f[2].Bytes())
		p.observe(cur, ep)
		want := hrw(p.hrwKey(), nodes)
		p.mu.Lock()
		leadEpoch := p.leadEpoch
		p.mu.Unlock()
		switch {
		case curOK && cur == self && token != "" && inst == token:
			p.orphanSince = time.Time{}
			switch {
			case leadEpoch != ep:
				become, becomeAt = append(become, p), append(becomeAt, ep)
			case want >= 0 && want != self:
				moves = append(moves, move{p: p, to: want})
			}
		case !curOK || cur == self || !e.isLive(cur):
			if leadEpoch != 0 {
				p.stepDown()
			}
			if p.orphanSince.IsZero() {
				p.orphanSince = now
			}
			if token != "" && (want == self || now.Sub(p.orphanSince) > c.lease) {
				claims = append(claims, p)
			}
		default:
			p.orphanSince = time.Time{}
			if leadEpoch != 0 {
				p.stepDownBelow(ep)
			}
		}
	}
	if len(claims) > 0 {
		won, at, err := e.claim(ctx, claims, token)
		if err != nil {
			e.log.Warn("partition claim", "err", err)
		}
		become, becomeAt = append(become, won...), append(becomeAt, at...)
	}
	if len(become) > 0 {
		if err := e.becomeLeader(ctx, become, becomeAt); err != nil {
			return err
		}
	}
	if len(moves) > 0 {
		e.transfer(ctx, moves)
	}
	return nil
}

// leaseKeyPrefix is the lease key of node "" (scripts append the id).
func (e *Engine) leaseKeyPrefix() string {
	return strings.TrimSuffix(e.k.BrokerLease(0), "0")
}

// claim runs the claim script on each partition, pipelined, and returns
// the ones this broker won with their new epochs.
func (e *Engine) claim(ctx context.Context, parts []*Partition, token string) (won []*Partition, epochs []int32, err error) {
	args := make([]moveArgs, len(parts))
	for i := range parts {
		args[i] = moveArgs{claim: true, target: e.opts.NodeID, token: token}
	}
	err = e.runMoves(ctx, parts, args, func(p *Partition, ok bool, leader, epoch int32) {
		if ok && leader == e.opts.NodeID {
			e.log.Info("partition claimed", "topic", p.t.name, "partition", p.id, "epoch", epoch)
			won, epochs = append(won, p), append(epochs, epoch)
		}
	})
	return won, epochs, err
}

// moveArgs is one claim or transfer: a claim makes target (this broker,
// holding lease token) the leader; a transfer moves a partition this
// broker leads at epoch to target.
type moveArgs struct {
	claim  bool
	target int32
	epoch  int32
	token  string
}

// runMoves sends moveScript once per partition in one pipeline and
// reports each result. NOSCRIPT: the script is loaded and the whole
// pipeline sent again (none of it ran).
func (e *Engine) runMoves(ctx context.Context, parts []*Partition, args []moveArgs, done func(p *Partition, ok bool, leader, epoch int32)) error {
	if e.k.IsCluster() {
		return e.runMovesSharded(ctx, parts, args, done)
	}
	var pl resp.Pipeline
	for i, a := range args {
		p := parts[i]
		mode := "transfer"
		if a.claim {
			mode = "claim"
		}
		pl.Cmd("EVALSHA", moveScript.sha, 3, p.metaKey, e.k.Topics(), e.k.Events(),
			e.opts.NodeID, e.leaseKeyPrefix(), p.t.name, p.id, mode, a.target, a.epoch, events.MaxLen, a.token)
	}
	for attempt := 0; ; attempt++ {
		rs, err := e.rc.Exec(ctx, &pl)
		if err != nil {
			return fmt.Errorf("move partition leadership: %w", err)
		}
		if attempt == 0 && rs.Len() > 0 && isNoScript(rs.At(0).Err()) {
			rs.Release()
			if err := moveScript.load(ctx, e.rc); err != nil {
				return err
			}
			continue
		}
		var firstErr error
		var f []resp.Reply
		for i, p := range parts {
			r := rs.At(i)
			if err := r.Err(); err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("move leadership of %s/%d: %w", p.t.name, p.id, err)
				}
				continue
			}
			var res int64
			var leader, epoch int32
			var ok bool
			if res, leader, epoch, ok = parseMove(r, &f); !ok {
				continue
			}
			if res >= 0 {
				p.observe(leader, epoch)
			}
			done(p, res == 1, leader, epoch)
		}
		rs.Release()
		return firstErr
	}
}

// parseMove reads a {result, leader, epoch} reply of moveScript or
// casScript; f is scratch space.
func parseMove(r resp.Reply, f *[]resp.Reply) (res int64, leader, epoch int32, ok bool) {
	*f = r.Elems((*f)[:0])
	if len(*f) != 3 {
		return 0, 0, 0, false
	}
	res, _ = (*f)[0].Int()
	leader = -1
	if n, err := strconv.ParseInt(string((*f)[1].Bytes()), 10, 32); err == nil {
		leader = int32(n)
	}
	ep, _ := (*f)[2].Int()
	return res, leader, int32(ep), true
}

// becomeLeader reloads partitions from Redis and makes this broker lead
// each at its epoch, if Redis still says so.
func (e *Engine) becomeLeader(ctx context.Context, parts []*Partition, epochs []int32) error {
	if err := loadPartitions(ctx, e, parts); err != nil {
		return fmt.Errorf("load partitions to lead: %w", err)
	}
	for i, p := range parts {
		p.mu.Lock()
		if p.leaderNode.Load() == e.opts.NodeID && p.leaderEpoch.Load() == epochs[i] && !p.closed {
			p.leadEpoch, p.handoff, p.needSync = epochs[i], false, false
			p.lead.Store(true)
			e.log.Debug("leading partition", "topic", p.t.name, "partition", p.id, "epoch", epochs[i])
			if len(p.queue) > 0 || p.trimTo > p.start.Load() {
				p.kickLocked()
			}
			if len(p.txns) > 0 {
				e.queueResolve(p)
			}
		}
		p.mu.Unlock()
	}
	return nil
}

type move struct {
	p     *Partition
	to    int32
	epoch int32
}

// transfer hands partitions this broker leads to other brokers: it stops
// taking appends on them, waits (bounded) for their queues to drain so
// that no acknowledged-but-unwritten work is lost, then moves each with
// moveScript. An append still in flight when the epoch moves is fenced
// and fails with ErrNotLeader, which clients retry.
func (e *Engine) transfer(ctx context.Context, moves []move) {
	var ms []move
	for _, m := range moves {
		m.p.mu.Lock()
		if m.p.leadEpoch != 0 {
			m.epoch = m.p.leadEpoch
			m.p.handoff = true
			ms = append(ms, m)
		}
		m.p.mu.Unlock()
	}
	if len(ms) == 0 {
		return
	}
	deadline := time.Now().Add(min(e.cl.lease/2, 2*time.Second))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		busy := false
		for _, m := range ms {
			m.p.mu.Lock()
			busy = busy || m.p.flushing || len(m.p.queue) > 0
			m.p.mu.Unlock()
		}
		if !busy {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	parts := make([]*Partition, len(ms))
	args := make([]moveArgs, len(ms))
	for i, m := range ms {
		parts[i] = m.p
		args[i] = moveArgs{target: m.to, epoch: m.epoch}
	}
	moved := map[*Partition]bool{}
	err := e.runMoves(ctx, parts, args, func(p *Partition, ok bool, leader, epoch int32) {
		if ok {
			moved[p] = true
			e.log.Info("partition handed over", "topic", p.t.name, "partition", p.id, "to", leader, "epoch", epoch)
		}
	})
	if err != nil {
		e.log.Warn("partition handover", "err", err)
	}
	for _, m := range ms {
		if moved[m.p] {
			m.p.stepDown()
			continue
		}
		m.p.mu.Lock()
		m.p.handoff = false
		m.p.mu.Unlock()
	}
}

// assignNew gives partitions just created their leader: this broker
// claims those it should lead; the others' desired leaders claim theirs
// when they load the topic.
func (e *Engine) assignNew(ctx context.Context, parts []*Partition) error {
	e.cl.leadMu.Lock()
	defer e.cl.leadMu.Unlock()
	e.cl.mu.Lock()
	token := e.cl.token
	e.cl.mu.Unlock()
	if token == "" {
		return nil
	}
	nodes := e.liveNodes()
	var mine []*Partition
	for _, p := range parts {
		// The control loop may have claimed it first.
		if !p.IsLeader() && hrw(p.hrwKey(), nodes) == e.opts.NodeID {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		e.partitionsChanged()
		return nil
	}
	won, at, err := e.claim(ctx, mine, token)
	if err != nil {
		return err
	}
	return e.becomeLeader(ctx, won, at)
}

// Leave is the controlled shutdown: this broker is marked leaving (so no
// one hands it anything), hands every partition it leads to its desired
// leader among the others once its queue has drained, then gives up its
// lease and registry entry. Appends after Leave fail with ErrNotLeader.
// Close calls it when it was not called.
func (e *Engine) Leave(ctx context.Context) error {
	c := &e.cl
	c.mu.Lock()
	if c.leaving || c.left {
		c.mu.Unlock()
		return nil
	}
	c.leaving = true
	token := c.token
	c.mu.Unlock()
	c.leadMu.Lock()
	defer c.leadMu.Unlock()
	e.log.Info("broker leaving: handing partitions over", "node", e.opts.NodeID)
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if token != "" {
		js := mustJSON(e.record(stateLeaving))
		_, err := renewScript.run(ctx, e.rc, []string{e.k.BrokerLease(e.opts.NodeID), e.k.Brokers()}, token, c.lease.Milliseconds(), e.opts.NodeID, js)
		keep(err)
		keep(e.events.Publish(ctx, events.Brokers, "change", "leaving"))
	}
	others := e.liveNodes() // excludes this broker now
	var moves []move
	for _, p := range e.allPartitions() {
		if !p.IsLeader() {
			continue
		}
		if to := hrw(p.hrwKey(), others); to >= 0 {
			moves = append(moves, move{p: p, to: to})
		}
	}
	e.transfer(ctx, moves)
	for _, p := range e.allPartitions() {
		p.stepDown()
	}
	if token != "" {
		_, err := releaseScript.run(ctx, e.rc, []string{e.k.BrokerLease(e.opts.NodeID), e.k.Brokers()}, token, e.opts.NodeID)
		keep(err)
		keep(e.events.Publish(ctx, events.Brokers, "change", "leave"))
	}
	c.mu.Lock()
	c.left, c.token = true, ""
	c.mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("leave: %w", firstErr)
	}
	e.log.Info("broker left", "node", e.opts.NodeID, "handed_over", len(moves))
	return nil
}
