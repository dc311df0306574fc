package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// The KV view: "the latest value of key K" served from the log itself. A
// Pebble index (engine/index) maps each key of an indexed topic to the
// (partition, offset) of its latest record; a read looks the pointer up
// and reads that one record through Partition.Read, checking that it
// carries the key. The index is fed by the commit hook before producers
// are acknowledged (read-your-writes) and, after a restart or a gap, by a
// catch-up that reads the log from each partition's checkpoint.

// Errors of the KV view.
var (
	ErrKVDisabled   = errors.New("the key index is disabled")
	ErrKVNotIndexed = errors.New("topic is not indexed")
	ErrKVNotFound   = errors.New("key not found")
	ErrKVGone       = errors.New("record removed by retention")
	// ErrKVUnavailable means the index cannot answer in time: a pointer
	// that no longer matches the log could not be resolved, or the index
	// is still catching up with the log. Retry later.
	ErrKVUnavailable = errors.New("key index unavailable")
)

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

// KVRecord is the latest record of a key.
type KVRecord struct {
	TopicID   [16]byte
	Partition int32
	Offset    int64
	Timestamp int64
	Value     []byte
	Headers   []record.Header
}

// Header returns the value of the first header named name, or nil.
func (r *KVRecord) Header(name string) []byte {
	for _, h := range r.Headers {
		if string(h.Key) == name {
			return h.Value
		}
	}
	return nil
}

// Read outcomes, counted per topic.
const (
	outcomeHit = iota
	outcomeMiss
	outcomeGone
	outcomeStale
	outcomeError
	numOutcomes
)

// KVReads counts KV reads by outcome.
type KVReads struct {
	Hit   int64 `json:"hit"`
	Miss  int64 `json:"miss"`
	Gone  int64 `json:"gone"`
	Stale int64 `json:"stale"`
	Error int64 `json:"error"`
}

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

	mu     sync.RWMutex
	topics map[[16]byte]*kvTopic

	// countHook, when set (tests), runs in each count before its scan.
	countHook atomic.Pointer[func(ctx context.Context, topic string)]

	wake      chan struct{} // nudges the catch-up loop
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
	// checkpoint: the commit hook, catch-up, and compaction's tombstone
	// removal.
	mu      sync.Mutex
	applied int64         // offsets below are in the index (the checkpoint)
	ready   chan struct{} // closed while the index has caught up
	caught  atomic.Bool   // ready is closed: for readers that must not wait
	err     error         // last failure to apply, for stats
	busy    bool          // a catch-up runs

	cmp compactState // owned by the compaction pass (kvIndex.compactMu)
}

// indexed reports whether t is in the KV view. Internal topics
// (__consumer_offsets) are korvet's own and never are.
func (t *Topic) indexed() bool {
	return !t.Internal() && (t.Compacted() || t.ConfigValue("korvet.index.enable") == "true")
}

// openKV opens the index and starts catching it up; called by Open.
func (e *Engine) openKV(ctx context.Context) error {
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
	hook := e.opts.OnCommit
	e.opts.OnCommit = func(p *Partition, batches [][]record.Record, next int64) {
		kv.onCommit(p, batches, next)
		if hook != nil {
			hook(p, batches, next)
		}
	}
	e.kv = kv
	e.wg.Add(2)
	go kv.catchUpLoop()
	go kv.compactionLoop()
	return nil
}

func newKVIndex(e *Engine, ix *index.Index, o IndexOptions) *kvIndex {
	return &kvIndex{e: e, ix: ix, opts: o, log: e.log, topics: make(map[[16]byte]*kvTopic), wake: make(chan struct{}, 1)}
}

// closeKV closes the index after background work has stopped; appends
// still in flight skip it (the checkpoints bring them back at the next
// start).
func (e *Engine) closeKV() {
	kv := e.kv
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
		if ok && next > p.HighWatermark() {
			// The index claims more than the log has (Redis restored from
			// an older state, or flushed): it cannot be trusted for any
			// partition, since keys are not scoped by partition.
			kv.log.Warn("key index is ahead of the log; dropping the topic's index to rebuild it", "topic", t.name, "partition", p.id, "checkpoint", next, "high_watermark", p.HighWatermark())
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
		if next >= p.HighWatermark() {
			kp.setReady()
		}
		kt.parts = append(kt.parts, kp)
	}
	return nil
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

// onCommit indexes a committed append before its producers hear back.
// When the partition is behind (a restart, a failed append whose outcome
// was unknown) it leaves the records to the catch-up, which reads them
// from the log.
func (kv *kvIndex) onCommit(p *Partition, batches [][]record.Record, next int64) {
	if !p.t.indexed() || len(batches) == 0 || len(batches[0]) == 0 {
		return
	}
	kt, err := kv.topic(p.t)
	if err != nil {
		if !errors.Is(err, errKVClosed) {
			kv.log.Warn("key index", "topic", p.t.name, "err", err)
		}
		return
	}
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return
	}
	kp := kt.part(p.id)
	if kp == nil {
		return
	}
	kp.mu.Lock()
	defer kp.mu.Unlock()
	base := batches[0][0].Offset
	if base > kp.applied {
		kp.setLagging()
		kv.nudge()
		return
	}
	if next <= kp.applied {
		return
	}
	b := kv.ix.NewBatch()
	defer b.Close()
	compacted := p.t.Compacted()
	for _, recs := range batches {
		for i := range recs {
			if recs[i].Offset >= kp.applied {
				if err := applyRecord(b, p.t.id, p.id, compacted, &recs[i]); err != nil {
					kv.applyFailed(kp, err)
					return
				}
			}
		}
	}
	if err := kv.commit(b, kp, next); err != nil {
		kv.applyFailed(kp, err)
		return
	}
	if kp.applied >= p.HighWatermark() {
		kp.setReady()
	}
}

// applyFailed leaves the partition to the catch-up; kp.mu must be held.
func (kv *kvIndex) applyFailed(kp *kvPart, err error) {
	kp.err = err
	kp.setLagging()
	kv.nudge()
	kv.log.Warn("key index: apply failed; catching up from the log", "topic", kp.p.t.name, "partition", kp.p.id, "err", err)
}

// commit writes b with the partition's new checkpoint; kp.mu must be held.
func (kv *kvIndex) commit(b *index.Batch, kp *kvPart, next int64) error {
	if err := b.SetCheckpoint(kp.p.t.id, kp.p.id, next); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	kp.applied = next
	kp.err = nil
	kp.kt.dirty.Store(true)
	return nil
}

// applyRecord adds one record's effect to b. On a compacted topic a
// tombstone leaves a tombstone pointer, so that compaction can tell the
// latest tombstone of a key from older ones; elsewhere it deletes the key.
func applyRecord(b *index.Batch, topic [16]byte, part int32, compacted bool, r *record.Record) error {
	switch {
	case r.Key == nil:
		return nil
	case r.Value == nil && !compacted:
		return b.Delete(topic, r.Key)
	default:
		return b.Set(topic, r.Key, index.Pointer{Partition: part, Offset: r.Offset, Tombstone: r.Value == nil})
	}
}

// catchUpLoop brings lagging partitions up to their high watermark.
func (kv *kvIndex) catchUpLoop() {
	defer kv.e.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-kv.e.bg.Done():
			return
		case <-kv.wake:
		case <-tick.C:
		}
		var lag []*kvPart
		kv.mu.RLock()
		for _, kt := range kv.topics {
			for _, kp := range kt.partitions() {
				if !kp.isReady() {
					lag = append(lag, kp)
				}
			}
		}
		kv.mu.RUnlock()
		kv.fillAll(kv.e.bg, lag, nil, nil)
	}
}

// fillAll catches partitions up, a few at a time.
func (kv *kvIndex) fillAll(ctx context.Context, parts []*kvPart, upto func(*kvPart) int64, progress *atomic.Int64) error {
	const workers = 4
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, kp := range parts {
		kp.mu.Lock()
		busy := kp.busy
		kp.busy = true
		kp.mu.Unlock()
		if busy {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() {
				kp.mu.Lock()
				kp.busy = false
				kp.mu.Unlock()
				<-sem
				wg.Done()
			}()
			limit := int64(-1)
			if upto != nil {
				limit = upto(kp)
			}
			err := kv.fill(ctx, kp, limit, progress)
			if err != nil && ctx.Err() == nil {
				kv.log.Warn("key index: catch-up", "topic", kp.p.t.name, "partition", kp.p.id, "err", err)
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// fillChunk is one read of the log ahead of the applier: the records at
// or after from, and next, the offset after the range the read covered.
type fillChunk struct {
	from, next int64
	recs       []record.Record
	release    func()
	err        error
}

// fill applies the partition's log from its checkpoint up to limit (the
// high watermark when limit < 0, following it until caught up). Reads run
// one chunk ahead of the applier, so Redis and Pebble work in parallel.
func (kv *kvIndex) fill(ctx context.Context, kp *kvPart, limit int64, progress *atomic.Int64) error {
	p := kp.p
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	target := func() int64 {
		if limit >= 0 {
			return min(limit, p.HighWatermark())
		}
		return p.HighWatermark()
	}
	kv.closeMu.RLock()
	gen := kv.gen
	kv.closeMu.RUnlock()
	kp.mu.Lock()
	from := max(kp.applied, p.LogStart())
	kp.mu.Unlock()

	// Offsets are dense (compaction only thins them), so the log ahead
	// splits into windows of keyScanCount offsets read concurrently, a
	// few at a time, and handed to the applier in order: a rebuild keeps
	// Redis and both ends of the pipe busy.
	const inflight = 3
	chunks := make(chan fillChunk, inflight)
	go func() {
		defer close(chunks)
		var queue []chan fillChunk
		at := from
		for {
			for len(queue) < inflight {
				to := min(target(), at+keyScanCount)
				if at >= to {
					break
				}
				fut := make(chan fillChunk, 1)
				go func(a, b int64) { fut <- readRange(ctx, p, a, b) }(at, to)
				queue = append(queue, fut)
				at = to
			}
			if len(queue) == 0 {
				return
			}
			c := <-queue[0]
			queue = queue[1:]
			if c.err != nil {
				for _, f := range queue {
					if r := <-f; r.release != nil {
						r.release()
					}
				}
				queue = nil
			}
			select {
			case chunks <- c:
			case <-ctx.Done():
				if c.release != nil {
					c.release()
				}
				for _, f := range queue {
					if r := <-f; r.release != nil {
						r.release()
					}
				}
				return
			}
			if c.err != nil {
				return
			}
		}
	}()

	for c := range chunks {
		if errors.Is(c.err, ErrOffsetOutOfRange) && c.from < p.LogStart() {
			// Retention moved past the checkpoint meanwhile: go again
			// from the new log start.
			kv.nudge()
			break
		}
		if c.err != nil {
			return c.err
		}
		err := kv.applyChunk(kp, c, limit, gen, progress)
		c.release()
		if errors.Is(err, errKVSwapped) {
			kv.nudge()
			return nil
		}
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Caught up as far as the reads went; the live hook takes over when
	// nothing was committed meanwhile, else the next round continues.
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if kv.closed || kv.gen != gen {
		return nil
	}
	if s := p.LogStart(); kp.applied < s {
		// Retention passed the checkpoint: nothing below s is readable.
		b := kv.ix.NewBatch()
		defer b.Close()
		if err := kv.commit(b, kp, s); err != nil {
			return err
		}
	}
	if limit < 0 && kp.applied >= p.HighWatermark() {
		kp.setReady()
	} else if limit < 0 {
		kv.nudge()
	}
	return nil
}

// readRange reads the keys of records [a, b) for fill, in as many reads
// as segment boundaries take.
func readRange(ctx context.Context, p *Partition, a, b int64) fillChunk {
	c := fillChunk{from: a, next: a}
	var releases []func()
	c.release = func() {
		for _, r := range releases {
			r()
		}
	}
	for c.next < b {
		recs, next, release, err := p.readKeys(ctx, c.next, b)
		if err != nil {
			c.err = err
			c.release()
			c.release = nil
			return c
		}
		releases = append(releases, release)
		if c.recs == nil {
			c.recs = recs
		} else {
			c.recs = append(c.recs, recs...)
		}
		if next <= c.next {
			break // the log is shorter than b (cannot happen below the high watermark)
		}
		c.next = next
	}
	return c
}

// applyChunk indexes one chunk of records.
func (kv *kvIndex) applyChunk(kp *kvPart, c fillChunk, limit int64, gen uint64, progress *atomic.Int64) error {
	p := kp.p
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if kv.closed {
		return errKVClosed
	}
	if kv.gen != gen {
		return errKVSwapped
	}
	if c.from > kp.applied && c.from > p.LogStart() {
		// Unreachable while reads start at the checkpoint; refuse rather
		// than leave a hole.
		return fmt.Errorf("catch-up read at %d past checkpoint %d", c.from, kp.applied)
	}
	compacted := p.t.Compacted()
	end := c.next
	if limit >= 0 {
		end = min(end, limit)
	}
	if end <= kp.applied {
		return nil // the hook got there first
	}
	b := kv.ix.NewBatch()
	defer b.Close()
	n := 0
	for i := range c.recs {
		r := &c.recs[i]
		if r.Offset < kp.applied || r.Offset >= end {
			continue
		}
		if err := applyRecord(b, p.t.id, p.id, compacted, r); err != nil {
			return err
		}
		n++
	}
	if err := kv.commit(b, kp, end); err != nil {
		return err
	}
	if progress != nil {
		progress.Add(int64(n))
	}
	return nil
}

// waitReady waits until every partition of kt has caught up.
func (kt *kvTopic) waitReady(ctx context.Context) error {
	for _, kp := range kt.partitions() {
		kp.mu.Lock()
		ch := kp.ready
		kp.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			kp.mu.Lock()
			behind := kp.p.HighWatermark() - kp.applied
			kp.mu.Unlock()
			return fmt.Errorf("%w: partition %d of %s is catching up (%d records behind)", ErrKVUnavailable, kp.p.id, kt.t.name, behind)
		}
	}
	return nil
}

// kvTopicFor resolves a topic name for the KV view.
func (e *Engine) kvTopicFor(name string) (*kvTopic, error) {
	if e.kv == nil {
		return nil, ErrKVDisabled
	}
	t := e.Topic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if t.Internal() {
		return nil, fmt.Errorf("%w: %q is internal", ErrKVNotIndexed, name)
	}
	if !t.indexed() {
		return nil, fmt.Errorf("%w: %q has cleanup.policy=%s; set cleanup.policy=compact or korvet.index.enable=true to index it", ErrKVNotIndexed, name, t.ConfigValue("cleanup.policy"))
	}
	return e.kv.topic(t)
}

// KVGet returns the latest record of key in topic. Errors: ErrKVDisabled,
// ErrUnknownTopic, ErrKVNotIndexed, ErrKVNotFound (never written, or
// deleted by a tombstone), ErrKVGone (removed by retention),
// ErrKVUnavailable (the index could not answer within its budget). It never
// returns a record that does not carry key: a pointer that no longer
// matches the log is looked up again until the budget runs out.
func (e *Engine) KVGet(ctx context.Context, topic string, key []byte) (KVRecord, error) {
	kt, err := e.kvTopicFor(topic)
	if err != nil {
		return KVRecord{}, err
	}
	rec, outcome, err := e.kv.get(ctx, kt, key)
	kt.reads[outcome].Add(1)
	return rec, err
}

func (kv *kvIndex) get(ctx context.Context, kt *kvTopic, key []byte) (KVRecord, int, error) {
	t := kt.t
	ctx, cancel := context.WithTimeout(ctx, kv.opts.StaleBudget)
	defer cancel()
	var last index.Pointer
	backoff := time.Millisecond
	for attempt := 0; ; attempt++ {
		ptr, ok, ready, err := kv.lookupReady(kt, key)
		if err != nil {
			return KVRecord{}, outcomeError, fmt.Errorf("%w: %v", ErrKVUnavailable, err)
		}
		if !ready {
			if err := kt.waitReady(ctx); err != nil {
				return KVRecord{}, outcomeStale, err
			}
			continue
		}
		if !ok {
			return KVRecord{}, outcomeMiss, fmt.Errorf("%w: never written to %s", ErrKVNotFound, t.name)
		}
		if ptr.Tombstone {
			return KVRecord{}, outcomeMiss, fmt.Errorf("%w: deleted by a tombstone at partition %d offset %d", ErrKVNotFound, ptr.Partition, ptr.Offset)
		}
		p := t.Partition(ptr.Partition)
		if p == nil {
			return KVRecord{}, outcomeError, fmt.Errorf("%w: pointer to partition %d, which %s does not have", ErrKVUnavailable, ptr.Partition, t.name)
		}
		if start := p.LogStart(); ptr.Offset < start {
			return KVRecord{}, outcomeGone, fmt.Errorf("%w: partition %d offset %d is below the log start %d", ErrKVGone, ptr.Partition, ptr.Offset, start)
		}
		rec, found, err := readKey(ctx, p, ptr.Offset, key)
		switch {
		case found:
			return rec, outcomeHit, nil
		case errors.Is(err, ErrOffsetOutOfRange) && ptr.Offset < p.LogStart():
			return KVRecord{}, outcomeGone, fmt.Errorf("%w: partition %d offset %d is below the log start %d", ErrKVGone, ptr.Partition, ptr.Offset, p.LogStart())
		case err != nil && ctx.Err() == nil:
			return KVRecord{}, outcomeError, fmt.Errorf("%w: %v", ErrKVUnavailable, err)
		}
		// The pointer is stale (compaction removed the record after a
		// newer one was indexed, or the log changed under the index):
		// look again, waiting a little if the index has not moved.
		if attempt > 0 && ptr == last {
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 50*time.Millisecond)
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return KVRecord{}, outcomeStale, fmt.Errorf("%w: the record at partition %d offset %d no longer carries the key and the index did not move within %v", ErrKVUnavailable, ptr.Partition, ptr.Offset, kv.opts.StaleBudget)
		}
		last = ptr
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

// lookupReady reads a pointer if every partition of kt has caught up:
// checked under the same lock as the read, so that an online rebuild's
// swap (which leaves partitions catching up) cannot come in between.
func (kv *kvIndex) lookupReady(kt *kvTopic, key []byte) (p index.Pointer, ok, ready bool, err error) {
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return p, false, false, errKVClosed
	}
	if !kt.caughtUp() {
		return p, false, false, nil
	}
	p, ok, err = kv.ix.Get(kt.t.id, key)
	return p, ok, true, err
}

// readKey reads the record at offset and returns it if it is there and
// carries key.
func readKey(ctx context.Context, p *Partition, offset int64, key []byte) (KVRecord, bool, error) {
	res, err := p.Read(ctx, offset, 1)
	if err != nil {
		return KVRecord{}, false, err
	}
	defer res.Release()
	if len(res.Records) == 0 {
		return KVRecord{}, false, nil
	}
	r := &res.Records[0]
	if r.Offset != offset || r.Key == nil || !bytes.Equal(r.Key, key) {
		return KVRecord{}, false, nil
	}
	if r.Value == nil {
		// A tombstone the index has not seen yet: the key is deleted,
		// and the re-resolve will say so once it has.
		return KVRecord{}, false, nil
	}
	out := KVRecord{TopicID: p.t.id, Partition: p.id, Offset: r.Offset, Timestamp: r.Timestamp, Value: bytes.Clone(r.Value)}
	if len(r.Headers) > 0 {
		out.Headers = make([]record.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = record.Header{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)}
		}
	}
	return out, true, nil
}

// KVStats describes the key index.
type KVStats struct {
	Enabled   bool           `json:"enabled"`
	Dir       string         `json:"dir,omitempty"`
	DiskBytes uint64         `json:"disk_bytes"`
	Reads     KVReads        `json:"reads"`
	Topics    []KVTopicStats `json:"topics"`
}

// KVTopicStats describes one indexed topic.
type KVTopicStats struct {
	Topic     string `json:"topic"`
	Compacted bool   `json:"compacted"`
	Ready     bool   `json:"ready"` // every partition caught up
	// Keys and Tombstones are as of KeysCountedAt (counting scans the
	// index, so it is refreshed in the background).
	Keys          int64              `json:"keys"`
	Tombstones    int64              `json:"tombstones"`
	KeysCountedAt time.Time          `json:"keys_counted_at"`
	DiskBytes     uint64             `json:"disk_bytes"` // estimate
	Partitions    []KVPartitionStats `json:"partitions"`
	Reads         KVReads            `json:"reads"`
	Compaction    KVCompactionStats  `json:"compaction"`
}

// KVPartitionStats is one partition's indexing progress.
type KVPartitionStats struct {
	Partition     int32  `json:"partition"`
	Checkpoint    int64  `json:"checkpoint"` // offsets below are indexed
	HighWatermark int64  `json:"high_watermark"`
	LogStart      int64  `json:"log_start"`
	Lag           int64  `json:"lag"` // records not yet indexed
	Ready         bool   `json:"ready"`
	Error         string `json:"error,omitempty"`
}

// KVStats returns figures for every indexed topic (cached key counts).
func (e *Engine) KVStats() KVStats {
	kv := e.kv
	if kv == nil {
		return KVStats{}
	}
	s := KVStats{Enabled: true, Dir: kv.opts.Dir, Topics: []KVTopicStats{}}
	_ = kv.use(func(ix *index.Index) error {
		s.DiskBytes = ix.DiskSize()
		return nil
	})
	kv.mu.RLock()
	kts := make([]*kvTopic, 0, len(kv.topics))
	for _, kt := range kv.topics {
		kts = append(kts, kt)
	}
	kv.mu.RUnlock()
	sort.Slice(kts, func(i, j int) bool { return kts[i].t.name < kts[j].t.name })
	for _, kt := range kts {
		ts := kv.topicStats(kt)
		s.Topics = append(s.Topics, ts)
		s.Reads.Hit += ts.Reads.Hit
		s.Reads.Miss += ts.Reads.Miss
		s.Reads.Gone += ts.Reads.Gone
		s.Reads.Stale += ts.Reads.Stale
		s.Reads.Error += ts.Reads.Error
	}
	return s
}

// KVTopicStats returns one topic's figures; with count it counts the keys
// now (a scan of the topic's index) rather than using the cached count.
func (e *Engine) KVTopicStats(ctx context.Context, topic string, count bool) (KVTopicStats, error) {
	kt, err := e.kvTopicFor(topic)
	if err != nil {
		return KVTopicStats{}, err
	}
	if count {
		if err := e.kv.count(ctx, kt); err != nil {
			return KVTopicStats{}, err
		}
	}
	return e.kv.topicStats(kt), nil
}

func (kv *kvIndex) topicStats(kt *kvTopic) KVTopicStats {
	t := kt.t
	s := KVTopicStats{
		Topic:      t.name,
		Compacted:  t.Compacted(),
		Ready:      true,
		Keys:       kt.keys.Load(),
		Tombstones: kt.tombs.Load(),
		Reads: KVReads{
			Hit: kt.reads[outcomeHit].Load(), Miss: kt.reads[outcomeMiss].Load(), Gone: kt.reads[outcomeGone].Load(),
			Stale: kt.reads[outcomeStale].Load(), Error: kt.reads[outcomeError].Load(),
		},
	}
	_ = kv.use(func(ix *index.Index) error {
		s.DiskBytes = ix.DiskUsage(t.id)
		return nil
	})
	if at := kt.countedAt.Load(); at > 0 {
		s.KeysCountedAt = time.UnixMilli(at)
	}
	for _, kp := range kt.partitions() {
		kp.mu.Lock()
		ps := KVPartitionStats{Partition: kp.p.id, Checkpoint: kp.applied, HighWatermark: kp.p.HighWatermark(), LogStart: kp.p.LogStart()}
		if kp.err != nil {
			ps.Error = kp.err.Error()
		}
		kp.mu.Unlock()
		ps.Lag = max(ps.HighWatermark-ps.Checkpoint, 0)
		ps.Ready = kp.isReady()
		s.Ready = s.Ready && ps.Ready
		s.Partitions = append(s.Partitions, ps)
	}
	kt.cmpMu.Lock()
	s.Compaction = kt.cmp
	kt.cmpMu.Unlock()
	return s
}

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

// KVReady reports whether the index has caught up with the log of every
// indexed topic (always true without an index).
func (e *Engine) KVReady() bool {
	if e.kv == nil {
		return true
	}
	e.kv.mu.RLock()
	defer e.kv.mu.RUnlock()
	for _, kt := range e.kv.topics {
		if !kt.caughtUp() {
			return false
		}
	}
	return true
}

// RebuildOptions configure RebuildIndex.
type RebuildOptions struct {
	// Topics are the indexed topics to load; empty means all of them.
	Topics []string
	// Upto, when set, gives the offset (exclusive) a partition is loaded
	// up to instead of its high watermark; ok false skips the partition.
	Upto func(topic string, partition int32) (next int64, ok bool)
	// Progress, when set, is called about every second and at the end.
	Progress func(RebuildProgress)
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

// RebuildIndex loads ix from the log of indexed topics, from each
// partition's checkpoint in ix (the log start for a fresh index) to its
// high watermark as of the call. The engine should run without a live
// index (korvet index rebuild opens one for this).
func (e *Engine) RebuildIndex(ctx context.Context, ix *index.Index, o RebuildOptions) (RebuildResult, error) {
	start := time.Now()
	var topics []*Topic
	if len(o.Topics) == 0 {
		for _, t := range e.Topics() {
			if t.indexed() {
				topics = append(topics, t)
			}
		}
	} else {
		for _, name := range o.Topics {
			t := e.Topic(name)
			if t == nil {
				return RebuildResult{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
			}
			if !t.indexed() {
				return RebuildResult{}, fmt.Errorf("%w: %q", ErrKVNotIndexed, name)
			}
			topics = append(topics, t)
		}
	}
	kv := newKVIndex(e, ix, IndexOptions{})
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
			to := kp.p.HighWatermark()
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
			applied := kp.applied
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
	err := kv.fillAll(ctx, parts, func(kp *kvPart) int64 { return targets[kp] }, &records)
	close(stop)
	wg.Wait()
	report(true)
	if err == nil {
		err = ctx.Err()
	}
	return RebuildResult{Topics: len(topics), Partitions: len(parts), Records: records.Load(), Elapsed: time.Since(start)}, err
}

// IndexDiff is one key on which the index and the log disagree. A nil
// pointer means "absent".
type IndexDiff struct {
	Topic string
	Key   []byte
	Index *index.Pointer // what the index says
	Log   *index.Pointer // what the log says
}

// VerifyResult sums up a verification.
type VerifyResult struct {
	Topics int
	Keys   int64 // keys compared
	Diffs  int64
	// Notes are findings other than key differences: checkpoints behind
	// the log, topics the index holds that are gone.
	Notes []string
}

// VerifyIndex compares ix with the log: it loads a fresh index in
// scratchDir from the log up to ix's checkpoints and reports every key on
// which the two differ.
func (e *Engine) VerifyIndex(ctx context.Context, ix *index.Index, scratchDir string, topics []string, report func(IndexDiff)) (VerifyResult, error) {
	var res VerifyResult
	ref, err := index.Open(scratchDir, index.Options{Bulk: true, Logger: e.log})
	if err != nil {
		return res, err
	}
	defer ref.Close()
	ids, err := ix.Topics()
	if err != nil {
		return res, err
	}
	for _, id := range ids {
		if t := e.TopicByID(id); t == nil || !t.indexed() {
			res.Notes = append(res.Notes, fmt.Sprintf("the index holds keys of topic id %x, which is gone or no longer indexed (korvet drops them at start)", id))
		}
	}
	upto := func(topic string, partition int32) (int64, bool) {
		t := e.Topic(topic)
		next, ok, err := ix.Checkpoint(t.id, partition)
		if err != nil || !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("%s/%d: never indexed", topic, partition))
			return 0, true
		}
		if hw := t.Partition(partition).HighWatermark(); next < hw {
			res.Notes = append(res.Notes, fmt.Sprintf("%s/%d: checkpoint %d is %d records behind the log (korvet catches up at start); compared up to the checkpoint", topic, partition, next, hw-next))
		}
		return next, true
	}
	if _, err := e.RebuildIndex(ctx, ref, RebuildOptions{Topics: topics, Upto: upto}); err != nil {
		return res, err
	}
	var ts []*Topic
	if len(topics) == 0 {
		for _, t := range e.Topics() {
			if t.indexed() {
				ts = append(ts, t)
			}
		}
	} else {
		for _, name := range topics {
			ts = append(ts, e.Topic(name))
		}
	}
	for _, t := range ts {
		res.Topics++
		if err := compareTopic(t, ix, ref, &res, report); err != nil {
			return res, err
		}
	}
	return res, nil
}

// compareTopic merges the two indexes' key orders.
func compareTopic(t *Topic, ix, ref *index.Index, res *VerifyResult, report func(IndexDiff)) error {
	a, err := ix.NewIter(t.id)
	if err != nil {
		return err
	}
	b, err := ref.NewIter(t.id)
	if err != nil {
		a.Close()
		return err
	}
	okA, okB := a.Next(), b.Next()
	diff := func(key []byte, pa, pb *index.Pointer) {
		res.Diffs++
		if report != nil {
			report(IndexDiff{Topic: t.name, Key: bytes.Clone(key), Index: pa, Log: pb})
		}
	}
	for okA || okB {
		res.Keys++
		c := 0
		switch {
		case !okA:
			c = 1
		case !okB:
			c = -1
		default:
			c = bytes.Compare(a.Key(), b.Key())
		}
		switch c {
		case 0:
			if pa, pb := a.Pointer(), b.Pointer(); pa != pb {
				diff(a.Key(), &pa, &pb)
			}
			okA, okB = a.Next(), b.Next()
		case -1:
			pa := a.Pointer()
			diff(a.Key(), &pa, nil)
			okA = a.Next()
		default:
			pb := b.Pointer()
			diff(b.Key(), nil, &pb)
			okB = b.Next()
		}
	}
	errA, errB := a.Close(), b.Close()
	if errA != nil {
		return errA
	}
	return errB
}

// keyScanCount is how many entries one catch-up read asks Redis for.
const keyScanCount = 10000

// hasValue stands for a record's value in what readKeys returns:
// indexing needs to know only whether a record is a tombstone.
var hasValue = []byte{}

// readKeys reads, for indexing, the records at or after from and below to
// (up to keyScanCount of them): offsets, keys, and Value nil for a
// tombstone or hasValue otherwise. next is the offset after the range the
// read covered. A local segment is read with one XRANGE whose reply is
// walked once, skipping the values (a rebuild is bound by this loop); an
// archived segment goes through Read. release frees the records' bytes.
func (p *Partition) readKeys(ctx context.Context, from, to int64) (recs []record.Record, next int64, release func(), err error) {
	hw, start := p.hw.Load(), p.start.Load()
	to = min(to, hw)
	if from < start {
		return nil, 0, nil, fmt.Errorf("%w: %d below the log start %d", ErrOffsetOutOfRange, from, start)
	}
	if from >= to {
		return nil, from, func() {}, nil
	}
	p.mu.Lock()
	segs := p.segs
	p.mu.Unlock()
	seg, end := int64(0), to-1
	if len(segs) > 0 {
		i := segmentFor(segs, from)
		if i < 0 || !segs[i].Local {
			return p.readKeysVia(ctx, from, to)
		}
		seg = segs[i].ID
		if i < len(segs)-1 {
			end = min(end, segs[i+1].Base-1)
		}
	}
	var pl resp.Pipeline
	pl.Cmd("XRANGE", p.streamKey(seg), from, end, "COUNT", keyScanCount)
	rs, err := p.t.e.rc.Exec(ctx, &pl)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%w: read %s/%d at %d: %v", ErrStorageUnavailable, p.t.name, p.id, from, err)
	}
	rep := rs.At(0)
	if err := rep.Err(); err != nil {
		rs.Release()
		return nil, 0, nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, from, err)
	}
	recs, err = parseKeyEntries(rep.Raw, make([]record.Record, 0, min(keyScanCount, end-from+1)))
	if err != nil {
		rs.Release()
		return nil, 0, nil, fmt.Errorf("read %s/%d at %d: %w", p.t.name, p.id, from, err)
	}
	next = end + 1
	if n := len(recs); n > 0 {
		next = recs[n-1].Offset + 1
	}
	return recs, next, rs.Release, nil
}

// readKeysVia is readKeys through Read, for segments not in Redis.
func (p *Partition) readKeysVia(ctx context.Context, from, to int64) ([]record.Record, int64, func(), error) {
	res, err := p.Read(ctx, from, 8<<20)
	if err != nil {
		return nil, 0, nil, err
	}
	recs := res.Records
	next := to
	for i := range recs {
		if recs[i].Offset >= to {
			recs = recs[:i]
			break
		}
	}
	if n := len(recs); n > 0 && n == len(res.Records) {
		next = recs[n-1].Offset + 1
	}
	return recs, next, res.Release, nil
}

// parseKeyEntries walks the raw RESP2 reply of XRANGE (an array of [id,
// [field, value, ...]]) and appends one record per entry: offset, key,
// and whether it has a value (see the entry package for the fields).
func parseKeyEntries(b []byte, recs []record.Record) ([]record.Record, error) {
	n, b, err := respHeader(b, '*')
	if err != nil {
		return recs, err
	}
	for range n {
		var two, nf int
		var id, name, val []byte
		if two, b, err = respHeader(b, '*'); err == nil && two != 2 {
			err = fmt.Errorf("stream entry of %d elements", two)
		}
		if err == nil {
			id, b, err = respBulk(b)
		}
		if err == nil {
			nf, b, err = respHeader(b, '*')
		}
		if err != nil {
			return recs, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
		}
		off, err := parseEntryID(id)
		if err != nil {
			return recs, err
		}
		rec := record.Record{Offset: off}
		for j := 0; j+1 < nf; j += 2 {
			if name, b, err = respBulk(b); err == nil {
				val, b, err = respBulk(b)
			}
			if err != nil {
				return recs, fmt.Errorf("%w: %v", entry.ErrMalformed, err)
			}
			switch {
			case string(name) == "__key":
				rec.Key = val
			case len(name) < 2 || name[0] != '_' || name[1] != '_' || string(name) == "__value":
				rec.Value = hasValue
			}
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// respHeader reads "<kind><n>\r\n".
func respHeader(b []byte, kind byte) (int, []byte, error) {
	if len(b) < 4 || b[0] != kind {
		return 0, b, fmt.Errorf("want %q in the XRANGE reply", kind)
	}
	n := 0
	i := 1
	for ; i < len(b) && b[i] != '\r'; i++ {
		c := b[i]
		if c < '0' || c > '9' || n > 1<<40 {
			return 0, b, errors.New("bad length in the XRANGE reply")
		}
		n = n*10 + int(c-'0')
	}
	if i+1 >= len(b) || b[i+1] != '\n' {
		return 0, b, errors.New("truncated XRANGE reply")
	}
	return n, b[i+2:], nil
}

// respBulk reads "$<n>\r\n<n bytes>\r\n"; the bytes are never nil.
func respBulk(b []byte) ([]byte, []byte, error) {
	n, b, err := respHeader(b, '$')
	if err != nil {
		return nil, b, err
	}
	if len(b) < n+2 {
		return nil, b, errors.New("truncated XRANGE reply")
	}
	return b[:n:n], b[n+2:], nil
}

// KVRebuildState describes the online rebuilds of the index.
type KVRebuildState struct {
	Running  bool            `json:"running"`
	Progress RebuildProgress `json:"progress"`
	Last     time.Time       `json:"last,omitzero"` // end of the last one
	LastErr  string          `json:"last_error,omitempty"`
}

// KVRebuild returns the state of online rebuilds.
func (e *Engine) KVRebuild() KVRebuildState {
	if e.kv == nil {
		return KVRebuildState{}
	}
	e.kv.rebuildMu.Lock()
	defer e.kv.rebuildMu.Unlock()
	return e.kv.rebuild
}

// StartIndexRebuild starts RebuildIndexOnline in the background; it fails
// when there is no index or a rebuild is running.
func (e *Engine) StartIndexRebuild() error {
	kv := e.kv
	if kv == nil {
		return ErrKVDisabled
	}
	kv.rebuildMu.Lock()
	defer kv.rebuildMu.Unlock()
	if kv.rebuild.Running {
		return errors.New("an index rebuild is already running")
	}
	kv.rebuild.Running = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_, _ = e.rebuildOnline(e.bg)
	}()
	return nil
}

// RebuildIndexOnline rebuilds the live index from the log while it keeps
// serving: it loads a fresh index next to it ({dir}.rebuild) up to the
// high watermarks, loads it again up to where the log got meanwhile, then
// swaps it in: appends and reads wait for the few milliseconds the swap
// takes, and the partitions catch up from the new checkpoints (reads wait
// for that, within their budget). Compaction waits until it is done.
func (e *Engine) RebuildIndexOnline(ctx context.Context) (RebuildResult, error) {
	kv := e.kv
	if kv == nil {
		return RebuildResult{}, ErrKVDisabled
	}
	kv.rebuildMu.Lock()
	if kv.rebuild.Running {
		kv.rebuildMu.Unlock()
		return RebuildResult{}, errors.New("an index rebuild is already running")
	}
	kv.rebuild.Running = true
	kv.rebuildMu.Unlock()
	return e.rebuildOnline(ctx)
}

func (e *Engine) rebuildOnline(ctx context.Context) (res RebuildResult, err error) {
	kv := e.kv
	defer func() {
		kv.rebuildMu.Lock()
		kv.rebuild.Running, kv.rebuild.Last, kv.rebuild.LastErr = false, time.Now(), ""
		if err != nil {
			kv.rebuild.LastErr = err.Error()
		}
		kv.rebuildMu.Unlock()
		if err != nil {
			kv.log.Warn("key index rebuild failed; the index in use is unchanged", "err", err)
		} else {
			kv.log.Info("key index rebuilt", "records", res.Records, "took", res.Elapsed)
		}
	}()
	kv.compactMu.Lock()
	defer kv.compactMu.Unlock()
	start := time.Now()
	dir := kv.opts.Dir
	tmp, old := dir+".rebuild", dir+".old"
	if err := os.RemoveAll(tmp); err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	nix, err := index.Open(tmp, index.Options{Bulk: true, Logger: e.log})
	if err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	lastLog := time.Now()
	progress := func(p RebuildProgress) {
		kv.rebuildMu.Lock()
		kv.rebuild.Progress = p
		kv.rebuildMu.Unlock()
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			kv.log.Info("key index rebuild", "records", p.Records, "done", p.Done, "of", p.Total)
		}
	}
	kv.log.Info("key index rebuild started", "dir", tmp)
	res, err = e.RebuildIndex(ctx, nix, RebuildOptions{Progress: progress})
	if err == nil {
		// What came in meanwhile, so that the swap leaves little to catch up.
		var more RebuildResult
		more, err = e.RebuildIndex(ctx, nix, RebuildOptions{})
		res.Records += more.Records
	}
	if cerr := nix.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return res, fmt.Errorf("rebuild: %w", err)
	}

	kv.closeMu.Lock()
	err = kv.swap(dir, tmp, old)
	kv.closeMu.Unlock()
	kv.nudge()
	_ = os.RemoveAll(old)
	_ = os.RemoveAll(tmp)
	res.Elapsed = time.Since(start)
	return res, err
}

// swap replaces the open index with the one in tmp; kv.closeMu must be
// held exclusively. On failure it puts the old one back.
func (kv *kvIndex) swap(dir, tmp, old string) error {
	if kv.closed {
		return errKVClosed
	}
	opts := index.Options{CacheSize: kv.opts.CacheSize, Logger: kv.log}
	if err := kv.ix.Close(); err != nil {
		kv.log.Warn("close the replaced key index", "err", err)
	}
	_ = os.RemoveAll(old)
	err := os.Rename(dir, old)
	if err == nil {
		if err = os.Rename(tmp, dir); err != nil {
			_ = os.Rename(old, dir)
		}
	}
	ix, oerr := index.Open(dir, opts)
	if oerr != nil {
		kv.closed = true // nothing to serve from; a restart rebuilds
		return fmt.Errorf("rebuild: reopen the index: %w", oerr)
	}
	kv.ix = ix
	kv.gen++
	if err != nil {
		// The old index is back; its checkpoints still hold.
		return fmt.Errorf("rebuild: swap directories: %w", err)
	}
	// Every partition restarts from the new index's checkpoint.
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	for _, kt := range kv.topics {
		kt.mu.Lock()
		for _, kp := range kt.parts {
			kp.mu.Lock()
			next, ok, cerr := ix.Checkpoint(kt.t.id, kp.p.id)
			if !ok || cerr != nil {
				next = 0
			}
			kp.applied = next
			if next < kp.p.HighWatermark() {
				kp.setLagging()
			} else {
				kp.setReady()
			}
			kp.mu.Unlock()
		}
		kt.dirty.Store(true)
		kt.mu.Unlock()
	}
	return nil
}
