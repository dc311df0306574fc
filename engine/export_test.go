package engine

import (
	"context"

	"github.com/korvet/korvet/engine/record"
)

// AppendFrom is AppendBatch of an uncompressed batch.
func (p *Partition) AppendFrom(prod Producer, recs []record.Record) *Pending {
	return p.AppendBatch(prod, 0, recs)
}

// SetCountHook makes each count of a topic's keys call hook (with the
// count's context) before it scans the index.
func (k *KV) SetCountHook(hook func(ctx context.Context, topic string)) {
	k.live.countHook.Store(&hook)
}

// CountWaiters is how many callers wait for the count of topic's keys in
// progress; 0 when none runs.
func (k *KV) CountWaiters(topic string) int {
	t := k.e.Topic(topic)
	if t == nil || k.live == nil {
		return 0
	}
	k.live.mu.RLock()
	kt := k.live.topics[t.id]
	k.live.mu.RUnlock()
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

// RebuildOnline is StartRebuild, waited for: it returns the rebuild's
// result (see rebuildOnline).
func (k *KV) RebuildOnline(ctx context.Context) (RebuildResult, error) {
	kv := k.live
	if kv == nil {
		return RebuildResult{}, ErrKVDisabled
	}
	if err := kv.claimRebuild(); err != nil {
		return RebuildResult{}, err
	}
	return kv.rebuildOnline(ctx)
}

// Crash stops the engine as a SIGKILL would for the other brokers: no
// handover, its lease left to lapse.
func (e *Engine) Crash() {
	e.cl.mu.Lock()
	e.cl.left = true
	e.cl.mu.Unlock()
	e.Close()
}

// Pause and Resume freeze the engine's membership work (lease renewal,
// leadership checks, leader events) as SIGSTOP and SIGCONT would; its
// appends still run.
func (e *Engine) Pause()  { e.cl.paused.Store(true) }
func (e *Engine) Resume() { e.cl.paused.Store(false); e.wakeControl() }

// DesiredLeader is the rendezvous-hash winner for p among nodes.
func DesiredLeader(p *Partition, nodes []int32) int32 { return hrw(p.hrwKey(), nodes) }

// ResolveTxns runs the resolver on p now.
func (e *Engine) ResolveTxns(ctx context.Context, p *Partition) error { return e.resolveTxns(ctx, p) }
