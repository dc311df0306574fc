package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// Shared metadata across brokers on one Redis. Every change to topics
// (created, deleted, grown, configs), share groups and group configs made
// on one broker is written to Redis and announced on the event stream;
// every broker, the writer included, rereads what the event names. The
// reloads are idempotent: an event seen twice, or a resync after missed
// events, costs a reread, never a wrong state. ACLs and users reload in
// engine/auth, on the same bus.

// reloadTimeout bounds the Redis reads of one reload run by an event.
const reloadTimeout = 5 * time.Second

// OwnsGroup reports whether this broker coordinates the group (consumer,
// classic or share) now.
func (e *Engine) OwnsGroup(name string) bool { return e.Coordinator(name) == e.NodeID() }

// subscribeShared makes the engine follow the other brokers' changes.
func (e *Engine) subscribeShared() {
	e.events.Subscribe(events.Topic, func(ev events.Event) {
		ctx, cancel := context.WithTimeout(e.bg, reloadTimeout)
		defer cancel()
		if err := e.ReloadTopic(ctx, ev.Get("topic")); err != nil {
			e.log.Warn("could not reload a topic changed on another broker; retrying at the next change or resync", "topic", ev.Get("topic"), "err", err)
		}
	})
	e.events.Subscribe(events.Brokers, func(events.Event) { e.ownershipChanged() })
	e.events.Subscribe(events.GroupConfig, func(events.Event) { e.reconcileShareGroups() })
	e.events.Subscribe(events.GroupOffsets, func(ev events.Event) {
		if ev.Node != e.NodeID() && ev.Get("group") != "" {
			e.groups.StaleOffsets(ev.Get("group"))
		}
	})
	e.events.Subscribe(events.Resync, func(events.Event) {
		ctx, cancel := context.WithTimeout(e.bg, reloadTimeout)
		defer cancel()
		if err := e.ReloadTopics(ctx); err != nil {
			e.log.Warn("could not reload topics after a resync", "err", err)
		}
		e.ownershipChanged()
		e.groups.StaleOffsets("") // a GroupOffsets event may be among those missed
	})
}

// ownershipChanged drops the groups another broker coordinates now; the
// groups this broker gained are restored from Redis on first use.
func (e *Engine) ownershipChanged() {
	ctx, cancel := context.WithTimeout(e.bg, reloadTimeout)
	defer cancel()
	if n := e.groups.OwnershipChanged(ctx); n > 0 {
		e.log.Info("consumer groups handed over to their new coordinators", "groups", n)
	}
	if _, err := e.txns.OwnershipChanged(ctx); err != nil && !errors.Is(err, context.Canceled) {
		e.log.Warn("could not load the transactional ids this broker coordinates now; they load on first use", "err", err)
	}
	e.reconcileShareGroups()
}

// reconcileShareGroups rereads the share group registry: groups created
// or deleted on another broker appear or go, and the members of groups
// another broker coordinates are dropped here.
func (e *Engine) reconcileShareGroups() {
	ctx, cancel := context.WithTimeout(e.bg, reloadTimeout)
	defer cancel()
	r, err := e.rc.Do(ctx, "HKEYS", e.k.ShareGroups())
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) { // not the broker shutting down
			e.log.Warn("could not reload share groups", "key", e.k.ShareGroups(), "err", err)
		}
		return
	}
	reg := map[string]bool{}
	r.ForEach(func(g resp.Reply) bool {
		reg[string(g.Bytes())] = true
		return true
	})
	before := e.share.Names()
	e.share.Reconcile(reg, e.OwnsGroup)
	for name := range before {
		if !reg[name] && !e.share.Exists(name) {
			e.forgetShareParts(name) // deleted elsewhere: its cursors are stale
		}
	}
}

// registerShareGroup adds a share group to the registry in Redis and
// tells the other brokers when it is new.
func (e *Engine) registerShareGroup(ctx context.Context, group string) error {
	r, err := e.rc.Do(ctx, "HSETNX", e.k.ShareGroups(), group, nowMillis())
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: save share group: %v", ErrStorageUnavailable, err)
	}
	if n, _ := r.Int(); n == 1 {
		if err := e.events.Publish(ctx, events.GroupConfig, "group", group); err != nil {
			e.log.Warn("share group created but other brokers were not told; they see it on their next resync", "group", group, "err", err)
		}
	}
	return nil
}

// ReloadTopic brings one topic in line with Redis: it appears, goes,
// grows or takes new configs. Nothing is written.
func (e *Engine) ReloadTopic(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	e.createMu.Lock()
	defer e.createMu.Unlock()
	return e.reloadTopicLocked(ctx, name)
}

// reloadTopicLocked is ReloadTopic under e.createMu.
func (e *Engine) reloadTopicLocked(ctx context.Context, name string) error {
	r, err := e.rc.Do(ctx, "HGET", e.k.Topics(), name)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: reload topic %q: %v", ErrStorageUnavailable, name, err)
	}
	if r.IsNil() {
		return e.applyTopicMeta(ctx, name, nil)
	}
	var m topicMeta
	if err := json.Unmarshal(r.Bytes(), &m); err != nil {
		return fmt.Errorf("reload topic %q: bad metadata in %s: %w", name, e.k.Topics(), err)
	}
	return e.applyTopicMeta(ctx, name, &m)
}

// ReloadTopics brings every topic in line with Redis (after a resync).
func (e *Engine) ReloadTopics(ctx context.Context) error {
	e.createMu.Lock()
	defer e.createMu.Unlock()
	r, err := e.rc.Do(ctx, "HGETALL", e.k.Topics())
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: reload topics: %v", ErrStorageUnavailable, err)
	}
	stored := map[string]*topicMeta{}
	var elems []resp.Reply
	elems = r.Elems(elems)
	for i := 0; i+1 < len(elems); i += 2 {
		name := string(elems[i].Bytes())
		var m topicMeta
		if err := json.Unmarshal(elems[i+1].Bytes(), &m); err != nil {
			e.log.Warn("skipping topic with bad metadata", "topic", name, "key", e.k.Topics(), "err", err)
			continue
		}
		stored[name] = &m
	}
	var first error
	for _, t := range e.Topics() {
		if _, ok := stored[t.name]; !ok {
			if err := e.applyTopicMeta(ctx, t.name, nil); err != nil && first == nil {
				first = err
			}
		}
	}
	for name, m := range stored {
		if err := e.applyTopicMeta(ctx, name, m); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// applyTopicMeta makes the topic name match m (nil: deleted); e.createMu
// is held.
func (e *Engine) applyTopicMeta(ctx context.Context, name string, m *topicMeta) error {
	cur := e.Topic(name)
	if cur != nil && (m == nil || m.ID != cur.meta().ID) {
		if cur.Internal() && m == nil {
			return nil
		}
		// Deleted (and maybe created again, with a new id): this broker
		// lets go of it as DeleteTopic does, without deleting anything.
		e.forgetTopic(cur)
		e.log.Info("topic deleted on another broker", "topic", name)
		cur = nil
	}
	if m == nil {
		return nil
	}
	if cur == nil {
		t, err := e.newTopic(name, *m)
		if err != nil {
			return fmt.Errorf("load topic %q: %w", name, err)
		}
		if err := t.loadPartitions(ctx, 0); err != nil {
			return fmt.Errorf("load topic %q: %w", name, err)
		}
		e.mu.Lock()
		e.topics[name] = t
		e.byID[t.id] = t
		e.mu.Unlock()
		e.log.Info("topic loaded: created on another broker", "topic", name, "partitions", m.Partitions)
		e.partitionsChanged()
		e.topicsChanged()
		return nil
	}
	if have := int32(len(cur.Partitions())); m.Partitions > have {
		if err := e.growTopic(ctx, cur, have, m.Partitions); err != nil {
			return err
		}
		e.log.Info("partitions loaded: created on another broker", "topic", name, "from", have, "to", m.Partitions)
		e.partitionsChanged()
		e.topicsChanged()
	}
	configs := m.Configs
	if configs == nil {
		configs = map[string]string{}
	}
	if !maps.Equal(configs, cur.Configs()) {
		cur.setConfigs(configs)
		e.topicsChanged()
		e.log.Info("topic configs reloaded", "topic", name, "configs", configs)
	}
	return nil
}

// forgetTopic drops t from this broker's view and closes its partitions,
// writing nothing.
func (e *Engine) forgetTopic(t *Topic) {
	e.mu.Lock()
	if e.topics[t.name] == t {
		delete(e.topics, t.name)
	}
	delete(e.byID, t.id)
	e.mu.Unlock()
	for _, p := range t.Partitions() {
		p.close()
	}
}

// growTopic loads t's partitions from have up to count.
func (e *Engine) growTopic(ctx context.Context, t *Topic, have, count int32) error {
	parts := append([]*Partition(nil), t.Partitions()...)
	for i := have; i < count; i++ {
		parts = append(parts, newPartition(t, i))
	}
	if err := loadPartitions(ctx, e, parts[have:]); err != nil {
		return fmt.Errorf("create partitions of %s: %w", t.name, err)
	}
	t.mu.Lock()
	t.parts = parts
	t.mu.Unlock()
	return nil
}

// setConfigs replaces the topic's own configs and the settings they make.
func (t *Topic) setConfigs(configs map[string]string) {
	t.mu.Lock()
	t.configs = configs
	t.mu.Unlock()
	settings := parseSettings(t.ConfigValue)
	t.mu.Lock()
	t.settings = settings
	t.mu.Unlock()
}
