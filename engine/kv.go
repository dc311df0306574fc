package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/index"
)

// The KV view: "the latest value of key K" served from the log itself. A
// Pebble index (engine/index) maps each key of an indexed topic to the
// (partition, offset) of its latest record; a read looks the pointer up
// and reads that one record through Partition.Read, checking that it
// carries the key. The commit path feeds the index before producers are
// acknowledged (read-your-writes, kv_apply.go) and, after a restart or a
// gap, a catch-up reads the log from each partition's checkpoint
// (kv_catchup.go). Every path applies the log up to the last stable offset
// only, as a read_committed consumer reads it (kv_txn.go).
//
// The files by job: kv_open.go (open, close, the topics' indexing state),
// kv_apply.go (the commit path), kv_txn.go (transactions), kv_catchup.go and kv_readkeys.go
// (catching up from the log), kv_get.go (reads), kv_stats.go and
// kv_count.go (figures), kv_rebuild.go, kv_rebuild_online.go and
// kv_verify.go (loading an index from the log, swapping it in, checking
// one), compact.go (compaction, which the index drives).

// IndexOptions configure the KV index (kv.go) and compaction (compact.go).
type IndexOptions struct {
	// Dir is the index's Pebble directory. Empty: no index, no KV view, no
	// compaction.
	Dir string
	// StaleBudget bounds how long a read waits for the index (catching up,
	// or re-resolving a pointer that no longer matches the log) before
	// giving up with ErrKVUnavailable. Default 2s.
	StaleBudget time.Duration
	// CompactionInterval is how often compacted topics are checked for
	// work. Default 15s.
	CompactionInterval time.Duration
	// CacheSize is Pebble's block cache. Default 16 MiB.
	CacheSize int64
	// CountTimeout bounds one count of a topic's keys (a scan of its
	// index). Default 30s.
	CountTimeout time.Duration
}

// KV is the KV view of an Engine; get it with Engine.KV. Without an index
// (Options.Index.Dir empty) reads answer ErrKVDisabled, while Rebuild and
// Verify still work on an index the caller opened (korvet index).
type KV struct {
	e    *Engine
	live *kvIndex // the open index; nil without Options.Index.Dir
}

// KV returns the KV view: reads, figures, rebuilds and checks of the key
// index.
func (e *Engine) KV() *KV { return &e.kv }

// kvIndex is the live index of an Engine (or, for a rebuild, a loader
// over a fresh index).
type kvIndex struct {
	e    *Engine
	ix   *index.Index
	opts IndexOptions
	log  *slog.Logger

	// closeMu guards ix against Close and against the swap of an online
	// rebuild: everything that uses ix holds it shared. Lock order:
	// closeMu, kvTopic.mu, kvPart.mu.
	closeMu sync.RWMutex
	closed  bool
	gen     uint64 // bumped by each swap
	// bulk marks the index of an offline rebuild: fill loads sorted
	// tables (kv_load.go) instead of committing batches.
	bulk       bool
	loadBudget int // tests: overrides loadBudget when > 0

	mu     sync.RWMutex
	topics map[[16]byte]*kvTopic

	// countHook, when set (tests), runs in each count before its scan.
	countHook atomic.Pointer[func(ctx context.Context, topic string)]

	wake      chan struct{} // nudges the catch-up loop
	tailWake  chan struct{} // nudges the tail (kv_tail.go)
	compactMu sync.Mutex    // one compaction pass (or online rebuild) at a time

	rebuildMu sync.Mutex
	rebuild   KVRebuildState
}

type kvTopic struct {
	t     *Topic
	mu    sync.Mutex // guards parts' growth
	parts []*kvPart
	reads [numOutcomes]atomic.Int64

	dirty     atomic.Bool  // written since the keys were counted
	keys      atomic.Int64 // live keys at the last count
	tombs     atomic.Int64 // tombstone pointers at the last count
	countedAt atomic.Int64 // unix ms of the last count; 0: never

	// countMu guards counting, the count in progress: callers of count
	// share it rather than each scanning the index.
	countMu  sync.Mutex
	counting *countCall

	cmpMu sync.Mutex
	cmp   KVCompactionStats
}

// kvPart is one partition's indexing state.
type kvPart struct {
	kt *kvTopic
	p  *Partition

	// mu serializes everything that writes this partition's pointers and
	// checkpoint: the commit path, catch-up, and compaction's tombstone
	// removal.
	mu      sync.Mutex
	applied int64         // offsets below are in the index (the checkpoint)
	loaded  int64         // a bulk fill's records below are read, not yet in the index
	ready   chan struct{} // closed while the index has caught up
	caught  atomic.Bool   // ready is closed: for readers that must not wait
	err     error         // last failure to apply, for stats
	busy    bool          // a catch-up runs
	// adv is closed (and cleared) when applied moves: read-your-writes
	// waits (kv_token.go) watch it. Created by the first waiter.
	adv chan struct{}

	cmp compactState // owned by the compaction pass (kvIndex.compactMu)
}

// indexed reports whether t is in the KV view. Internal topics
// (__consumer_offsets) are korvet's own and never are.
func (t *Topic) indexed() bool {
	return !t.Internal() && (t.Compacted() || t.ConfigValue("korvet.index.enable") == "true")
}

func (kt *kvTopic) numParts() int {
	kt.mu.Lock()
	defer kt.mu.Unlock()
	return len(kt.parts)
}

func (kt *kvTopic) partitions() []*kvPart {
	kt.mu.Lock()
	defer kt.mu.Unlock()
	return kt.parts
}

func (kt *kvTopic) part(id int32) *kvPart {
	kt.mu.Lock()
	defer kt.mu.Unlock()
	if int(id) < len(kt.parts) {
		return kt.parts[id]
	}
	return nil
}

func (kt *kvTopic) caughtUp() bool {
	for _, kp := range kt.partitions() {
		if !kp.isReady() {
			return false
		}
	}
	return true
}

func (kp *kvPart) isReady() bool { return kp.caught.Load() }

// setLagging marks the partition as behind the log; kp.mu must be held.
func (kp *kvPart) setLagging() {
	kp.caught.Store(false)
	select {
	case <-kp.ready:
		kp.ready = make(chan struct{})
	default:
	}
}

// setReady marks the partition as caught up; kp.mu must be held.
func (kp *kvPart) setReady() {
	kp.caught.Store(true)
	select {
	case <-kp.ready:
	default:
		close(kp.ready)
	}
}

func (kv *kvIndex) nudge() {
	select {
	case kv.wake <- struct{}{}:
	default:
	}
}

var (
	errKVClosed  = errors.New("key index closed")
	errKVSwapped = errors.New("key index replaced by a rebuild")
)

// use runs fn with the open index, holding it against a swap (online
// rebuild) or Close. fn must not call use again.
func (kv *kvIndex) use(fn func(ix *index.Index) error) error {
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return errKVClosed
	}
	return fn(kv.ix)
}

// lookup reads a pointer unless the index is closed.
func (kv *kvIndex) lookup(topic [16]byte, key []byte) (index.Pointer, bool, error) {
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return index.Pointer{}, false, errKVClosed
	}
	return kv.ix.Get(topic, key)
}
