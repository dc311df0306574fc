package engine

import (
	"context"

	"github.com/korvet/korvet/engine/record"
)

// AppendFrom is AppendBatch of an uncompressed batch.
func (p *Partition) AppendFrom(prod Producer, recs []record.Record) *Pending {
	return p.AppendBatch(prod, 0, recs)
}

// SetKVCountHook makes each count of a topic's keys call hook (with the
// count's context) before it scans the index.
func (e *Engine) SetKVCountHook(hook func(ctx context.Context, topic string)) {
	e.kv.countHook.Store(&hook)
}

// KVCountWaiters is how many callers wait for the count of topic's keys
// in progress; 0 when none runs.
func (e *Engine) KVCountWaiters(topic string) int {
	t := e.Topic(topic)
	if t == nil || e.kv == nil {
		return 0
	}
	e.kv.mu.RLock()
	kt := e.kv.topics[t.id]
	e.kv.mu.RUnlock()
	if kt == nil {
		return 0
	}
	kt.countMu.Lock()
	defer kt.countMu.Unlock()
	if kt.counting == nil {
		return 0
	}
	return kt.counting.waiters
}
