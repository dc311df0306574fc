package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/korvet/korvet/resp"
)

// Several brokers on one Redis: each group has one coordinator, picked by
// Options.Owns. A coordinator holds in memory only the groups it owns.
// When the live brokers change it drops the groups it no longer owns
// (DropUnowned) without writing anything for them: their new owner
// carries on from what is in Redis, restoring a group the first time a
// request for it arrives (find). Restoring on first use rather than at
// the change keeps the old owner's last writes: by the time a member has
// been sent here, the old owner has stopped answering for the group.

// quickTimeout bounds the Redis reads of a restore made for a call that
// carries no context of its own.
const quickTimeout = 2 * time.Second

func quickContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), quickTimeout)
}

func (c *Coordinator) owns(name string) bool {
	return c.opts.Owns == nil || c.opts.Owns(name)
}

func notOwned(name string) error {
	return fmt.Errorf("%w: group %q is coordinated by another broker", ErrNotCoordinator, name)
}

// find returns the named group, restoring it from Redis if this broker
// holds it not yet; nil (and no error) when there is no such group.
// ErrNotCoordinator when another broker owns it.
func (c *Coordinator) find(ctx context.Context, name string) (*group, error) {
	return c.get(ctx, name, false)
}

// findOrCreate is find that creates an empty group when there is none.
func (c *Coordinator) findOrCreate(ctx context.Context, name string) (*group, error) {
	return c.get(ctx, name, true)
}

func (c *Coordinator) get(ctx context.Context, name string, create bool) (*group, error) {
	if !c.owns(name) {
		c.drop(name)
		return nil, notOwned(name)
	}
	c.mu.Lock()
	g, closed := c.groups[name], c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrNotCoordinator
	}
	if g != nil {
		return g, nil
	}
	fresh, found, err := c.restoreGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	if !found && !create {
		return nil, nil
	}
	c.mu.Lock()
	g, closed = c.groups[name], c.closed
	if g == nil && !closed {
		c.groups[name] = fresh
	}
	c.mu.Unlock()
	if g != nil || closed {
		// Another call restored it first (or we are closing): this copy
		// goes, with the timer its restore may have set.
		fresh.mu.Lock()
		fresh.gone = true
		fresh.shutdown()
		fresh.mu.Unlock()
		if closed {
			return nil, ErrNotCoordinator
		}
		return g, nil
	}
	return fresh, nil
}

// restoreGroup reads one group from Redis: its registry entry, classic
// membership and consumer group state (offsets load on first use, as
// always). found is false when the registry has no such group; the group
// returned is then new and empty.
func (c *Coordinator) restoreGroup(ctx context.Context, name string) (g *group, found bool, err error) {
	var pl resp.Pipeline
	c.restoreCmds(&pl, name)
	rs, err := c.rc.Exec(ctx, &pl)
	if err != nil {
		return nil, false, fmt.Errorf("%w: restore group %q: %v", ErrCoordinatorNotAvailable, name, err)
	}
	defer rs.Release()
	g, found, err = c.rebuild(name, rs.At(0), rs.At(1), rs.At(2), time.Now())
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	}
	if found {
		c.log.Info("group restored from Redis", "group", name, "generation", g.generation)
	}
	return g, found, nil
}

// restoreCmds adds the reads rebuild takes, in its order, to pl.
func (c *Coordinator) restoreCmds(pl *resp.Pipeline, name string) {
	pl.Cmd("HGET", c.k.Groups(), name)
	pl.Cmd("GET", c.k.GroupState(name))
	pl.Cmd("GET", c.k.ConsumerGroupState(name))
}

// rebuild makes a group from the replies of restoreCmds. Members get a
// full session from now to show up at this coordinator. found is false
// when the registry has no such group (the group is then new and empty);
// a state that does not decode is logged and left out (its members
// rejoin).
func (c *Coordinator) rebuild(name string, reg, state, consumer resp.Reply, now time.Time) (g *group, found bool, err error) {
	for _, r := range []resp.Reply{reg, state, consumer} {
		if err := r.Err(); err != nil {
			return nil, false, fmt.Errorf("restore group %q: %w", name, err)
		}
	}
	g = c.newGroup(name)
	if reg.IsNil() {
		return g, false, nil
	}
	g.protocolType = string(reg.Bytes())
	g.stored = true
	g.mu.Lock()
	defer g.mu.Unlock()
	if !state.IsNil() {
		var sg storedGroup
		if err := json.Unmarshal(state.Bytes(), &sg); err != nil {
			c.log.Warn("ignoring bad group state; its members will rejoin", "group", name, "key", c.k.GroupState(name), "err", err)
		} else {
			g.restore(sg, now)
		}
	}
	if !consumer.IsNil() {
		var sg storedConsumerGroup
		err := json.Unmarshal(consumer.Bytes(), &sg)
		if err == nil {
			err = g.restoreConsumer(sg, now)
		}
		if err != nil {
			c.log.Warn("ignoring bad consumer group state; its members will rejoin", "group", name, "key", c.k.ConsumerGroupState(name), "err", err)
			g.cg = nil
		}
	}
	return g, true, nil
}

// registered reports whether the group registry in Redis has name: how a
// broker that does not coordinate a group learns that its id is taken.
func (c *Coordinator) registered(name string) bool {
	ctx, cancel := quickContext()
	defer cancel()
	r, err := c.rc.Do(ctx, "HEXISTS", c.k.Groups(), name)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		c.log.Warn("could not check the group registry", "group", name, "err", err)
		return false
	}
	n, _ := r.Int()
	return n == 1
}

// held returns the named group if this broker holds it in memory.
func (c *Coordinator) held(name string) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[name]
}

// OwnershipChanged is for when the set of live brokers changes: it drops
// the groups this broker no longer owns (DropUnowned) and notes whether
// it now owns groups it does not hold yet (restored on first use),
// which cheap existence checks must then look up in Redis.
func (c *Coordinator) OwnershipChanged(ctx context.Context) int {
	n := c.DropUnowned()
	if c.opts.Owns == nil {
		return n
	}
	r, err := c.rc.Do(ctx, "HKEYS", c.k.Groups())
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		c.complete.Store(false)
		if !errors.Is(err, context.Canceled) { // not the broker shutting down
			c.log.Warn("could not read the group registry", "key", c.k.Groups(), "err", err)
		}
		return n
	}
	complete := true
	r.ForEach(func(e resp.Reply) bool {
		name := string(e.Bytes())
		if c.owns(name) && c.held(name) == nil {
			complete = false
		}
		return complete
	})
	c.complete.Store(complete)
	return n
}

// DropUnowned lets go of every group this broker no longer owns: call it
// when the set of live brokers changes. It returns how many it dropped.
func (c *Coordinator) DropUnowned() int {
	if c.opts.Owns == nil {
		return 0
	}
	n := 0
	for _, g := range c.all() {
		if !c.owns(g.name) && c.drop(g.name) {
			n++
		}
	}
	return n
}

// drop forgets the named group without writing anything: its timers stop,
// parked JoinGroup and SyncGroup calls get ErrNotCoordinator, and calls
// holding it see it gone. It waits for a commit under way, so that none
// lands after drop returns.
func (c *Coordinator) drop(name string) bool {
	c.mu.Lock()
	g := c.groups[name]
	delete(c.groups, name)
	c.mu.Unlock()
	if g == nil {
		return false
	}
	g.commitMu.Lock()
	g.mu.Lock()
	g.gone = true
	g.state = Dead
	g.shutdown()
	g.mu.Unlock()
	g.commitMu.Unlock()
	c.log.Info("group handed over to its new coordinator", "group", name)
	return true
}
