package resp

import (
	"context"
	"fmt"
	"strconv"
)

// While a slot migrates, its keys move one MIGRATE at a time from the
// node serving it to the node importing it; the first node answers ASK
// for keys it no longer has. A Conn whose first call is answered ASK in
// full (so nothing of it ran) follows: it moves to the importing node and
// from then on sends ASKING before each command outside a MULTI and
// before the MULTI itself (the flag lasts until its EXEC). Redis still
// answers TRYAGAIN to a transaction whose keys are split between the two
// nodes, which the caller waits out, so a transaction never creates on
// the importing node a key the other still holds.

// allAsk reports whether every reply of rs is an ASK for one slot to one
// node.
func allAsk(rs *Replies, from string) (slot int, addr string, ok bool) {
	if rs.Len() == 0 {
		return 0, "", false
	}
	for i := range rs.list {
		rd, isRd := redirectOf(rs.list[i])
		if !isRd || rd.kind != "ASK" {
			return 0, "", false
		}
		rd.addr = resolveAddr(rd.addr, from)
		if i > 0 && (rd.slot != slot || rd.addr != addr) {
			return 0, "", false
		}
		slot, addr = rd.slot, rd.addr
	}
	return slot, addr, true
}

// followAsk moves the Conn to the node importing slot and runs p there.
func (pc *Conn) followAsk(ctx context.Context, p *Pipeline, slot int, addr string) (*Replies, error) {
	n, err := pc.cl.node(addr)
	if err != nil {
		return nil, err
	}
	cn, err := n.get(ctx)
	if err != nil {
		return nil, err
	}
	// Nothing ran on the old connection (every command was redirected),
	// so it goes back to its pool as it is.
	pc.c.put(pc.cn)
	pc.c, pc.cn, pc.askSlot = n, cn, slot
	if err := checkAskSlot(p, slot); err != nil {
		return nil, err
	}
	return pc.execAsking(ctx, p)
}

// checkAskSlot refuses, before sending, a key of p outside slot: ASKING
// only opens the slot being imported.
func checkAskSlot(p *Pipeline, slot int) error {
	return eachRoute(p, func(_ []byte, r route) (bool, error) {
		if r.slot >= 0 && r.slot != slot {
			return false, fmt.Errorf("resp: cluster Conn follows the migration of slot %d, but key %q is in slot %d: %w",
				slot, r.key, r.slot, &Error{Prefix: "TRYAGAIN", Msg: "slot " + strconv.Itoa(slot) + " is migrating"})
		}
		return true, nil
	})
}

// execAsking runs p with ASKING before each command outside a MULTI and
// returns p's replies without ASKING's.
func (pc *Conn) execAsking(ctx context.Context, p *Pipeline) (*Replies, error) {
	q := pc.c.pipes.Get().(*Pipeline)
	defer pc.c.putPipeline(q)
	asked := make([]bool, 0, 2*p.n) // per command of q: an ASKING of ours
	inMulti := false
	err := eachRoute(p, func(cmd []byte, r route) (bool, error) {
		if !inMulti {
			q.Cmd("ASKING")
			asked = append(asked, true)
		}
		q.buf = append(q.buf, cmd...)
		q.n++
		asked = append(asked, false)
		switch r.kind {
		case keysMulti:
			inMulti = true
		case keysClose:
			inMulti = false
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	rs, err := pc.c.exec(ctx, pc.cn, q)
	if err != nil {
		return nil, err
	}
	defer rs.Release()
	pc.cl.noteRedirects(rs, pc.c.cfg.Addr)
	out := pc.c.getReplies()
	for i := range rs.list {
		if asked[i] {
			if err := rs.list[i].Err(); err != nil {
				out.Release()
				return nil, fmt.Errorf("resp: ASKING on %s: %w", pc.c.cfg.Addr, err)
			}
			continue
		}
		out.buf = append(out.buf, rs.list[i].Raw...)
	}
	if err := out.index(); err != nil {
		out.Release()
		return nil, fmt.Errorf("resp: replies after ASKING: %w", err)
	}
	return out, nil
}
