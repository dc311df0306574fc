package engine

import (
	"context"
	"sort"
	"time"

	"github.com/korvet/korvet/engine/index"
)

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
	Partition     int32 `json:"partition"`
	Checkpoint    int64 `json:"checkpoint"` // offsets below are indexed
	HighWatermark int64 `json:"high_watermark"`
	// LastStable is the last stable offset: the index stops there while
	// a transaction is open (its first offset; else the high watermark).
	LastStable int64  `json:"last_stable"`
	LogStart   int64  `json:"log_start"`
	Lag        int64  `json:"lag"` // records below the LSO not yet indexed
	Ready      bool   `json:"ready"`
	Error      string `json:"error,omitempty"`
}

// Stats returns figures for every indexed topic (cached key counts).
func (k *KV) Stats() KVStats {
	kv := k.live
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

// TopicStats returns one topic's figures; with count it counts the keys
// now (a scan of the topic's index) rather than using the cached count.
func (k *KV) TopicStats(ctx context.Context, topic string, count bool) (KVTopicStats, error) {
	kt, err := k.topicFor(topic)
	if err != nil {
		return KVTopicStats{}, err
	}
	if count {
		if err := k.live.count(ctx, kt); err != nil {
			return KVTopicStats{}, err
		}
	}
	return k.live.topicStats(kt), nil
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
		ps := KVPartitionStats{Partition: kp.p.id, Checkpoint: kp.applied, HighWatermark: kp.p.HighWatermark(), LastStable: kp.p.kvTarget(), LogStart: kp.p.LogStart()}
		if kp.err != nil {
			ps.Error = kp.err.Error()
		}
		kp.mu.Unlock()
		ps.Lag = max(ps.LastStable-ps.Checkpoint, 0)
		ps.Ready = kp.isReady()
		s.Ready = s.Ready && ps.Ready
		s.Partitions = append(s.Partitions, ps)
	}
	kt.cmpMu.Lock()
	s.Compaction = kt.cmp
	kt.cmpMu.Unlock()
	return s
}

// Ready reports whether the index has caught up with the log of every
// indexed topic (always true without an index).
func (k *KV) Ready() bool {
	kv := k.live
	if kv == nil {
		return true
	}
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	for _, kt := range kv.topics {
		if !kt.caughtUp() {
			return false
		}
	}
	return true
}
