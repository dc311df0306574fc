package engine

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/korvet/korvet/engine/index"
)

// openKV opens the index and starts catching it up; called by Open.
func (e *Engine) openKV(ctx context.Context) error {
	e.kv = KV{e: e}
	o := e.opts.Index
	if o.Dir == "" {
		return nil
	}
	if o.StaleBudget <= 0 {
		o.StaleBudget = 2 * time.Second
	}
	if o.CompactionInterval <= 0 {
		o.CompactionInterval = 15 * time.Second
	}
	if o.CountTimeout <= 0 {
		o.CountTimeout = 30 * time.Second
	}
	ix, err := index.Open(o.Dir, index.Options{CacheSize: o.CacheSize, Logger: e.log})
	if err != nil {
		return fmt.Errorf("open key index: %w", err)
	}
	// Leftovers of a rebuild interrupted by a crash; holding the lock on
	// the index, nothing else is using them.
	_ = os.RemoveAll(o.Dir + ".rebuild")
	_ = os.RemoveAll(o.Dir + ".old")
	kv := newKVIndex(e, ix, o)
	if err := kv.reconcile(); err != nil {
		ix.Close()
		return err
	}
	e.kv.live = kv
	e.wg.Add(2)
	go kv.catchUpLoop()
	go kv.compactionLoop()
	kv.startTail()
	return nil
}

func newKVIndex(e *Engine, ix *index.Index, o IndexOptions) *kvIndex {
	return &kvIndex{e: e, ix: ix, opts: o, log: e.log, topics: make(map[[16]byte]*kvTopic), wake: make(chan struct{}, 1)}
}

// closeKV closes the index after background work has stopped; appends
// still in flight skip it (the checkpoints bring them back at the next
// start).
func (e *Engine) closeKV() {
	kv := e.kv.live
	if kv == nil {
		return
	}
	kv.closeMu.Lock()
	was := kv.closed
	kv.closed = true
	kv.closeMu.Unlock()
	if was {
		return
	}
	if err := kv.ix.Close(); err != nil {
		e.log.Warn("close key index", "err", err)
	}
}

// reconcile matches the index with the engine's topics: drops the keys of
// topics deleted or no longer indexed, and registers (catching up) every
// indexed topic.
func (kv *kvIndex) reconcile() error {
	var ids [][16]byte
	err := kv.use(func(ix *index.Index) (err error) {
		ids, err = ix.Topics()
		return err
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		t := kv.e.TopicByID(id)
		if t != nil && t.indexed() {
			continue
		}
		kv.mu.Lock()
		delete(kv.topics, id)
		kv.mu.Unlock()
		if err := kv.use(func(ix *index.Index) error { return ix.DropTopic(id) }); err != nil {
			return err
		}
		kv.log.Info("key index: dropped a topic that is gone or no longer indexed", "topic", topicName(t, id))
	}
	// Forget the state of topics deleted or no longer indexed, checkpoint
	// or not.
	kv.mu.Lock()
	for id, kt := range kv.topics {
		if t := kv.e.TopicByID(id); t != kt.t || !t.indexed() {
			delete(kv.topics, id)
		}
	}
	kv.mu.Unlock()
	for _, t := range kv.e.Topics() {
		if t.indexed() {
			if _, err := kv.topic(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func topicName(t *Topic, id [16]byte) string {
	if t != nil {
		return t.name
	}
	return fmt.Sprintf("%x", id)
}

// topic returns t's indexing state, creating it (and the state of any
// partition added since) from the stored checkpoints.
func (kv *kvIndex) topic(t *Topic) (*kvTopic, error) {
	kv.mu.RLock()
	kt := kv.topics[t.id]
	kv.mu.RUnlock()
	parts := t.Partitions()
	if kt != nil && kt.t == t && kt.numParts() == len(parts) {
		return kt, nil
	}
	kv.mu.Lock()
	kt = kv.topics[t.id]
	if kt == nil || kt.t != t {
		kt = &kvTopic{t: t}
		kt.dirty.Store(true)
		kv.topics[t.id] = kt
	}
	kv.mu.Unlock()

	if err := kv.addParts(kt, parts); err != nil {
		return nil, err
	}
	if !kt.caughtUp() {
		kv.nudge()
	}
	return kt, nil
}

// addParts creates the state of partitions kt does not have yet.
func (kv *kvIndex) addParts(kt *kvTopic, parts []*Partition) error {
	t := kt.t
	// Lock order: closeMu, then kt.mu, then kp.mu.
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return errKVClosed
	}
	kt.mu.Lock()
	defer kt.mu.Unlock()
	for i := len(kt.parts); i < len(parts); i++ {
		p := parts[i]
		next, ok, err := kv.ix.Checkpoint(t.id, p.id)
		if err != nil {
			return err
		}
		if !ok {
			next = 0
		}
		if lso := p.kvTarget(); ok && next > lso {
			// The index claims more than the log has (Redis restored from
			// an older state, or flushed), or than is stable (an open
			// transaction's records may be in it): it cannot be trusted
			// for any partition, since keys are not scoped by partition.
			kv.log.Warn("key index is ahead of the log; dropping the topic's index to rebuild it", "topic", t.name, "partition", p.id, "checkpoint", next, "high_watermark", p.HighWatermark(), "last_stable", lso)
			if err := kv.ix.DropTopic(t.id); err != nil {
				return err
			}
			for _, kp := range kt.parts {
				kp.mu.Lock()
				kp.applied = 0
				kp.setLagging()
				kp.mu.Unlock()
			}
			next = 0
		}
		kp := &kvPart{kt: kt, p: p, applied: next, ready: make(chan struct{})}
		if next >= p.kvTarget() {
			kp.setReady()
		}
		kt.parts = append(kt.parts, kp)
	}
	return nil
}

// topicFor resolves a topic name for the KV view.
func (k *KV) topicFor(name string) (*kvTopic, error) {
	if k.live == nil {
		return nil, ErrKVDisabled
	}
	t := k.e.Topic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if t.Internal() {
		return nil, fmt.Errorf("%w: %q is internal", ErrKVNotIndexed, name)
	}
	if !t.indexed() {
		return nil, fmt.Errorf("%w: %q has cleanup.policy=%s; set cleanup.policy=compact or korvet.index.enable=true to index it", ErrKVNotIndexed, name, t.ConfigValue("cleanup.policy"))
	}
	return k.live.topic(t)
}
