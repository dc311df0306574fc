package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/korvet/korvet/resp"
)

// The flush window: while a partition's round is in flight, the next one
// is planned on top of the state the first will leave and sent right
// behind it on the same connection, so that Redis runs one round while
// korvet encodes the next and reads the last one's replies, instead of
// waiting a round trip and a plan between rounds. At most two rounds are
// in flight. Each round's fence check (fenceScript) includes the offset
// it starts at, so a round behind one that did not run cannot run
// either: the log never has a gap, and the rounds behind a failure are
// re-run or failed in order.

// roundTimeout bounds one round's send and replies.
const roundTimeout = 30 * time.Second

// slot is one round of the window with its buffers.
type slot struct {
	fl flushRound
	tx txBuffers
}

// window holds the rounds in flight on one connection.
type window struct {
	cn    *resp.Conn
	sent  []*slot // sent, replies not read yet, oldest first
	slots [3]slot // two in flight and the one being planned
}

// free is a slot not in flight, for the next round.
func (w *window) free() *slot {
	for i := range w.slots {
		r := &w.slots[i]
		inFlight := false
		for _, s := range w.sent {
			inFlight = inFlight || s == r
		}
		if !inFlight {
			return r
		}
	}
	panic("engine: flush window has no free slot") // at most two are in flight
}

// last is the newest round in flight, nil when none is.
func (w *window) last() *slot {
	if len(w.sent) == 0 {
		return nil
	}
	return w.sent[len(w.sent)-1]
}

// drop closes the window's connection (its state is in doubt).
func (w *window) drop() {
	if w.cn != nil {
		w.cn.Close()
		w.cn = nil
	}
}

// close gives the connection back when no round is in flight.
func (w *window) close() {
	if w.cn != nil && len(w.sent) == 0 {
		w.cn.Release() // the last EXEC ended the MULTI and the WATCH
		w.cn = nil
	}
	w.drop()
}

// maxPooledRound is the largest round buffer an idle window keeps.
const maxPooledRound = 8 << 20

// putWindow keeps an idle window for the next flush loop, without the
// buffers of an exceptionally large round.
func (e *Engine) putWindow(w *window) {
	w.close()
	for i := range w.slots {
		if tx := &w.slots[i].tx; tx.pl.Cap() > maxPooledRound {
			*tx = txBuffers{}
		}
	}
	e.windows.Put(w)
}

// collectBehind takes appends for a round behind prev, which is in
// flight. ok is false when there are none, or when the next round must
// wait for prev's outcome: leadership or a resync is pending, or work
// other than appends (a roll, a trim, an archive mark, a local drop),
// which collect takes once the window is empty.
func (p *Partition) collectBehind(ctx context.Context, prev *flushRound) (fl flushRound, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil || p.leadEpoch != prev.epoch || p.handoff || p.needSync || len(p.queue) == 0 ||
		p.roll || p.trimTo > p.start.Load() || len(p.dropLocal) > 0 || len(p.archives) > 0 {
		return fl, false
	}
	fl = flushRound{take: p.takeQueueLocked(), epoch: prev.epoch, replicas: p.t.e.opts.WaitReplicas}
	st := &prev.st
	fl.st = flushState{
		base: st.next, bytes: st.bytes, maxTs: st.maxTs, segMin: st.segMin, segMax: st.segMax,
		segs: st.segs, trimTo: st.trimTo, producers: st.producers, txns: st.txns,
	}
	fl.saved = prev.saved || st.segsChanged
	return fl, true
}

// send sends round r behind the rounds in flight; with two in flight, it
// then waits for the older one.
func (p *Partition) send(ctx context.Context, w *window, r *slot) {
	sctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	var err error
	if w.cn == nil {
		w.cn, err = p.t.e.rc.Conn(sctx)
	}
	if err == nil {
		err = w.cn.Send(sctx, &r.tx.head, &r.tx.pl)
	}
	switch {
	case err == nil:
		w.sent = append(w.sent, r)
		if len(w.sent) > 1 {
			p.finishOldest(ctx, w)
		}
	case len(w.sent) > 0 && resp.IsConnError(err):
		// The connection failed under the rounds in flight.
		p.lostConn(ctx, w, append(w.sent, r), fmt.Errorf("append to %s: %w", p.metaKey, err))
	default:
		// Not sent (no connection, or a cluster Conn whose node no longer
		// serves the slot): the rounds in flight settle, then r goes
		// alone, as it would have without a window.
		for len(w.sent) > 0 {
			p.finishOldest(ctx, w)
		}
		w.drop()
		p.runAlone(ctx, r)
	}
}

// finishOldest reads the oldest round's replies and settles it, and when
// it did not go in, settles the rounds behind it too.
func (p *Partition) finishOldest(ctx context.Context, w *window) {
	rctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	r := w.sent[0]
	err := p.receiveRound(rctx, w.cn, &r.fl)
	if err != nil && resp.IsConnError(err) {
		p.lostConn(ctx, w, w.sent, err)
		return
	}
	w.sent = w.sent[1:]
	if err == nil || errors.Is(err, ErrNotEnoughReplicas) {
		p.complete(r, p.settle(&r.fl, err))
		if len(w.sent) == 0 {
			w.close()
		}
		return
	}
	// r did not go in, so neither did the rounds behind it (their checks
	// find the counter short): read their replies, then run r again if
	// it may run now (a redirect, an aborted EXEC) and them after it.
	behind := w.sent
	w.sent = nil
	for _, b := range behind {
		if berr := p.receiveRound(rctx, w.cn, &b.fl); berr != nil && resp.IsConnError(berr) {
			break // the connection goes; nothing of them ran either way
		}
	}
	w.drop()
	err = p.retryChecked(ctx, &r.tx, &r.fl, err)
	if err != nil && resp.IsConnError(err) {
		err = p.unclear(ctx, []*flushRound{&r.fl}, err)[0]
	} else {
		err = p.settle(&r.fl, err)
	}
	p.complete(r, err)
	for _, b := range behind {
		p.runAlone(ctx, b)
	}
}

// runAlone commits a round on its own once the rounds before it have
// settled; if they did not all go in, it fails: it was planned on top of
// them.
func (p *Partition) runAlone(ctx context.Context, r *slot) {
	p.mu.Lock()
	ok := !p.needSync && p.leadEpoch == r.fl.epoch && p.next == r.fl.st.base
	p.mu.Unlock()
	if !ok {
		p.failBehind(r)
		return
	}
	p.complete(r, p.commitRound(ctx, &r.tx, &r.fl))
}

// lostConn settles the rounds in flight on a connection that failed
// (err): the counter in Redis tells which ran.
func (p *Partition) lostConn(ctx context.Context, w *window, rounds []*slot, err error) {
	w.sent = nil
	w.drop()
	fls := make([]*flushRound, len(rounds))
	for i, r := range rounds {
		fls[i] = &r.fl
	}
	errs := p.unclear(ctx, fls, err)
	for i, r := range rounds {
		p.complete(r, errs[i])
	}
}

// failBehind fails a round planned on top of one that did not go in.
func (p *Partition) failBehind(r *slot) {
	p.mu.Lock()
	p.needSync = true
	if r.fl.st.roll {
		p.roll = true
	}
	err := fmt.Errorf("%w: %s/%d: the append before this one in flight did not go in", ErrStorageUnavailable, p.t.name, p.id)
	if p.leadEpoch != r.fl.epoch {
		err = p.notLeader()
	}
	p.mu.Unlock()
	p.complete(r, err)
}

// complete hands a settled round to the key index and its appends.
func (p *Partition) complete(r *slot, err error) {
	fl := &r.fl
	if err == nil {
		p.index(fl.committed, fl.st.next)
	}
	fl.acknowledge(err)
	if err == nil && fl.st.next > fl.st.base {
		p.notify()
	}
	*fl = flushRound{}
}
