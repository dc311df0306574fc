package kafkawire

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

// Fetch read-ahead. A consumer sends its next fetch of a partition only
// once it has taken the last answer, so Redis, korvet and the consumer
// would work one after the other. When a fetch's read of a partition stops
// at its limits with more records to come, korvet starts reading the next
// records at once, as the consumer's next fetch of that partition on this
// connection will ask (same limits, the whole-batch rule of a first
// partition, same isolation), and that fetch takes them (engine.ReadAhead
// says when they are still the answer). One read-ahead per partition and
// connection, counted against the connection's byte budget (see
// Options.MaxInFlightBytes) and only started when it and the next fetch's
// reservation fit in it; requests that need the budget drop them, as does
// a fetch that asks for something else, Options.FetchReadAheadIdle
// without one, and the connection's end.

// fetchAhead is a connection's read-ahead of one partition.
type fetchAhead struct {
	a        *engine.ReadAhead
	reserved int64
	idle     *time.Timer
}

// aheads holds a connection's read-aheads.
type aheads struct {
	mu     sync.Mutex
	m      map[*engine.Partition]*fetchAhead
	closed bool // the connection ended: no more
}

// takeAhead returns what the read-ahead of p gives a read of these
// arguments, nil when there is none or it does not answer it.
func (c *conn) takeAhead(ctx context.Context, p *engine.Partition, offset int64, maxBytes, wholeMax int, below int64) *engine.ReadResult {
	fa := c.unlinkAhead(p, nil)
	if fa == nil {
		return nil
	}
	res, ok := fa.a.Take(ctx, offset, maxBytes, wholeMax, below)
	c.s.opts.Metrics.readAhead(ok)
	if !ok {
		return nil
	}
	return res
}

// unlinkAhead takes p's read-ahead (only if it is fa, when fa is set) off
// the connection and gives its reservation back.
func (c *conn) unlinkAhead(p *engine.Partition, fa *fetchAhead) *fetchAhead {
	c.ahead.mu.Lock()
	cur := c.ahead.m[p]
	if cur == nil || fa != nil && cur != fa {
		c.ahead.mu.Unlock()
		return nil
	}
	delete(c.ahead.m, p)
	c.ahead.mu.Unlock()
	cur.idle.Stop()
	c.budget.release(cur.reserved)
	return cur
}

// startAhead starts reading what the next fetch of p under req's limits
// will ask for, from offset next, after a read of p of about held bytes
// (limit: the partition's limit in req). It is a whole-batch read (KIP-74:
// as for the first partition of a fetch with records), which also answers
// a plain read when it stays within limit.
func (c *conn) startAhead(ctx context.Context, req *kmsg.FetchRequest, p *engine.Partition, next int64, limit, held int) {
	if c.s.opts.NoFetchReadAhead {
		return
	}
	end, below := p.HighWatermark(), int64(-1)
	if req.IsolationLevel == 1 {
		below = p.LastStable()
		end = min(end, below)
	}
	n := int64(held)
	if next >= end || n+responseLimit(req) > c.budget.max {
		return // nothing to read, or the next fetch could not run beside it
	}
	c.ahead.mu.Lock()
	defer c.ahead.mu.Unlock()
	if c.ahead.closed || c.ahead.m[p] != nil || !c.budget.trySpare(n) {
		return
	}
	whole := int(min(p.Topic().MaxMessageBytes(), maxFetchResponseBytes))
	fa := &fetchAhead{a: p.StartReadAhead(ctx, next, limit, whole, below), reserved: n}
	fa.idle = time.AfterFunc(c.s.opts.FetchReadAheadIdle, func() { c.dropAhead(p, fa) })
	if c.ahead.m == nil {
		c.ahead.m = make(map[*engine.Partition]*fetchAhead)
	}
	c.ahead.m[p] = fa
}

// dropAhead discards p's read-ahead if it is still fa.
func (c *conn) dropAhead(p *engine.Partition, fa *fetchAhead) {
	if c.unlinkAhead(p, fa) != nil {
		fa.a.Discard()
		c.s.opts.Metrics.readAhead(false)
	}
}

// dropAheads discards every read-ahead of the connection; with closing,
// none starts after.
func (c *conn) dropAheads(closing bool) {
	c.ahead.mu.Lock()
	m := c.ahead.m
	c.ahead.m = nil
	c.ahead.closed = c.ahead.closed || closing
	c.ahead.mu.Unlock()
	for _, fa := range m {
		fa.idle.Stop()
		fa.a.Discard()
		c.budget.release(fa.reserved)
		c.s.opts.Metrics.readAhead(false)
	}
}

// reserve takes n bytes of the connection's budget for a request; read-
// aheads give theirs up when it would wait.
func (c *conn) reserve(ctx context.Context, n int64) bool {
	return c.budget.acquire(ctx, n, func() { c.dropAheads(false) })
}
