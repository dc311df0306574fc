package group

import (
	"context"
	"fmt"
	"time"

	"github.com/korvet/korvet/resp"
)

// The periodic cleanup of emptied groups. Kafka keeps a group whose
// members have all left, in state Empty (listed, describable, deletable),
// until its cleanup (GroupCoordinatorShard.cleanupGroupMetadata, every
// offsets.retention.check.interval.ms, 10 minutes by default) finds it
// Empty with no committed offsets left and deletes it. korvet does the
// same on the same default interval. Kafka also expires the commits of
// an Empty group after offsets.retention.minutes; korvet keeps commits
// until the group or its offsets are deleted, so a group with commits
// stays.

// DefaultCleanupInterval is Kafka's offsets.retention.check.interval.ms.
const DefaultCleanupInterval = 10 * time.Minute

// cleanupTimeout bounds one cleanup pass's Redis work.
const cleanupTimeout = time.Minute

func (c *Coordinator) cleanupLoop() {
	defer close(c.done)
	tick := time.NewTicker(c.opts.CleanupInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		if n, err := c.Cleanup(ctx); err != nil {
			c.log.Warn("group cleanup", "removed", n, "err", err)
		}
		cancel()
	}
}

// Cleanup removes every group that is Empty (no members, no join under
// way) and has no committed offsets (nor any pending in a transaction),
// from memory and Redis, and returns how many it removed. It runs every
// CleanupInterval; it is exported for tests and tools. A group it could
// not check or remove is left for the next pass, and the first such error
// is returned.
func (c *Coordinator) Cleanup(ctx context.Context) (int, error) {
	n := 0
	var first error
	c.OwnershipChanged(ctx)
	for _, g := range c.all() {
		g.mu.Lock()
		idle := g.idle()
		g.mu.Unlock()
		if !idle {
			continue
		}
		removed, err := c.removeIfIdle(ctx, g)
		if err != nil && first == nil {
			first = err
		}
		if removed {
			n++
		}
	}
	return n, first
}

// idle: Empty with nothing pending and no commits known, transactional
// ones included (Kafka keeps a group with open transactions); under g.mu.
func (g *group) idle() bool {
	return g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && len(g.txn) == 0
}

// removeIfIdle removes g if, with its commits loaded, it is still idle.
// It holds commitMu throughout, so no commit lands in between.
func (c *Coordinator) removeIfIdle(ctx context.Context, g *group) (bool, error) {
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	if err := g.loadLocked(ctx); err != nil {
		return false, err
	}
	g.mu.Lock()
	if g.gone || !g.idle() {
		g.mu.Unlock()
		return false, nil
	}
	// Dead from here: a join racing the removal is told to retry and
	// finds a fresh group once this one is forgotten.
	g.state = Dead
	if g.timer != nil {
		g.timer.Stop()
	}
	stored, generation := g.stored, g.generation
	g.mu.Unlock()
	if stored {
		var pl resp.Pipeline
		pl.Cmd("MULTI")
		pl.Cmd("UNLINK", c.k.GroupState(g.name), c.k.ConsumerGroupState(g.name))
		pl.Cmd("HDEL", c.k.Groups(), g.name)
		pl.Cmd("EXEC")
		if err := c.execTx(ctx, &pl); err != nil {
			g.mu.Lock()
			g.state = Empty
			g.mu.Unlock()
			return false, fmt.Errorf("remove empty group %q: %w", g.name, err)
		}
	}
	c.forget(g)
	c.log.Info("empty group removed", "group", g.name, "generation", generation)
	return true, nil
}
