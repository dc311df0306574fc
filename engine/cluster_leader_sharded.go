package engine

import (
	"context"
	"fmt"
	"strconv"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// On a Redis Cluster a partition's meta hash and the brokers' leases live
// in different slots, usually on different shards, so moveScript cannot
// read both. A move there takes four steps, the first three pipelined
// over all the partitions moved together:
//
//  1. read each partition's leader and epoch, whether its topic exists,
//     and this broker's own lease;
//  2. read the leases of the current leaders (claims) or of the targets
//     (transfers);
//  3. write the new leader with casScript, which compares the leader and
//     epoch read in step 1 and bumps the epoch only if neither moved;
//  4. announce the moves in the events stream.
//
// The compare-and-set keeps epochs unique (two brokers can never both win
// one epoch); what is no longer atomic is the lease check, so a leader
// whose lease returns between steps 2 and 3 loses its partitions and
// takes them back by the next handover, as when it restarts. A crash
// before step 4 delays other brokers' view until their next leadership
// check (every quarter lease).

// casScript sets a partition's leader if its leader and epoch are still
// what the caller read.
//
// KEYS: partition meta. ARGV: expected leader ("" for none), expected
// epoch, new leader, its lease token. Returns {1, leader, epoch} when set,
// {0, leader, epoch} (what is there) when not.
var casScript = newScript(`
local m = redis.call('HMGET', KEYS[1], 'leader', 'leader_epoch', 'next')
local cur, ep, nxt = m[1] or '', tonumber(m[2]) or 0, m[3] or '0'
if cur ~= ARGV[1] or ep ~= tonumber(ARGV[2]) then return {0, cur, ep} end
ep = ep + 1
redis.call('HSET', KEYS[1], 'leader', ARGV[3], 'leader_epoch', ep, 'leader_instance', ARGV[4], 'epoch:' .. ep, nxt)
if ep > 64 then redis.call('HDEL', KEYS[1], 'epoch:' .. (ep - 64)) end
return {1, ARGV[3], ep}
`)

// runMovesSharded is runMoves for a Redis Cluster.
func (e *Engine) runMovesSharded(ctx context.Context, parts []*Partition, args []moveArgs, done func(p *Partition, ok bool, leader, epoch int32)) error {
	self := strconv.Itoa(int(e.opts.NodeID))
	// Step 1.
	var pl resp.Pipeline
	for _, p := range parts {
		pl.Cmd("HMGET", p.metaKey, "leader", "leader_epoch")
		pl.Cmd("HEXISTS", e.k.Topics(), p.t.name)
	}
	pl.Cmd("GET", e.k.BrokerLease(e.opts.NodeID))
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("move partition leadership: read leaders: %w", err)
	}
	type state struct {
		cur   string
		epoch int32
		inst  string // the lease token the move writes
		gone  bool
		skip  bool // refused or failed
	}
	st := make([]state, len(parts))
	var firstErr error
	fail := func(i int, err error) {
		st[i].skip = true
		if firstErr == nil {
			firstErr = fmt.Errorf("move leadership of %s/%d: %w", parts[i].t.name, parts[i].id, err)
		}
	}
	var f []resp.Reply
	for i := range parts {
		m, ex := rs.At(2*i), rs.At(2*i+1)
		if err := m.Err(); err != nil {
			fail(i, err)
			continue
		}
		if err := ex.Err(); err != nil {
			fail(i, err)
			continue
		}
		f = m.Elems(f[:0])
		if len(f) != 2 {
			fail(i, fmt.Errorf("HMGET answered %d fields", len(f)))
			continue
		}
		st[i].cur = string(f[0].Bytes())
		ep, _ := strconv.ParseInt(string(f[1].Bytes()), 10, 32)
		st[i].epoch = int32(ep)
		if n, _ := ex.Int(); n == 0 {
			st[i].gone = true
		}
	}
	ownLease := string(rs.At(rs.Len() - 1).Bytes())
	rs.Release()

	// Step 2: the leases that decide, one GET per node.
	need := map[string]bool{}
	for i, a := range args {
		switch {
		case st[i].skip || st[i].gone:
		case a.claim && st[i].cur != "" && st[i].cur != self:
			need[st[i].cur] = true
		case !a.claim:
			need[strconv.Itoa(int(a.target))] = true
		}
	}
	leases := map[string]string{}
	if len(need) > 0 {
		pl.Reset()
		var nodes []string
		for n := range need {
			id, _ := strconv.ParseInt(n, 10, 32)
			pl.Cmd("GET", e.k.BrokerLease(int32(id)))
			nodes = append(nodes, n)
		}
		rs, err := e.rc.Exec(ctx, &pl)
		if err != nil {
			return fmt.Errorf("move partition leadership: read leases: %w", err)
		}
		for i, n := range nodes {
			if err := rs.At(i).Err(); err != nil {
				rs.Release()
				return fmt.Errorf("move partition leadership: read lease of node %s: %w", n, err)
			}
			if r := rs.At(i); !r.IsNil() {
				leases[n] = string(r.Bytes())
			}
		}
		rs.Release()
	}

	// Step 3: decide as moveScript does, then compare-and-set.
	var todo []int
	pl.Reset()
	for i, a := range args {
		s := &st[i]
		if s.skip {
			continue
		}
		if s.gone {
			done(parts[i], false, -1, 0)
			continue
		}
		var inst string
		if a.claim {
			if ownLease != a.token || (s.cur != "" && s.cur != self && leases[s.cur] != "") {
				e.refused(parts[i], s.cur, s.epoch, done)
				continue
			}
			inst = a.token
		} else {
			inst = leases[strconv.Itoa(int(a.target))]
			if s.cur != self || s.epoch != a.epoch || inst == "" {
				e.refused(parts[i], s.cur, s.epoch, done)
				continue
			}
		}
		s.inst = inst
		pl.Cmd("EVALSHA", casScript.sha, 1, parts[i].metaKey, s.cur, s.epoch, a.target, inst)
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return firstErr
	}
	var won []casWin
	for attempt := 0; ; attempt++ {
		rs, err := e.rc.Exec(ctx, &pl)
		if err != nil {
			return fmt.Errorf("move partition leadership: %w", err)
		}
		noScript := false
		for j := range todo {
			noScript = noScript || isNoScript(rs.At(j).Err())
		}
		// Only the scripts NOSCRIPT refused did not run: on the first
		// try those are sent again once the script is loaded.
		var retry []int
		var again resp.Pipeline
		for j, i := range todo {
			r := rs.At(j)
			if noScript && attempt == 0 && isNoScript(r.Err()) {
				s := &st[i]
				again.Cmd("EVALSHA", casScript.sha, 1, parts[i].metaKey, s.cur, s.epoch, args[i].target, s.inst)
				retry = append(retry, i)
				continue
			}
			if w, ok := e.casTook(parts[i], r, done, &firstErr); ok {
				won = append(won, w)
			}
		}
		rs.Release()
		if len(retry) == 0 {
			break
		}
		if err := casScript.load(ctx, e.rc); err != nil {
			return err
		}
		todo, pl = retry, again
	}
	e.announceMoves(ctx, won, done)
	return firstErr
}

// casWin is a move casScript made.
type casWin struct {
	p             *Partition
	leader, epoch int32
}

// casTook reads casScript's reply: a move that took is returned for
// announceMoves; one that did not is reported at once.
func (e *Engine) casTook(p *Partition, r resp.Reply, done func(p *Partition, ok bool, leader, epoch int32), firstErr *error) (casWin, bool) {
	if err := r.Err(); err != nil {
		if *firstErr == nil {
			*firstErr = fmt.Errorf("move leadership of %s/%d: %w", p.t.name, p.id, err)
		}
		return casWin{}, false
	}
	var f []resp.Reply
	res, leader, epoch, ok := parseMove(r, &f)
	if !ok {
		return casWin{}, false
	}
	if res != 1 {
		p.observe(leader, epoch)
		done(p, false, leader, epoch)
		return casWin{}, false
	}
	return casWin{p: p, leader: leader, epoch: epoch}, true
}

// announceMoves is step 4, one round trip for all the moves: each is
// announced in the events stream, and undone if its topic was deleted
// between step 1 and the write (the write brought its meta hash back).
func (e *Engine) announceMoves(ctx context.Context, won []casWin, done func(p *Partition, ok bool, leader, epoch int32)) {
	if len(won) == 0 {
		return
	}
	var pl resp.Pipeline
	for _, w := range won {
		e.events.Append(&pl, events.Leader, "topic", w.p.t.name, "partition", strconv.Itoa(int(w.p.id)),
			"leader", strconv.Itoa(int(w.leader)), "epoch", strconv.Itoa(int(w.epoch)))
		pl.Cmd("HEXISTS", e.k.Topics(), w.p.t.name)
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		e.log.Warn("announce partition leaders", "partitions", len(won), "err", err)
	}
	var undo resp.Pipeline
	for i, w := range won {
		if err == nil {
			if n, herr := rs.At(2*i + 1).Int(); herr == nil && n == 0 {
				undo.Cmd("UNLINK", w.p.metaKey)
				done(w.p, false, -1, 0)
				continue
			}
		}
		w.p.observe(w.leader, w.epoch)
		done(w.p, true, w.leader, w.epoch)
	}
	if err == nil {
		rs.Release()
	}
	if undo.Len() > 0 {
		if rs, err := e.rc.Exec(ctx, &undo); err == nil {
			rs.Release()
		}
	}
}

// refused reports a move that the leases or epochs ruled out.
func (e *Engine) refused(p *Partition, cur string, epoch int32, done func(p *Partition, ok bool, leader, epoch int32)) {
	leader := int32(-1)
	if n, err := strconv.ParseInt(cur, 10, 32); err == nil {
		leader = int32(n)
	}
	p.observe(leader, epoch)
	done(p, false, leader, epoch)
}
