package resp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// Batcher coalesces the commands of concurrent callers into shared round
// trips (auto-pipelining): while its round trips are on the wire (at most
// lanes at a time), the pipelines that arrive queue up, and the first of
// them sends them all in the next one: one write and one read for the
// lot, for korvet and for Redis, instead of a pair each. A caller that
// finds a lane free sends its own pipeline at once, on its own context,
// as Client.Exec would; a caller that queued waits at most for a round
// trip to end first.
//
// It is for independent commands only, such as reads: replies are handed
// back per caller, a connection failure fails every pipeline of the
// round trip, and nothing holds a connection between calls, so a pipeline
// must not use MULTI, EXEC, WATCH or blocking commands (take a Conn for
// those). Safe for concurrent use; the zero value is not usable (see
// NewBatcher).
type Batcher struct {
	c     *Client
	lanes int
	calls sync.Pool // *batchCall

	mu      sync.Mutex
	flying  int          // round trips on the wire
	queue   []*batchCall // waiting for the next round trip, in order
	carried int          // queued calls in round trips on the wire (tests)

	roundTrips, pipelines atomic.Int64
}

// BatchStats count a Batcher's work since it was made.
type BatchStats struct {
	RoundTrips int64 // round trips sent
	Pipelines  int64 // callers' pipelines they carried
}

// Stats returns the Batcher's counts: Pipelines / RoundTrips is the
// average number of callers that shared a round trip.
func (b *Batcher) Stats() BatchStats {
	return BatchStats{RoundTrips: b.roundTrips.Load(), Pipelines: b.pipelines.Load()}
}

// A batchCall is one queued Exec. It holds a copy of the caller's
// commands, so that a caller that gave up may reuse its Pipeline while
// they are still being sent.
type batchCall struct {
	cmds     []byte
	n        int
	ctx      context.Context // for a round trip of this call alone
	deadline time.Time       // ctx's, or zero
	wake     chan struct{}   // 1-buffered: the state changed to lead or done
	state    callState       // guarded by Batcher.mu
	rs       *Replies
	err      error

	// A leader's: the calls of its round trip (itself first) and their
	// commands.
	batch []*batchCall
	pl    Pipeline
}

type callState uint8

const (
	callQueued    callState = iota // in Batcher.queue
	callInFlight                   // in the round trip of another caller
	callLead                       // to send the round trip of its batch
	callDone                       // rs or err is its answer
	callAbandoned                  // in flight, its caller gave up
)

// NewBatcher returns a Batcher that sends its round trips through c, at
// most lanes (at least 1) at a time. One lane coalesces the most: the
// fewest syscalls per command, on both sides; more lanes let a round trip
// start while another is on the wire (and a large reply hold up fewer
// callers), in smaller batches.
func NewBatcher(c *Client, lanes int) *Batcher {
	b := &Batcher{c: c, lanes: max(lanes, 1)}
	b.calls.New = func() any { return &batchCall{wake: make(chan struct{}, 1)} }
	return b
}

// Exec is Client.Exec of p, sent with the pipelines of concurrent callers
// when the Batcher's lanes are all on the wire. The Replies hold p's
// replies only; the caller must Release them. ctx bounds the wait and,
// for a round trip of several callers, the latest of their deadlines
// bounds its I/O (each caller's cancellation only ends its own wait).
func (b *Batcher) Exec(ctx context.Context, p *Pipeline) (*Replies, error) {
	if err := p.Err(); err != nil {
		return nil, err
	}
	if p.n == 0 {
		return b.c.getReplies(), nil
	}
	b.mu.Lock()
	if b.flying < b.lanes {
		b.flying++
		b.mu.Unlock()
		b.roundTrips.Add(1)
		b.pipelines.Add(1)
		rs, err := b.c.Exec(ctx, p)
		b.mu.Lock()
		next := b.takeQueue()
		b.mu.Unlock()
		if next != nil {
			next.wake <- struct{}{}
		}
		return rs, err
	}
	call := b.calls.Get().(*batchCall)
	call.cmds, call.n = append(call.cmds[:0], p.buf...), p.n
	call.ctx, call.state = ctx, callQueued
	call.deadline, _ = ctx.Deadline()
	b.queue = append(b.queue, call)
	b.mu.Unlock()

	select {
	case <-call.wake:
	case <-ctx.Done():
		b.mu.Lock()
		switch call.state {
		case callQueued:
			b.dequeue(call)
			b.mu.Unlock()
			b.putCall(call)
			return nil, &ConnError{Op: "send", Addr: b.c.cfg.Addr, Err: ctx.Err()}
		case callInFlight:
			// The round trip's leader releases the answer.
			call.state = callAbandoned
			b.mu.Unlock()
			return nil, &ConnError{Op: "read", Addr: b.c.cfg.Addr, Sent: true, Err: ctx.Err()}
		}
		// Lead or done: the wake-up is on its way.
		b.mu.Unlock()
		<-call.wake
	}
	if call.state == callLead {
		return b.lead(call)
	}
	rs, err := call.rs, call.err
	b.putCall(call)
	return rs, err
}

func (b *Batcher) putCall(call *batchCall) {
	cmds, batch, pl := call.cmds[:0], call.batch[:0], call.pl
	if cap(cmds) > 64<<10 {
		cmds = nil
	}
	if cap(pl.buf) > maxPooledBuf {
		pl.buf = nil
	}
	pl.Reset()
	*call = batchCall{cmds: cmds, wake: call.wake, batch: batch, pl: pl}
	b.calls.Put(call)
}

// dequeue removes a queued call; b.mu must be held.
func (b *Batcher) dequeue(call *batchCall) {
	for i, c := range b.queue {
		if c == call {
			copy(b.queue[i:], b.queue[i+1:])
			b.queue[len(b.queue)-1] = nil
			b.queue = b.queue[:len(b.queue)-1]
			return
		}
	}
}

// takeQueue is called by a round trip's end, whose lane it passes to the
// queue: the first queued call is marked to lead the round trip of the
// whole queue (its batch) and returned, for the caller to wake. With
// nothing queued the lane is freed and takeQueue returns nil. b.mu must
// be held.
func (b *Batcher) takeQueue() *batchCall {
	if len(b.queue) == 0 {
		b.flying--
		return nil
	}
	lead := b.queue[0]
	lead.batch = append(lead.batch[:0], b.queue...)
	clear(b.queue)
	b.queue = b.queue[:0]
	for _, c := range lead.batch {
		c.state = callInFlight
	}
	lead.state = callLead
	b.carried += len(lead.batch)
	return lead
}

// lead sends the round trip of me.batch (me first), hands each call its
// replies and the lane to the next batch, and returns me's replies.
func (b *Batcher) lead(me *batchCall) (*Replies, error) {
	batch := me.batch
	b.roundTrips.Add(1)
	b.pipelines.Add(int64(len(batch)))
	pl := &me.pl
	pl.Reset()
	deadline := time.Time{}
	for _, c := range batch {
		pl.buf = append(pl.buf, c.cmds...)
		pl.n += c.n
		dl := c.deadline
		if dl.IsZero() {
			dl = time.Now().Add(b.c.opts.Timeout)
		}
		if dl.After(deadline) {
			deadline = dl
		}
	}
	if len(batch) == 1 {
		me.rs, me.err = b.c.Exec(me.ctx, pl)
	} else {
		// The round trip is everyone's: no one caller's cancellation
		// ends it, the latest deadline does.
		ctx, cancel := context.WithDeadline(context.WithoutCancel(me.ctx), deadline)
		all, err := b.c.Exec(ctx, pl)
		cancel()
		at := 0
		for _, c := range batch {
			c.rs, c.err = nil, err
			if err == nil {
				c.rs, c.err = b.split(all, at, c.n)
			}
			at += c.n
		}
		all.Release()
	}
	rs, err := me.rs, me.err

	// The others' wake-ups go after the next leader's, whose round trip
	// then starts at once.
	var local [16]*batchCall
	wake := local[:0]
	b.mu.Lock()
	b.carried -= len(batch)
	for _, c := range batch[1:] {
		if c.state == callAbandoned {
			c.rs.Release()
			b.putCall(c)
			continue
		}
		c.state = callDone
		wake = append(wake, c)
	}
	clear(batch)
	next := b.takeQueue()
	b.mu.Unlock()
	if next != nil {
		next.wake <- struct{}{}
	}
	for _, c := range wake {
		c.wake <- struct{}{}
	}
	b.putCall(me)
	return rs, err
}

// split copies n replies of all, from the at-th on, into Replies of their
// own.
func (b *Batcher) split(all *Replies, at, n int) (*Replies, error) {
	start := 0
	if at > 0 {
		start = all.ends[at-1]
	}
	end := all.ends[at+n-1]
	rs := b.c.getReplies()
	rs.buf = append(rs.buf, all.buf[start:end]...)
	if cap(rs.list) < n {
		rs.list = make([]Reply, 0, n)
	}
	from := 0
	for i := at; i < at+n; i++ {
		to := all.ends[i] - start
		frame := rs.buf[from:to:to]
		var m int
		var r redcon.RESP
		if frame[0] == '*' {
			m, r = shallowArray(frame)
		} else {
			m, r = redcon.ReadNextRESP(frame)
		}
		if m != len(frame) {
			rs.Release()
			return nil, fmt.Errorf("resp: batch: %w at %q", errDisagree, frame[:min(len(frame), 64)])
		}
		rs.list = append(rs.list, Reply{r})
		rs.ends = append(rs.ends, to)
		from = to
	}
	return rs, nil
}
