package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/korvet/korvet/engine/index"
)

// countCall is one count of a topic's keys, shared by every caller that
// asks while it runs.
type countCall struct {
	done    chan struct{} // closed when err is set
	err     error
	waiters int // callers waiting, under kvTopic.countMu
}

// count refreshes a topic's key counts. One scan runs at a time per topic
// (?count=exact from many HTTP clients must not mean many scans):
// callers that come while it runs wait for it and share its outcome. The
// scan runs on its own, bounded by CountTimeout and stopped by Close, so a
// caller whose ctx ends stops waiting without cancelling it for others.
func (kv *kvIndex) count(ctx context.Context, kt *kvTopic) error {
	kt.countMu.Lock()
	c := kt.counting
	if c == nil {
		c = &countCall{done: make(chan struct{})}
		kt.counting = c
		kv.e.wg.Add(1)
		go kv.runCount(kt, c)
	}
	c.waiters++
	kt.countMu.Unlock()
	defer func() {
		kt.countMu.Lock()
		c.waiters--
		kt.countMu.Unlock()
	}()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("count keys of %s: %w", kt.t.name, ctx.Err())
	}
}

func (kv *kvIndex) runCount(kt *kvTopic, c *countCall) {
	defer kv.e.wg.Done()
	ctx, cancel := context.WithTimeout(kv.e.bg, kv.opts.CountTimeout)
	defer cancel()
	err := kv.scanCount(ctx, kt)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: counting the keys of %s took longer than %v", ErrKVUnavailable, kt.t.name, kv.opts.CountTimeout)
	}
	kt.countMu.Lock()
	kt.counting = nil
	c.err = err
	kt.countMu.Unlock()
	close(c.done)
}

// scanCount counts a topic's keys now.
func (kv *kvIndex) scanCount(ctx context.Context, kt *kvTopic) error {
	kt.dirty.Store(false)
	if hook := kv.countHook.Load(); hook != nil {
		(*hook)(ctx, kt.t.name)
	}
	var live, tombs int64
	err := kv.use(func(ix *index.Index) (err error) {
		live, tombs, err = ix.Count(ctx, kt.t.id)
		return err
	})
	if err == nil {
		err = ctx.Err() // Scan looks at ctx only every 4096 keys
	}
	if err != nil {
		kt.dirty.Store(true)
		return err
	}
	kt.keys.Store(live)
	kt.tombs.Store(tombs)
	kt.countedAt.Store(time.Now().UnixMilli())
	return nil
}
