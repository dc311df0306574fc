package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/korvet/korvet/resp"
)

// The memory sampler: what each topic takes in Redis, measured without
// stalling Redis. Every MemorySampleInterval a broker asks Redis, for the
// partitions it leads, MEMORY USAGE <key> SAMPLES memorySamples (O(samples)
// in Redis, an estimate for a stream) and XLEN (O(1)) of every segment
// stream still in Redis plus the partition's small keys, pipelined in
// bounded rounds. Readers get the cached figures and never make Redis work.

const (
	// DefaultMemorySampleInterval is how often the sampler runs.
	DefaultMemorySampleInterval = time.Minute
	// memorySamples is the SAMPLES argument of MEMORY USAGE: how many
	// stream nodes Redis looks at to estimate a stream's size.
	memorySamples = 64
	// memoryMaxKeys bounds the keys measured in one cycle; partitions
	// past it are measured in the next cycles (round robin).
	memoryMaxKeys = 4096
	// memoryRoundKeys is how many keys go in one pipelined round trip.
	memoryRoundKeys = 128
)

// TopicMemory is what a topic's partitions led by this broker take in
// Redis, as last sampled.
type TopicMemory struct {
	Topic string
	// Partitions is how many of its partitions were measured.
	Partitions int
	// RedisBytes is MEMORY USAGE summed over its segment streams and
	// partition keys; Entries the stream entries (XLEN) in Redis.
	RedisBytes int64
	Entries    int64
	// BytesPerRecord is RedisBytes/Entries; 0 with no entries.
	BytesPerRecord float64
	// RecordBytesPerRecord is the records' own size (key, value, headers
	// as korvet counts them for retention.bytes: before flattening or
	// compression) per record in Redis; 0 with no records.
	RecordBytesPerRecord float64
	// RecordsPerSecond and IngestBytesPerSecond are the rate records
	// arrived at between the last two samples (Redis bytes at
	// BytesPerRecord); zero until two samples exist.
	RecordsPerSecond     float64
	IngestBytesPerSecond float64
	// HotSpan is how long the data in Redis covers: since its oldest
	// segment still in Redis was opened.
	HotSpan time.Duration
	// HotBound is the topic's local retention time (local.retention.ms
	// with the cold tier, else retention.ms); 0: unbounded.
	HotBound time.Duration
	// HotRetention projects how much time of this topic Redis holds at
	// the current rates (ProjectHotRetention); HotRetentionKnown is false
	// when nothing bounds it (no limit known, nothing grows).
	HotRetention      time.Duration
	HotRetentionKnown bool
	At                time.Time
}

// MemoryStatus is the sampler's last view.
type MemoryStatus struct {
	At time.Time // zero: no sample yet
	// UsedMemory and MaxMemory (0: no limit) from INFO memory;
	// SystemMemory is the host's memory (total_system_memory), the
	// limit used when MaxMemory is 0.
	UsedMemory, MaxMemory, SystemMemory int64
	// IngestBytesPerSecond is the Redis growth of every topic still
	// growing (see ProjectHotRetention).
	IngestBytesPerSecond float64
	Error                string // why the last sample failed, if it did
	Topics               map[string]TopicMemory
}

// Limit is the memory Redis can fill: maxmemory, else the host's memory;
// 0 when neither is known.
func (m MemoryStatus) Limit() int64 {
	if m.MaxMemory > 0 {
		return m.MaxMemory
	}
	return m.SystemMemory
}

// partMemory is one partition's last sample.
type partMemory struct {
	bytes, entries int64
	recordBytes    int64 // LocalBytes at the sample
	records        int64 // records in its local segments, by offsets
	hw             int64
	at             time.Time
	rate           float64 // records/s since the sample before; -1: unknown
	span           time.Duration
}

type memSampler struct {
	mu     sync.Mutex
	parts  map[*Partition]partMemory
	status MemoryStatus
	cursor int // where the next cycle starts when one cycle cannot cover all
}

// MemoryStatus returns the last sampled figures; no Redis work.
func (e *Engine) MemoryStatus() MemoryStatus {
	e.mem.mu.Lock()
	defer e.mem.mu.Unlock()
	st := e.mem.status
	st.Topics = make(map[string]TopicMemory, len(e.mem.status.Topics))
	for k, v := range e.mem.status.Topics {
		st.Topics[k] = v
	}
	return st
}

func (e *Engine) memoryLoop() {
	defer e.wg.Done()
	tick := time.NewTicker(e.opts.MemorySampleInterval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(e.bg, max(e.opts.MemorySampleInterval, 10*time.Second))
		err := e.sampleMemory(ctx)
		cancel()
		if err != nil && e.bg.Err() == nil {
			e.log.Warn("memory sample", "err", err)
		}
		select {
		case <-e.bg.Done():
			return
		case <-tick.C:
		}
	}
}

// memTarget is one partition to measure and its keys; streams are the
// first nStreams keys.
type memTarget struct {
	p        *Partition
	keys     []string
	nStreams int
	segs     []Segment
}

// sampleMemory runs one cycle.
func (e *Engine) sampleMemory(ctx context.Context) error {
	now := time.Now()
	var targets []memTarget
	for _, t := range e.Topics() {
		for _, p := range t.Partitions() {
			if p.IsLeader() {
				targets = append(targets, memTarget{p: p})
			}
		}
	}
	// A stable order, so that the round-robin cursor means something.
	sort.Slice(targets, func(i, j int) bool {
		a, b := targets[i].p, targets[j].p
		return a.t.name < b.t.name || a.t.name == b.t.name && a.id < b.id
	})
	e.mem.mu.Lock()
	start := e.mem.cursor
	e.mem.mu.Unlock()
	if start >= len(targets) {
		start = 0
	}
	var chosen []memTarget
	nkeys := 0
	for i := range targets {
		tg := targets[(start+i)%len(targets)]
		tg.segs = tg.p.Segments()
		for _, sg := range tg.segs {
			if sg.Local {
				tg.keys = append(tg.keys, tg.p.streamKey(sg.ID))
			}
		}
		tg.nStreams = len(tg.keys)
		tg.keys = append(tg.keys, tg.p.metaKey, tg.p.batchesKey, tg.p.segmentsKey, tg.p.abortedKey)
		if nkeys > 0 && nkeys+len(tg.keys) > memoryMaxKeys {
			break
		}
		nkeys += len(tg.keys)
		chosen = append(chosen, tg)
	}

	info, ierr := e.rc.Do(ctx, "INFO", "memory")
	var mi RedisInfo
	if ierr == nil {
		mi = parseRedisInfo(info.Bytes())
	}
	results, err := e.measure(ctx, chosen)
	if err != nil {
		e.mem.mu.Lock()
		e.mem.status.Error = err.Error()
		e.mem.mu.Unlock()
		return err
	}

	e.mem.mu.Lock()
	defer e.mem.mu.Unlock()
	if e.mem.parts == nil {
		e.mem.parts = make(map[*Partition]partMemory)
	}
	if len(targets) > 0 {
		e.mem.cursor = (start + len(chosen)) % len(targets)
	}
	for i, tg := range chosen {
		pm := results[i]
		pm.at = now
		pm.hw = tg.p.HighWatermark()
		pm.recordBytes = tg.p.LocalBytes()
		pm.rate = -1
		for j, sg := range tg.segs {
			if !sg.Local {
				continue
			}
			if pm.span == 0 && sg.Created > 0 {
				pm.span = max(now.Sub(time.UnixMilli(sg.Created)), 0)
			}
			last := sg.Last
			if j == len(tg.segs)-1 {
				last = pm.hw - 1
			}
			pm.records += max(last-sg.Base+1, 0)
		}
		if prev, ok := e.mem.parts[tg.p]; ok && pm.hw >= prev.hw {
			if dt := now.Sub(prev.at).Seconds(); dt > 0 {
				pm.rate = float64(pm.hw-prev.hw) / dt
			}
		}
		e.mem.parts[tg.p] = pm
	}
	// Partitions this broker no longer leads (or that are gone) drop out.
	led := make(map[*Partition]bool, len(targets))
	for _, tg := range targets {
		led[tg.p] = true
	}
	for p := range e.mem.parts {
		if !led[p] {
			delete(e.mem.parts, p)
		}
	}
	st := MemoryStatus{At: now, Topics: map[string]TopicMemory{}}
	if ierr == nil {
		st.UsedMemory, st.MaxMemory = mi.UsedMemory, mi.MaxMemory
		st.SystemMemory, _ = strconv.ParseInt(mi.Raw["total_system_memory"], 10, 64)
	} else {
		st.Error = fmt.Sprintf("INFO memory: %v", ierr)
	}
	type sums struct {
		records, recordBytes int64
	}
	acc := map[string]*sums{}
	for p, pm := range e.mem.parts {
		tm := st.Topics[p.t.name]
		tm.Topic = p.t.name
		tm.Partitions++
		tm.RedisBytes += pm.bytes
		tm.Entries += pm.entries
		tm.RecordsPerSecond += max(pm.rate, 0)
		tm.HotSpan = max(tm.HotSpan, pm.span)
		tm.At = pm.at
		st.Topics[p.t.name] = tm
		a := acc[p.t.name]
		if a == nil {
			a = &sums{}
			acc[p.t.name] = a
		}
		a.records += pm.records
		a.recordBytes += pm.recordBytes
	}
	var growing float64
	for name, tm := range st.Topics {
		if a := acc[name]; a.records > 0 {
			tm.RecordBytesPerRecord = float64(a.recordBytes) / float64(a.records)
		}
		if tm.Entries > 0 {
			tm.BytesPerRecord = float64(tm.RedisBytes) / float64(tm.Entries)
		}
		tm.IngestBytesPerSecond = tm.RecordsPerSecond * tm.BytesPerRecord
		if t := e.Topic(name); t != nil {
			tm.HotBound = hotBound(t.currentSettings())
		}
		if tm.HotBound == 0 || tm.HotSpan < tm.HotBound {
			growing += tm.IngestBytesPerSecond
		}
		st.Topics[name] = tm
	}
	st.IngestBytesPerSecond = growing
	free := st.Limit() - st.UsedMemory
	for name, tm := range st.Topics {
		if st.Limit() > 0 {
			tm.HotRetention, tm.HotRetentionKnown = ProjectHotRetention(tm.HotSpan, tm.HotBound, free, growing)
		} else if tm.HotBound > 0 {
			tm.HotRetention, tm.HotRetentionKnown = tm.HotBound, true
		}
		st.Topics[name] = tm
	}
	e.mem.status = st
	return nil
}

// measure pipelines MEMORY USAGE for every key of the targets and XLEN
// for their streams, memoryRoundKeys keys per round trip.
func (e *Engine) measure(ctx context.Context, targets []memTarget) ([]partMemory, error) {
	out := make([]partMemory, len(targets))
	type ref struct {
		target int
		stream bool
	}
	var refs []ref
	var pl resp.Pipeline
	flush := func() error {
		if pl.Len() == 0 {
			return nil
		}
		rs, err := e.rc.Exec(ctx, &pl)
		if err != nil {
			return fmt.Errorf("%w: measure memory: %v", ErrStorageUnavailable, err)
		}
		defer rs.Release()
		i := 0
		for _, rf := range refs {
			if n, err := rs.At(i).Int(); err == nil { // nil: the key is gone
				out[rf.target].bytes += n
			}
			i++
			if rf.stream {
				if n, err := rs.At(i).Int(); err == nil {
					out[rf.target].entries += n
				}
				i++
			}
		}
		pl.Reset()
		refs = refs[:0]
		return nil
	}
	for ti, tg := range targets {
		for ki, k := range tg.keys {
			pl.Cmd("MEMORY", "USAGE", k, "SAMPLES", memorySamples)
			stream := ki < tg.nStreams
			if stream {
				pl.Cmd("XLEN", k)
			}
			refs = append(refs, ref{ti, stream})
			if len(refs) >= memoryRoundKeys {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// hotBound is how long a topic's data stays in Redis at most: its local
// retention with the cold tier, else its retention; 0: unbounded.
func hotBound(s topicSettings) time.Duration {
	ms := s.retentionMs
	if s.remoteStorage && s.localRetentionMs != -2 {
		ms = s.localRetentionMs
	}
	if ms < 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// ProjectHotRetention is how much time of a topic Redis holds at the
// current rates: the span it holds now plus the time until Redis is full
// (free bytes / growing, the bytes per second all still-growing topics
// add), capped by the topic's bound (0: none). A topic at its bound is in
// a steady state (what arrives replaces what retention or archiving
// removes), so it neither grows nor is counted in growing. ok is false
// when nothing bounds it: no bound and no growth.
func ProjectHotRetention(span, bound time.Duration, free int64, growing float64) (d time.Duration, ok bool) {
	if bound > 0 && span >= bound {
		return bound, true
	}
	if free <= 0 {
		return span, true
	}
	if growing <= 0 {
		if bound > 0 {
			return bound, true
		}
		return 0, false
	}
	left := float64(free) / growing
	if left > float64(math.MaxInt64/2)/float64(time.Second) {
		left = float64(math.MaxInt64/2) / float64(time.Second)
	}
	d = span + time.Duration(left*float64(time.Second))
	if bound > 0 && d > bound {
		d = bound
	}
	return d, true
}
