package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/index"
)

// RebuildOptions configure KV.Rebuild.
type RebuildOptions struct {
	// Topics are the indexed topics to load; empty means all of them.
	Topics []string
	// Upto, when set, gives the offset (exclusive) a partition is loaded
	// up to instead of its last stable offset (never past it); ok false
	// skips the partition.
	Upto func(topic string, partition int32) (next int64, ok bool)
	// Progress, when set, is called about every second and at the end.
	Progress func(RebuildProgress)

	loadBudget int  // tests: overrides loadBudget
	batches    bool // tests: commit batches, as the live index does
}

// RebuildProgress reports a rebuild under way.
type RebuildProgress struct {
	Records int64         // records applied so far
	Done    int64         // offsets covered so far, over all partitions
	Total   int64         // offsets to cover (from each log start to its target)
	Elapsed time.Duration // since the start
	Final   bool
}

// RebuildResult sums up a rebuild.
type RebuildResult struct {
	Topics     int
	Partitions int
	Records    int64
	Elapsed    time.Duration
}

// Rebuild loads ix from the log of indexed topics, from each partition's
// checkpoint in ix (the log start for a fresh index) to its last stable
// offset as of the call, as the live index does (kv_txn.go). It works without a live index: korvet index rebuild
// runs the engine without one and opens ix for this.
func (k *KV) Rebuild(ctx context.Context, ix *index.Index, o RebuildOptions) (RebuildResult, error) {
	start := time.Now()
	topics, err := k.indexedTopics(o.Topics)
	if err != nil {
		return RebuildResult{}, err
	}
	kv := newKVIndex(k.e, ix, IndexOptions{})
	kv.bulk, kv.loadBudget = !o.batches, o.loadBudget
	var parts []*kvPart
	targets := map[*kvPart]int64{}
	type span struct{ from, to int64 }
	spans := map[*kvPart]span{}
	for _, t := range topics {
		kt, err := kv.topic(t)
		if err != nil {
			return RebuildResult{}, err
		}
		for _, kp := range kt.partitions() {
			to := kp.p.kvTarget()
			if o.Upto != nil {
				n, ok := o.Upto(t.name, kp.p.id)
				if !ok {
					continue
				}
				to = min(n, to)
			}
			targets[kp] = to
			spans[kp] = span{max(kp.applied, kp.p.LogStart()), to}
			parts = append(parts, kp)
		}
	}
	var records atomic.Int64
	report := func(final bool) {
		if o.Progress == nil {
			return
		}
		pr := RebuildProgress{Records: records.Load(), Elapsed: time.Since(start), Final: final}
		for kp, sp := range spans {
			kp.mu.Lock()
			applied := max(kp.applied, kp.loaded)
			kp.mu.Unlock()
			pr.Total += max(sp.to-sp.from, 0)
			pr.Done += min(max(applied-sp.from, 0), max(sp.to-sp.from, 0))
		}
		o.Progress(pr)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if o.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					report(false)
				}
			}
		}()
	}
	err = kv.fillAll(ctx, parts, func(kp *kvPart) int64 { return targets[kp] }, &records)
	close(stop)
	wg.Wait()
	report(true)
	if err == nil {
		err = ctx.Err()
	}
	return RebuildResult{Topics: len(topics), Partitions: len(parts), Records: records.Load(), Elapsed: time.Since(start)}, err
}

// indexedTopics resolves topic names, which must be indexed; none means
// every indexed topic.
func (k *KV) indexedTopics(names []string) ([]*Topic, error) {
	var topics []*Topic
	if len(names) == 0 {
		for _, t := range k.e.Topics() {
			if t.indexed() {
				topics = append(topics, t)
			}
		}
		return topics, nil
	}
	for _, name := range names {
		t := k.e.Topic(name)
		if t == nil {
			return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
		}
		if !t.indexed() {
			return nil, fmt.Errorf("%w: %q", ErrKVNotIndexed, name)
		}
		topics = append(topics, t)
	}
	return topics, nil
}
