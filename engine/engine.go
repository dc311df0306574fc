// Package engine is the broker's state: topics, partitions and their logs
// on Redis Streams, offsets and retention. It knows records, not the Kafka
// wire format, and talks to Redis only through package resp.
package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/engine/txn"
	"github.com/korvet/korvet/resp"
)

// Options configure an Engine.
type Options struct {
	Keyspace          string            // prefix of every Redis key; default "korvet"
	AutoCreateTopics  bool              // create unknown topics on Metadata/Produce
	DefaultPartitions int32             // partitions of auto-created topics; default 1
	TopicDefaults     map[string]string // broker-level defaults for topic configs
	// WaitReplicas is how many Redis replicas must have an append before
	// an append made with AppendBatchAcks(..., true) (acks=all) is
	// acknowledged; 0 does not wait. WaitTimeout bounds the wait
	// (default 1s).
	WaitReplicas int
	WaitTimeout  time.Duration
	// MaxAppendBytes caps the records one Redis transaction carries, so that
	// one huge group commit cannot stall Redis for long. Default 1 MiB:
	// with rounds in flight one behind the other, bigger ones gain nothing,
	// and Redis spent about 12% more CPU per record on kcat's requests
	// merged into 4 MiB rounds (~40,000 queued commands per MULTI).
	MaxAppendBytes int
	// Cold is the cold tier: sealed segments of topics with
	// remote.storage.enable=true are archived there. nil: no tiering.
	Cold *cold.Store
	// TieringInterval is how often the archiving worker looks for sealed
	// segments. Default 2s.
	TieringInterval time.Duration
	// ArchiveMemory bounds what the archiving worker holds: the segments
	// it reads from Redis and the files it writes (it archives fewer at
	// once when they would take more, one at the least). Default
	// DefaultArchiveMemory.
	ArchiveMemory int64
	// Index configures the KV view's key index and compaction (kv.go).
	Index IndexOptions
	// RetentionInterval is how often retention is checked. Default 5s.
	RetentionInterval time.Duration
	// MemorySampleInterval is how often the memory sampler (memory.go)
	// measures what the partitions this broker leads take in Redis.
	// Default DefaultMemorySampleInterval; negative turns it off.
	MemorySampleInterval time.Duration
	// TxnResolveInterval is how often a leader checks its partitions'
	// open transactions against the coordinator's state (see
	// resolveTxns). Default DefaultTxnResolveInterval.
	TxnResolveInterval time.Duration
	// GroupInitialRebalanceDelay is how long a consumer group's first
	// rebalance waits for more members (Kafka's
	// group.initial.rebalance.delay.ms). Default 3s; negative means none.
	GroupInitialRebalanceDelay time.Duration
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts group members may use. Defaults 6s and 30 min, as in Kafka.
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// GroupCleanupInterval is how often groups left Empty without
	// committed offsets are removed (Kafka's
	// offsets.retention.check.interval.ms). Default 10 min.
	GroupCleanupInterval time.Duration
	// Transactions configure the transaction coordinator (txn.go).
	Transactions TxnOptions
	// Share configures share groups (share.go).
	Share ShareOptions
	// ConsumerGroups configure KIP-848 consumer groups; the engine fills
	// in Topics.
	ConsumerGroups group.ConsumerOptions
	Logger         *slog.Logger

	// MaxPartitionsPerTopic and MaxPartitions cap the partitions of one
	// topic and of all topics together; creating past them is refused
	// before anything is written. Defaults 1000 and 10000.
	MaxPartitionsPerTopic int32
	MaxPartitions         int

	// NodeID is this broker's kafka.node_id, unique among the brokers on
	// one Redis and keyspace; Rack its kafka.rack; Listeners its Kafka
	// listeners as clients reach them. LeaseTime is how long a broker
	// that stops renewing its lease stays live (brokers.go).
	NodeID    int32
	Rack      string
	Listeners []ListenerAddr
	LeaseTime time.Duration
	// LeaseFile, when set, is a file (in data_dir) where the broker keeps
	// its lease token, so that a restart after a crash takes over its
	// own lapsed-to-be lease at once instead of waiting it out.
	LeaseFile string
}

// kvReadLanes is how many round trips of KV reads may be on the wire at
// once (resp.Batcher).
const kvReadLanes = 1

// Engine holds all topics. Create it with Open; it is safe for concurrent use.
type Engine struct {
	rc *resp.Client
	// reads sends the KV view's one-record reads, so that concurrent
	// reads share round trips (readAt).
	reads   *resp.Batcher
	opts    Options
	k       keys.Space
	log     *slog.Logger
	cluster string

	mu     sync.RWMutex
	topics map[string]*Topic
	byID   map[[16]byte]*Topic

	// createMu serializes topic creation and deletion; the read path never
	// takes it.
	createMu sync.Mutex

	groups     *group.Coordinator
	txns       *txn.Coordinator
	share      *share.Coordinator
	shareParts shareState
	kv         KV
	events     *events.Bus
	txnRes     txnResolver
	started    time.Time
	cl         cluster // membership and leadership (cluster*.go)

	// bg is the context of background work; Close cancels it.
	bg     context.Context
	stopBg context.CancelFunc

	tier     tiering
	mem      memSampler
	zstdWake chan struct{} // zstd.go's dictionary loop
	wg       sync.WaitGroup

	// flushers tracks the partitions' flush loops, so that Close can wait
	// for them; closed (under flushMu) stops new ones from starting.
	flushMu  sync.Mutex
	closed   bool
	flushers sync.WaitGroup
	// windows are idle flush windows with their buffers: a flush loop
	// ends whenever its partition's queue is empty, and the next one
	// takes a window here instead of growing new buffers.
	windows sync.Pool

	redisCache redisStatusCache // status_redis.go
}

// Open loads the topics stored in Redis and starts background work
// (retention). Close stops it.
func Open(ctx context.Context, rc *resp.Client, opts Options) (*Engine, error) {
	if opts.Keyspace == "" {
		opts.Keyspace = keys.Default
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = time.Second
	}
	if opts.DefaultPartitions <= 0 {
		opts.DefaultPartitions = 1
	}
	if opts.MaxAppendBytes <= 0 {
		opts.MaxAppendBytes = 1 << 20
	}
	if opts.MaxPartitionsPerTopic <= 0 {
		opts.MaxPartitionsPerTopic = 1000
	}
	if opts.MaxPartitions <= 0 {
		opts.MaxPartitions = 10000
	}
	if opts.TxnResolveInterval <= 0 {
		opts.TxnResolveInterval = DefaultTxnResolveInterval
	}
	if opts.MemorySampleInterval == 0 {
		opts.MemorySampleInterval = DefaultMemorySampleInterval
	}
	if opts.RetentionInterval <= 0 {
		opts.RetentionInterval = 5 * time.Second
	}
	if opts.ArchiveMemory <= 0 {
		opts.ArchiveMemory = DefaultArchiveMemory
	}
	if opts.GroupInitialRebalanceDelay == 0 {
		opts.GroupInitialRebalanceDelay = 3 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := ValidateConfigs(opts.TopicDefaults); err != nil {
		return nil, fmt.Errorf("topic_defaults: %w", err)
	}
	e := &Engine{
		rc:     rc,
		reads:  resp.NewBatcher(rc, kvReadLanes),
		opts:   opts,
		k:      keys.New(opts.Keyspace, rc.IsCluster()),
		log:    opts.Logger,
		topics: make(map[string]*Topic),
		byID:   make(map[[16]byte]*Topic),

		zstdWake: make(chan struct{}, 1),
	}
	e.started = time.Now()
	e.events = events.New(rc, e.k.Events(), opts.NodeID, opts.Logger)
	e.bg, e.stopBg = context.WithCancel(context.WithoutCancel(ctx))
	// Events are read from here on: a change another broker makes while
	// this one loads its state is reloaded again, never missed.
	if err := e.events.Prime(ctx); err != nil {
		return nil, err
	}
	e.cl = cluster{lease: cmp.Or(opts.LeaseTime, DefaultLeaseTime), wake: make(chan struct{}, 1)}
	e.txnRes.wake = make(chan struct{}, 1)
	if err := e.loadCluster(ctx); err != nil {
		return nil, err
	}
	if err := e.register(ctx, true); err != nil {
		return nil, err
	}
	opened := false
	defer func() {
		if !opened {
			e.releaseLease()
		}
	}()
	if err := e.refreshLive(ctx); err != nil {
		return nil, err
	}
	e.subscribeCluster()
	e.subscribeTxn()
	if err := e.loadTopics(ctx); err != nil {
		return nil, err
	}
	if err := e.ensureInternalTopics(ctx); err != nil {
		return nil, err
	}
	// Lead what this broker should before serving: a single broker leads
	// every partition when Open returns.
	if err := e.checkLeadership(ctx); err != nil {
		return nil, err
	}
	groups, err := group.Open(ctx, rc, group.Options{
		Keyspace:              opts.Keyspace,
		InitialRebalanceDelay: opts.GroupInitialRebalanceDelay,
		MinSessionTimeout:     opts.GroupMinSessionTimeout,
		MaxSessionTimeout:     opts.GroupMaxSessionTimeout,
		CleanupInterval:       opts.GroupCleanupInterval,
		HighWatermark:         e.highWatermark,
		Logger:                opts.Logger,
		Consumer:              e.consumerGroupOptions(opts.ConsumerGroups),
		Owns:                  e.OwnsGroup,
		Announce: func(ctx context.Context, name string) error {
			return e.events.Publish(ctx, events.GroupOffsets, "group", name)
		},
	})
	if err != nil {
		return nil, err
	}
	e.groups = groups
	if err := e.openTxns(ctx); err != nil {
		groups.Close()
		return nil, err
	}
	if err := e.openShare(ctx); err != nil {
		e.txns.Close()
		groups.Close()
		return nil, err
	}
	if err := e.openKV(ctx); err != nil {
		e.txns.Close()
		groups.Close()
		return nil, err
	}
	e.subscribeShared()
	// The event reader holds one pooled connection for good.
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.events.Run(e.bg)
	}()
	e.wg.Add(2)
	go e.renewLoop()
	go e.controlLoop()
	e.wg.Add(3)
	go e.retentionLoop()
	go e.txnResolveLoop()
	go e.zstdLoop()
	if opts.MemorySampleInterval > 0 {
		e.wg.Add(1)
		go e.memoryLoop()
	}
	if opts.Cold != nil {
		e.tier.wake = make(chan struct{}, 1)
		e.wg.Add(1)
		go e.tieringLoop()
	}
	opened = true
	return e, nil
}

// Close stops background work and waits for it: every background loop,
// the partitions' flush loops included, has returned when Close does.
// Appends still queued fail with ErrClosed; a server drains its requests
// before closing the engine, so there are none in normal operation.
func (e *Engine) Close() {
	ctx, cancel := context.WithTimeout(e.bg, 2*e.cl.lease)
	if err := e.Leave(ctx); err != nil {
		e.log.Warn("controlled shutdown incomplete; other brokers take over when the lease lapses", "err", err)
	}
	cancel()
	e.groups.Close()
	e.txns.Close()
	e.flushMu.Lock()
	e.closed = true
	e.flushMu.Unlock()
	e.stopBg()
	e.flushers.Wait()
	e.wg.Wait()
	e.closeKV()
}

// isClosed tells whether Close has begun stopping the flush loops.
func (e *Engine) isClosed() bool {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	return e.closed
}

// startFlusher counts a flush loop about to start; false once the engine
// is closed.
func (e *Engine) startFlusher() bool {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	if e.closed {
		return false
	}
	e.flushers.Add(1)
	return true
}

// Groups is the consumer group coordinator.
func (e *Engine) Groups() *group.Coordinator { return e.groups }

// highWatermark feeds the coordinator's lag figures.
func (e *Engine) highWatermark(topic string, partition int32) (int64, bool) {
	t := e.Topic(topic)
	if t == nil {
		return 0, false
	}
	p := t.Partition(partition)
	if p == nil {
		return 0, false
	}
	return p.HighWatermark(), true
}

// ClusterID is a stable id stored in Redis at first start.
func (e *Engine) ClusterID() string { return e.cluster }

// Keyspace returns the prefix of all of korvet's Redis keys.
func (e *Engine) Keyspace() string { return e.opts.Keyspace }

func (e *Engine) loadCluster(ctx context.Context) error {
	id := newID()
	if _, err := e.rc.Do(ctx, "HSETNX", e.k.Cluster(), "id", hex.EncodeToString(id[:])); err != nil {
		return fmt.Errorf("store cluster id: %w", err)
	}
	r, err := e.rc.Do(ctx, "HGET", e.k.Cluster(), "id")
	if err != nil {
		return fmt.Errorf("load cluster id: %w", err)
	}
	e.cluster = string(r.Bytes())
	return nil
}

// topicMeta is what Redis stores per topic.
type topicMeta struct {
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Created    int64             `json:"created"`
}

func (e *Engine) loadTopics(ctx context.Context) error {
	r, err := e.rc.Do(ctx, "HGETALL", e.k.Topics())
	if err != nil {
		return fmt.Errorf("load topics: %w", err)
	}
	var elems []resp.Reply
	elems = r.Elems(elems)
	for i := 0; i+1 < len(elems); i += 2 {
		name := string(elems[i].Bytes())
		var m topicMeta
		if err := json.Unmarshal(elems[i+1].Bytes(), &m); err != nil {
			return fmt.Errorf("load topic %q: bad metadata in %s: %w", name, e.k.Topics(), err)
		}
		t, err := e.newTopic(name, m)
		if err != nil {
			return fmt.Errorf("load topic %q: %w", name, err)
		}
		if err := t.loadPartitions(ctx, 0); err != nil {
			return fmt.Errorf("load topic %q: %w", name, err)
		}
		e.topics[name] = t
		e.byID[t.id] = t
	}
	e.log.Info("topics loaded", "count", len(e.topics))
	return nil
}

func newID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // a version 4 UUID, as Kafka's topic ids are
	id[8] = id[8]&0x3f | 0x80
	return id
}

// Topic returns the named topic, or nil.
func (e *Engine) Topic(name string) *Topic {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.topics[name]
}

// TopicByID returns the topic with the given id, or nil.
func (e *Engine) TopicByID(id [16]byte) *Topic {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.byID[id]
}

// Topics returns all topics sorted by name.
func (e *Engine) Topics() []*Topic {
	e.mu.RLock()
	out := make([]*Topic, 0, len(e.topics))
	for _, t := range e.topics {
		out = append(out, t)
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// AutoCreate reports whether unknown topics are created on use.
func (e *Engine) AutoCreate() bool { return e.opts.AutoCreateTopics }

// DefaultPartitions is the partition count of auto-created topics.
func (e *Engine) DefaultPartitions() int32 { return e.opts.DefaultPartitions }

// ValidTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func ValidTopicName(name string) error {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q; use letters, digits, '.', '_' and '-'", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// CreateTopic creates a topic. With validateOnly it only checks.
func (e *Engine) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, err
	}
	if partitions == -1 {
		partitions = e.opts.DefaultPartitions
	}
	if partitions <= 0 {
		return nil, fmt.Errorf("%w: %d (use at least 1)", ErrInvalidPartitions, partitions)
	}
	if err := ValidateConfigs(configs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	e.createMu.Lock()
	defer e.createMu.Unlock()
	if e.Topic(name) != nil {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	if name != offsetsTopic { // korvet's own, one partition
		if err := e.checkPartitionCaps(name, partitions, partitions); err != nil {
			return nil, err
		}
	}
	if validateOnly {
		return nil, nil
	}
	id := newID()
	m := topicMeta{ID: hex.EncodeToString(id[:]), Partitions: partitions, Configs: configs, Created: time.Now().UnixMilli()}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("create topic %q: %w", name, err)
	}
	r, err := e.rc.Do(ctx, "HSETNX", e.k.Topics(), name, js)
	if err != nil {
		return nil, fmt.Errorf("create topic %q: %w", name, err)
	}
	if n, _ := r.Int(); n == 0 {
		// Another broker created it and its event has not come yet: load
		// it now, so that EnsureTopic finds it.
		if err := e.reloadTopicLocked(ctx, name); err != nil {
			e.log.Warn("could not load a topic another broker created", "topic", name, "err", err)
		}
		return nil, fmt.Errorf("%w: %q (created by another korvet on this keyspace)", ErrTopicExists, name)
	}
	t, err := e.newTopic(name, m)
	if err != nil {
		return nil, err
	}
	if err := t.loadPartitions(ctx, 0); err != nil {
		return nil, fmt.Errorf("create topic %q: %w", name, err)
	}
	e.mu.Lock()
	e.topics[name] = t
	e.byID[t.id] = t
	e.mu.Unlock()
	if err := e.assignNew(ctx, t.Partitions()); err != nil {
		// The periodic check claims them.
		e.log.Warn("topic created; its partitions get a leader at the next check", "topic", name, "err", err)
	}
	e.log.Info("topic created", "topic", name, "partitions", partitions)
	e.partitionsChanged()
	e.topicsChanged()
	// The topic exists in Redis already; a broker that misses the event
	// finds it on its next reload.
	if err := e.events.Publish(ctx, events.Topic, "topic", name, "change", "created"); err != nil {
		e.log.Warn("topic created but other brokers were not told; they see it on their next reload", "topic", name, "err", err)
	}
	return t, nil
}

// checkPartitionCaps refuses a topic named name growing to count
// partitions, adding more to the broker, when that passes
// MaxPartitionsPerTopic or MaxPartitions. e.createMu must be held, so
// that the count cannot change before the caller creates them.
func (e *Engine) checkPartitionCaps(name string, count, more int32) error {
	if limit := e.opts.MaxPartitionsPerTopic; count > limit {
		return fmt.Errorf("%w: topic %s would have %d partitions, more than kafka.max_partitions_per_topic = %d", ErrPolicyViolation, name, count, limit)
	}
	total := 0
	for _, t := range e.Topics() {
		total += len(t.Partitions())
	}
	if limit := e.opts.MaxPartitions; total+int(more) > limit {
		return fmt.Errorf("%w: %d more partitions for topic %s would make %d on this broker, more than kafka.max_partitions = %d", ErrPolicyViolation, more, name, total+int(more), limit)
	}
	return nil
}

// DeleteTopic removes a topic and all its data from Redis.
func (e *Engine) DeleteTopic(ctx context.Context, name string) error {
	e.createMu.Lock()
	defer e.createMu.Unlock()
	// Start from Redis: the topic may have been created, deleted or
	// created again on another broker.
	if err := e.reloadTopicLocked(ctx, name); err != nil {
		return err
	}
	t := e.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if t.Internal() {
		return fmt.Errorf("%w: %s cannot be deleted", ErrInternalTopic, name)
	}
	e.mu.Lock()
	delete(e.topics, name)
	delete(e.byID, t.id)
	e.mu.Unlock()
	for _, p := range t.Partitions() {
		p.close()
	}
	var pl resp.Pipeline
	pl.Cmd("HDEL", e.k.Topics(), name)
	for _, p := range t.Partitions() {
		for _, sg := range p.Segments() {
			pl.Cmd("UNLINK", p.streamKey(sg.ID))
		}
		pl.Cmd("UNLINK", p.metaKey, p.batchesKey, p.segmentsKey, p.abortedKey, p.fenceKey)
	}
	pl.Cmd("UNLINK", e.k.ZstdDicts(name))
	if e.opts.Cold != nil {
		// The worker drops the topic's cold table (retrying while the
		// object store is down).
		pl.Cmd("SADD", e.k.ColdGarbage(), "drop\x00"+name+"\x00"+hex.EncodeToString(t.id[:]))
	}
	e.events.Append(&pl, events.Topic, "topic", name, "change", "deleted")
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	defer rs.Release()
	for i := 0; i < rs.Len(); i++ {
		if err := rs.At(i).Err(); err != nil {
			return fmt.Errorf("delete topic %q: %w", name, err)
		}
	}
	e.log.Info("topic deleted", "topic", name)
	return nil
}

// EnsureTopic returns the topic, creating it with defaults when
// auto-creation is on.
func (e *Engine) EnsureTopic(ctx context.Context, name string) (*Topic, error) {
	if t := e.Topic(name); t != nil {
		return t, nil
	}
	if !e.opts.AutoCreateTopics {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	t, err := e.CreateTopic(ctx, name, e.opts.DefaultPartitions, nil, false)
	if errors.Is(err, ErrTopicExists) {
		if t := e.Topic(name); t != nil {
			return t, nil
		}
	}
	return t, err
}

func (e *Engine) retentionLoop() {
	defer e.wg.Done()
	tick := time.NewTicker(e.opts.RetentionInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.bg.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(e.bg, time.Minute)
		for _, t := range e.Topics() {
			for _, p := range t.Partitions() {
				if !p.IsLeader() {
					continue // the leader rolls and trims it
				}
				p.rollIfIdle(time.Now())
				if err := p.applyRetention(ctx, time.Now()); err != nil {
					e.log.Warn("retention", "topic", t.name, "partition", p.id, "err", err)
				}
			}
		}
		cancel()
	}
}

// NewProducerID allocates a producer id, unique for the keyspace's life.
func (e *Engine) NewProducerID(ctx context.Context) (int64, error) {
	r, err := e.rc.Do(ctx, "HINCRBY", e.k.Cluster(), "producer_ids", 1)
	if err != nil {
		return -1, fmt.Errorf("%w: allocate producer id: %v", ErrStorageUnavailable, err)
	}
	return r.Int()
}

// Ping checks that Redis answers.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.rc.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
	}
	return nil
}

// consumerGroupOptions completes the consumer group options with the
// topics subscriptions resolve against: every topic, internal ones too,
// as Kafka's regex resolution does not skip them.
func (e *Engine) consumerGroupOptions(o group.ConsumerOptions) group.ConsumerOptions {
	o.Topics = func() []group.TopicMeta {
		ts := e.Topics()
		out := make([]group.TopicMeta, len(ts))
		for i, t := range ts {
			out[i] = group.TopicMeta{Name: t.Name(), ID: t.ID(), Partitions: int32(len(t.Partitions()))}
		}
		return out
	}
	return o
}
