package resp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// exec is Client.Exec on a cluster. A pipeline whose commands all go to
// one node is sent as it is; otherwise, or when redirects come back, it
// is split into units (plan) sent per node and the replies reassembled in
// order.
func (cl *cluster) exec(ctx context.Context, p *Pipeline) (*Replies, error) {
	deadline := cl.deadline(ctx)
	wait := clusterMinWait
	for {
		n, slot, err := cl.singleNode(ctx, p)
		if err != nil {
			return nil, err
		}
		if n == nil {
			return cl.execUnits(ctx, p, nil, nil, deadline)
		}
		rs, err := n.Exec(ctx, p)
		if err != nil {
			if !cl.retryable(ctx, err, deadline) {
				return nil, nodeError(n, slot, err)
			}
			if err := cl.pause(ctx, &wait, deadline); err != nil {
				return nil, err
			}
			continue
		}
		for i := range rs.list {
			if isRedirectReply(rs.list[i]) {
				return cl.execUnits(ctx, p, n, rs, deadline)
			}
		}
		return rs, nil
	}
}

func (cl *cluster) deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(cl.c.opts.Timeout)
}

// retryable reports a connection failure before anything was sent (a
// dead or unreachable node): the map is reloaded and the commands sent
// again while time is left.
func (cl *cluster) retryable(ctx context.Context, err error, deadline time.Time) bool {
	var ce *ConnError
	if !errors.As(err, &ce) || ce.Sent || ctx.Err() != nil || !time.Now().Before(deadline) {
		return false
	}
	if err := cl.refresh(ctx, false); err != nil {
		cl.c.log.Debug("redis cluster slot map reload failed", "err", err)
	}
	return true
}

// pause waits *wait (bounded by the deadline), then doubles it up to
// clusterMaxWait.
func (cl *cluster) pause(ctx context.Context, wait *time.Duration, deadline time.Time) error {
	d := min(*wait, time.Until(deadline))
	*wait = min(2**wait, clusterMaxWait)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &ConnError{Op: "send", Addr: cl.c.cfg.Addr, Err: ctx.Err()}
	case <-cl.ctx.Done():
		return ErrClosed
	}
}

// singleNode returns the node every command of p goes to, or nil when
// they go to several (or a DEL-like command must be split). It does not
// allocate. A MULTI block across slots is an error. slot is the first
// keyed command's, for error messages (-1: none).
func (cl *cluster) singleNode(ctx context.Context, p *Pipeline) (n *Client, slot int, err error) {
	if err := p.Err(); err != nil {
		return nil, -1, err
	}
	slot = -1
	var target *Client
	blockSlot, inBlock := -1, false
	var blockKey []byte
	buf := p.buf
	for i := 0; i < p.n; i++ {
		cmd, argc, rest, err := nextCommand(buf)
		if err != nil {
			return nil, -1, err
		}
		buf = rest
		r := routeOf(cmd, argc)
		switch r.kind {
		case keysMulti:
			inBlock, blockSlot = true, -1
		case keysClose:
			inBlock = false
		case keysAll:
			if r.other != nil {
				return nil, -1, crossSlotError(r.key, r.slot, r.other, r.otherSlot)
			}
		}
		if r.split {
			return nil, -1, nil
		}
		if r.slot < 0 {
			continue
		}
		if inBlock {
			if blockSlot >= 0 && blockSlot != r.slot {
				return nil, -1, crossSlotError(blockKey, blockSlot, r.key, r.slot)
			}
			blockSlot, blockKey = r.slot, r.key
		}
		n, err := cl.owner(ctx, r.slot)
		if err != nil {
			return nil, -1, err
		}
		if target == nil {
			target, slot = n, r.slot
		} else if target != n {
			return nil, -1, nil
		}
	}
	if target == nil {
		n, err := cl.anyMaster(ctx)
		return n, -1, err
	}
	return target, slot, nil
}

// execUnits runs p unit by unit (plan). seed holds the replies of a first
// try of all of p on one node, to be kept where they are not redirects.
func (cl *cluster) execUnits(ctx context.Context, p *Pipeline, n *Client, seed *Replies, deadline time.Time) (*Replies, error) {
	units, err := plan(p)
	if err != nil {
		seed.Release()
		return nil, err
	}
	var waitNeeded bool
	if seed != nil {
		for _, u := range units {
			if cl.take(u, seed.list[u.first:u.first+u.n], n.cfg.Addr) {
				waitNeeded = true
			}
		}
		seed.Release()
	}
	wait := clusterMinWait
	for {
		var pending []*unit
		for _, u := range units {
			if !u.done {
				pending = append(pending, u)
			}
		}
		if len(pending) == 0 {
			return cl.assemble(p, units)
		}
		if waitNeeded {
			if err := cl.pause(ctx, &wait, deadline); err != nil {
				return nil, err
			}
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			// Out of time: the last redirect replies are the answer
			// (IsRedirect tells the caller to try again).
			sent := false
			for _, u := range units {
				sent = sent || u.done
			}
			for _, u := range pending {
				if u.out == nil {
					return nil, &ConnError{Op: "send", Addr: cl.c.cfg.Addr, Sent: sent,
						Err: fmt.Errorf("slot %d: no node reachable: %w", u.slot, context.DeadlineExceeded)}
				}
				u.done = true
			}
			continue
		}
		waitNeeded, err = cl.round(ctx, pending, deadline)
		if err != nil {
			return nil, err
		}
	}
}

// round sends pending units, grouped by node and the groups concurrently,
// and takes their replies. It reports whether a unit must wait
// (TRYAGAIN, CLUSTERDOWN, unreachable node) before the next round.
func (cl *cluster) round(ctx context.Context, pending []*unit, deadline time.Time) (bool, error) {
	type group struct {
		node  *Client
		units []*unit
		rs    *Replies
		err   error
	}
	var groups []*group
	byNode := map[*Client]*group{}
	for _, u := range pending {
		var n *Client
		var err error
		switch {
		case u.ask != "":
			n, err = cl.node(u.ask)
		case u.slot >= 0:
			n, err = cl.owner(ctx, u.slot)
		default:
			n, err = cl.anyMaster(ctx)
		}
		if err != nil {
			return false, err
		}
		g := byNode[n]
		if g == nil {
			g = &group{node: n}
			byNode[n] = g
			groups = append(groups, g)
		}
		g.units = append(g.units, u)
	}
	send := func(g *group) {
		q := cl.c.pipes.Get().(*Pipeline)
		defer cl.c.putPipeline(q)
		for _, u := range g.units {
			if u.ask != "" {
				q.Cmd("ASKING")
			}
			q.buf = append(q.buf, u.raw...)
			q.n += u.cmds
		}
		g.rs, g.err = g.node.Exec(ctx, q)
	}
	if len(groups) == 1 {
		send(groups[0])
	} else {
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				send(g)
			}()
		}
		wg.Wait()
	}
	var fatal error
	wait := false
	for _, g := range groups {
		if g.err != nil {
			if fatal == nil && !cl.retryable(ctx, g.err, deadline) {
				fatal = nodeError(g.node, g.units[0].slot, g.err)
			}
			wait = true
			continue
		}
		i := 0
		for _, u := range g.units {
			if u.ask != "" {
				i++ // ASKING's +OK
			}
			if cl.take(u, g.rs.list[i:i+u.cmds], g.node.cfg.Addr) {
				wait = true
			}
			i += u.cmds
		}
		g.rs.Release()
	}
	return wait, fatal
}

// take records the replies of unit u: done, or to be sent again after a
// redirect (following MOVED and ASK; wait reports TRYAGAIN/CLUSTERDOWN).
func (cl *cluster) take(u *unit, list []Reply, from string) (wait bool) {
	u.out = u.out[:0]
	for _, r := range list {
		u.out = append(u.out, append([]byte(nil), r.Raw...))
	}
	u.ask = ""
	var rd redirect
	found := false
	for _, r := range list {
		if rd, found = redirectOf(r); found {
			break
		}
	}
	if !found {
		u.done = true
		return false
	}
	rd.addr = resolveAddr(rd.addr, from)
	switch rd.kind {
	case "MOVED":
		cl.moved.Add(1)
		cl.moveSlot(rd.slot, rd.addr)
	case "ASK":
		cl.ask.Add(1)
		u.ask = rd.addr
	case "TRYAGAIN":
		cl.tryAgain.Add(1)
		wait = true
	case "CLUSTERDOWN":
		cl.clusterDown.Add(1)
		cl.trigger()
		wait = true
	}
	if rd.kind == "MOVED" || rd.kind == "ASK" {
		u.hops++
		if u.hops > clusterMaxHops {
			// A map in flux for too long: the redirect is the answer.
			u.done = true
			cl.c.log.Warn("redis cluster redirects did not settle", "slot", rd.slot, "to", rd.addr)
		}
	}
	return wait
}

// assemble builds one Replies, in p's order, from the units' replies; the
// integer replies of a split command's parts are added up.
func (cl *cluster) assemble(p *Pipeline, units []*unit) (*Replies, error) {
	rs := cl.c.getReplies()
	for i := 0; i < len(units); i++ {
		u := units[i]
		if !u.part {
			for _, r := range u.out {
				rs.buf = append(rs.buf, r...)
			}
			continue
		}
		var sum int64
		var bad []byte
		for ; i < len(units) && units[i].part && units[i].first == u.first; i++ {
			r := units[i].out[0]
			_, v := redcon.ReadNextRESP(r)
			if v.Type != redcon.Integer {
				bad = r
				continue
			}
			n, err := strconv.ParseInt(string(v.Data), 10, 64)
			if err != nil {
				bad = r
				continue
			}
			sum += n
		}
		i--
		if bad != nil {
			rs.buf = append(rs.buf, bad...)
		} else {
			rs.buf = redcon.AppendInt(rs.buf, sum)
		}
	}
	if err := rs.index(); err != nil {
		rs.Release()
		return nil, fmt.Errorf("resp: cluster: reassembled replies: %w", err)
	}
	if len(rs.list) != p.n {
		rs.Release()
		return nil, fmt.Errorf("resp: cluster: %d replies for %d commands", len(rs.list), p.n)
	}
	return rs, nil
}

// index fills rs.list (and ends) from the whole replies copied into
// rs.buf.
func (rs *Replies) index() error {
	b := rs.buf
	off := 0
	for len(b) > 0 {
		n, v := redcon.ReadNextRESP(b)
		if n == 0 {
			return fmt.Errorf("they do not parse at byte %d", off)
		}
		rs.list = append(rs.list, Reply{v})
		off += n
		rs.ends = append(rs.ends, off)
		b = b[n:]
	}
	return nil
}

// eachRoute calls fn with each command of p and its route, until fn
// says stop or fails.
func eachRoute(p *Pipeline, fn func(cmd []byte, r route) (more bool, err error)) error {
	if err := p.Err(); err != nil {
		return err
	}
	buf := p.buf
	for i := 0; i < p.n; i++ {
		cmd, argc, rest, err := nextCommand(buf)
		if err != nil {
			return err
		}
		buf = rest
		if more, err := fn(cmd, routeOf(cmd, argc)); err != nil || !more {
			return err
		}
	}
	return nil
}

// bindConn chooses the node of a cluster Conn from the first pipeline it
// runs: the master of its first keyed command.
func (cl *cluster) bindConn(ctx context.Context, p *Pipeline) (*Client, error) {
	slot := -1
	err := eachRoute(p, func(_ []byte, r route) (bool, error) {
		slot = r.slot
		return slot < 0, nil
	})
	switch {
	case err != nil:
		return nil, err
	case slot >= 0:
		return cl.owner(ctx, slot)
	}
	return cl.anyMaster(ctx)
}

// checkConn refuses, before sending, a command of p whose slot another
// node serves than the one the Conn is bound to. The error wraps a MOVED
// *Error, so IsRedirect tells the caller to take a new Conn.
func (cl *cluster) checkConn(ctx context.Context, bound *Client, p *Pipeline) error {
	return eachRoute(p, func(_ []byte, r route) (bool, error) {
		if r.kind == keysAll && r.other != nil {
			return false, crossSlotError(r.key, r.slot, r.other, r.otherSlot)
		}
		if r.slot < 0 {
			return true, nil
		}
		n, err := cl.owner(ctx, r.slot)
		if err != nil {
			return false, err
		}
		if n != bound {
			return false, fmt.Errorf("resp: cluster Conn is bound to %s but key %q (slot %d) is served by %s: %w",
				bound.cfg.Addr, r.key, r.slot, n.cfg.Addr,
				&Error{Prefix: "MOVED", Msg: strconv.Itoa(r.slot) + " " + n.cfg.Addr})
		}
		return true, nil
	})
}

// noteRedirects makes the client learn from redirect replies a Conn got
// (returned to its caller as they are).
func (cl *cluster) noteRedirects(rs *Replies, from string) {
	for i := range rs.list {
		rd, ok := redirectOf(rs.list[i])
		if !ok {
			continue
		}
		rd.addr = resolveAddr(rd.addr, from)
		switch rd.kind {
		case "MOVED":
			cl.moved.Add(1)
			cl.moveSlot(rd.slot, rd.addr)
		case "ASK":
			cl.ask.Add(1)
			cl.trigger()
		case "TRYAGAIN":
			cl.tryAgain.Add(1)
			cl.trigger()
		case "CLUSTERDOWN":
			cl.clusterDown.Add(1)
			cl.trigger()
		}
	}
}

// resolveAddr completes a redirect's address: a node that does not know
// its own IP announces ":port", meaning the host of the node that replied.
func resolveAddr(addr, from string) string {
	if addr == "" || addr[0] != ':' {
		return addr
	}
	host, _, err := net.SplitHostPort(from)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, addr[1:])
}

// nodeError names the node and the slot a failed send was for; the
// ConnError inside still answers IsConnError and ErrUnknownOutcome.
func nodeError(n *Client, slot int, err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	if slot < 0 {
		return fmt.Errorf("resp: cluster node %s: %w", n.cfg.Addr, err)
	}
	return fmt.Errorf("resp: cluster node %s (slot %d): %w", n.cfg.Addr, slot, err)
}
