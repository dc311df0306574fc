package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// The archiving worker: sealed segments of topics with
// remote.storage.enable=true go to the cold tier. The order of operations
// is what keeps data safe:
//
//  1. the segment's records are read from its stream and written as one
//     Parquet file, committed to the topic's Iceberg table (cold.Archive,
//     idempotent: a retry after a crash finds the file and adds nothing);
//  2. the registry marks the segment archived, durably in Redis;
//  3. only then, and only once local retention allows, the stream leaves
//     Redis (DropLocal), and reads of it go to the cold tier.
//
// While the object store is down, step 1 fails, the segment stays sealed
// in Redis and the next round tries again.

// TieringStatus is what the worker reports. Its JSON is the tiering
// section of korvet's status (GET /api/v1/status), without the archived
// counts.
type TieringStatus struct {
	BacklogSegments int64            `json:"backlog_segments"` // sealed, not yet archived
	BacklogBytes    int64            `json:"backlog_bytes"`
	LastArchived    *ArchivedSegment `json:"last_archived,omitempty"`
	Errors          int64            `json:"errors"` // since start
	LastError       string           `json:"last_error,omitempty"`
	LastErrorAt     time.Time        `json:"last_error_at,omitzero"`
	Archived        int64            `json:"-"` // segments archived since start
	ArchivedRecords int64            `json:"-"`
}

// ArchivedSegment names one segment moved to the cold tier.
type ArchivedSegment struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Segment   int64     `json:"segment"`
	Records   int64     `json:"records"`
	Bytes     int64     `json:"bytes"`
	At        time.Time `json:"at"`
}

type tiering struct {
	mu     sync.Mutex
	status TieringStatus
	wake   chan struct{}
}

// archiveConcurrency is how many segments are read and uploaded at once,
// memory (Options.ArchiveMemory) permitting.
const archiveConcurrency = 4

// DefaultArchiveMemory is Options.ArchiveMemory's default: four segments
// of a few MiB archive at once (about 3.7 MiB each for 1 MiB segments on
// S3), a segment of 1 GiB alone.
const DefaultArchiveMemory = 32 << 20

// archiveReadBytes is the most record bytes one read of a segment being
// archived asks Redis for.
const archiveReadBytes = 8 << 20

// archiveMemory is about the most an archiving job holds: the Redis
// reply of one read and the records decoded from it (about twice the
// records' bytes; sg.Bytes are those as Redis stores them), and what the
// cold tier holds writing the file.
func (e *Engine) archiveMemory(sg Segment) int64 {
	return 2*min(sg.Bytes, archiveReadBytes) + e.opts.Cold.UploadMemory(sg.Bytes)
}

// memBudget lets jobs start while what they hold fits in limit; one job
// always may. One goroutine acquires, any release.
type memBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // a release happened (capacity 1)
}

func newMemBudget(limit int64) *memBudget {
	return &memBudget{limit: limit, freed: make(chan struct{}, 1)}
}

// acquire waits until n more fits (or nothing is held), or ctx ends.
func (b *memBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.freed:
		case <-ctx.Done():
			return fmt.Errorf("archive memory: %w", ctx.Err())
		}
	}
}

func (b *memBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// Tiering reports the archiving worker's state; ok is false without a
// cold tier.
func (e *Engine) Tiering() (TieringStatus, bool) {
	if e.opts.Cold == nil {
		return TieringStatus{}, false
	}
	e.tier.mu.Lock()
	st := e.tier.status
	e.tier.mu.Unlock()
	st.BacklogSegments, st.BacklogBytes = 0, 0
	for _, t := range e.Topics() {
		if !t.currentSettings().remoteStorage {
			continue
		}
		for _, p := range t.Partitions() {
			for _, sg := range p.Segments() {
				if sg.State == SegmentSealed {
					st.BacklogSegments++
					st.BacklogBytes += sg.Bytes
				}
			}
		}
	}
	return st, true
}

// ColdStore is the cold tier korvet was opened with, or nil.
func (e *Engine) ColdStore() *cold.Store { return e.opts.Cold }

func (e *Engine) tieringLoop() {
	defer e.wg.Done()
	interval := e.opts.TieringInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// After a failed round (the object store down, say) the next waits
	// longer, doubling up to a minute, so an outage costs a warning now
	// and then rather than a flood.
	var backoff time.Duration
	var next time.Time
	for {
		select {
		case <-e.bg.Done():
			return
		case <-tick.C:
		case <-e.tier.wake:
		}
		if time.Now().Before(next) {
			continue
		}
		if e.archiveRound(e.bg) == 0 {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, interval), time.Minute)
		next = time.Now().Add(backoff)
	}
}

// archiveRound archives every sealed segment, lets archived ones leave
// Redis when local retention says so, and deletes cold files retention
// has removed. It returns how many steps failed.
func (e *Engine) archiveRound(ctx context.Context) int {
	type job struct {
		p  *Partition
		sg Segment
	}
	var jobs []job
	now := time.Now()
	for _, t := range e.Topics() {
		s := t.currentSettings()
		if !s.remoteStorage {
			continue
		}
		for _, p := range t.Partitions() {
			if !p.IsLeader() {
				continue // its leader archives it
			}
			segs := p.Segments()
			for _, sg := range segs {
				if sg.State == SegmentSealed && sg.Local {
					jobs = append(jobs, job{p, sg})
				}
			}
			p.applyLocalRetention(segs, s, now)
		}
	}
	// A job holds its slot while it reads its segment and uploads the
	// file; the commits it then waits for (which take the files that
	// uploaded meanwhile along) run beside the next uploads.
	sem := make(chan struct{}, archiveConcurrency)
	mem := newMemBudget(e.opts.ArchiveMemory)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, j := range jobs {
		sem <- struct{}{}
		held := e.archiveMemory(j.sg)
		if err := mem.acquire(ctx, held); err != nil {
			<-sem
			break // shutting down
		}
		wg.Add(1)
		go func() {
			var once sync.Once
			release := func() { once.Do(func() { mem.release(held); <-sem }) }
			defer func() { release(); wg.Done() }()
			if err := j.p.archive(ctx, j.sg, release); err != nil && ctx.Err() == nil {
				failed.Add(1)
				e.tierError(fmt.Errorf("archive %s/%d segment %d: %w", j.p.t.name, j.p.id, j.sg.ID, err))
			}
		}()
	}
	wg.Wait()
	// One broker collects the keyspace's cold garbage.
	if e.Coordinator(coldGCCoordinatorKey) != e.opts.NodeID {
		return int(failed.Load())
	}
	if err := e.collectColdGarbage(ctx); err != nil && ctx.Err() == nil {
		failed.Add(1)
		e.tierError(err)
	}
	return int(failed.Load())
}

// coldGCCoordinatorKey picks, by rendezvous hash like a group, the broker
// that deletes cold garbage.
const coldGCCoordinatorKey = "\x00korvet-cold-gc"

func (e *Engine) tierError(err error) {
	e.log.Warn("tiering", "err", err)
	e.tier.mu.Lock()
	e.tier.status.Errors++
	e.tier.status.LastError, e.tier.status.LastErrorAt = err.Error(), time.Now()
	e.tier.mu.Unlock()
}

// archive moves one sealed segment's records to the cold tier and marks it
// archived; uploaded is called once its file is in the store (before the
// commit that adds it to the table).
func (p *Partition) archive(ctx context.Context, sg Segment, uploaded func()) error {
	e := p.t.e
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	ref := cold.SegmentRef{Topic: p.t.name, TopicID: p.t.id, Partition: p.id, Segment: sg.ID, BaseOffset: sg.Base, LastOffset: sg.Last}
	var res *ReadResult
	defer func() {
		if res != nil {
			res.Release()
		}
	}()
	from := sg.Base
	next := func() ([]record.Record, []record.Txn, error) {
		if res != nil {
			res.Release()
			res = nil
		}
		if from > sg.Last {
			return nil, nil, io.EOF
		}
		res = p.newReadResult()
		if err := p.readStream(ctx, res, sg.ID, from, sg.Last, maxReadCount, archiveReadBytes); err != nil {
			return nil, nil, err
		}
		if len(res.Records) == 0 {
			return nil, nil, io.EOF
		}
		from = res.Records[len(res.Records)-1].Offset + 1
		// Control records and the producers of transactional records go
		// to the cold tier with them, so a read_committed fetch filters
		// archived records as it did local ones. (The aborted index stays
		// in Redis: it is trimmed with the log start, not by archiving.)
		return res.Records, res.Txns, nil
	}
	up, err := e.opts.Cold.Upload(ctx, ref, next)
	if res != nil {
		res.Release()
		res = nil
	}
	uploaded()
	var df cold.DataFile
	if err == nil {
		df, err = up.Commit(ctx)
	}
	switch {
	case errors.Is(err, cold.ErrNoRecords):
		// Compaction emptied the segment: nothing to keep.
		df = cold.DataFile{}
	case err != nil:
		return err
	}
	if err := p.MarkArchived(ctx, sg.ID, df.Path, df.Bytes); err != nil {
		return err
	}
	e.tier.mu.Lock()
	e.tier.status.Archived++
	e.tier.status.ArchivedRecords += df.Records
	e.tier.status.LastArchived = &ArchivedSegment{Topic: p.t.name, Partition: p.id, Segment: sg.ID, Records: df.Records, Bytes: df.Bytes, At: time.Now()}
	e.tier.mu.Unlock()
	e.log.Info("segment archived", "topic", p.t.name, "partition", p.id, "segment", sg.ID, "records", df.Records, "bytes", df.Bytes, "file", df.Path)
	return nil
}

// applyLocalRetention lets archived segments leave Redis once they are
// older than local.retention.ms or the partition's local bytes exceed
// local.retention.bytes (-2: the retention.* value).
func (p *Partition) applyLocalRetention(segs []Segment, s topicSettings, now time.Time) {
	ms, bytes := s.localRetentionMs, s.localRetentionBytes
	if ms == -2 {
		ms = s.retentionMs
	}
	if bytes == -2 {
		bytes = s.retentionBytes
	}
	var local int64
	for i, sg := range segs {
		if sg.Local && i < len(segs)-1 {
			local += sg.Bytes
		}
	}
	for i, sg := range segs {
		if i == len(segs)-1 || sg.State != SegmentArchived || !sg.Local {
			continue
		}
		old := ms >= 0 && sg.MaxTs < now.UnixMilli()-ms
		big := bytes >= 0 && local > bytes
		if old || big {
			p.DropLocal(sg.ID)
			local -= sg.Bytes
		}
	}
}

// readCold reads an archived segment whose stream has left Redis; txns as
// ReadResult.Txns.
func (p *Partition) readCold(ctx context.Context, sg Segment, from int64, maxBytes int) ([]record.Record, []record.Txn, error) {
	if sg.File == "" {
		return nil, nil, nil // archived empty: compaction left nothing
	}
	if p.t.e.opts.Cold == nil {
		return nil, nil, fmt.Errorf("segment %d is in the cold tier but no cold tier is configured", sg.ID)
	}
	df := cold.DataFile{Path: sg.File, TopicID: p.t.id, Partition: p.id, Segment: sg.ID, Bytes: sg.FileBytes, MinOffset: sg.Base, MaxOffset: sg.Last}
	return p.t.e.opts.Cold.Read(ctx, df, from, maxBytes)
}

// collectColdGarbage deletes cold files that retention or topic deletion
// removed from registries.
func (e *Engine) collectColdGarbage(ctx context.Context) error {
	r, err := e.rc.Do(ctx, "SMEMBERS", e.k.ColdGarbage())
	if err != nil {
		return fmt.Errorf("cold garbage: %w", err)
	}
	byTopic := map[string][]cold.DataFile{}
	var members []string
	r.ForEach(func(m resp.Reply) bool {
		members = append(members, string(m.Bytes()))
		return true
	})
	for _, m := range members {
		kind, rest, _ := strings.Cut(m, "\x00")
		switch kind {
		case "file":
			topic, path, _ := strings.Cut(rest, "\x00")
			byTopic[topic] = append(byTopic[topic], cold.DataFile{Path: path})
		case "drop":
			topic, id, _ := strings.Cut(rest, "\x00")
			// A topic of that name created since has its own table id;
			// only a table nobody uses any more is dropped.
			if t := e.Topic(topic); t == nil || hex.EncodeToString(t.id[:]) != id {
				if err := e.opts.Cold.Drop(ctx, topic); err != nil {
					return fmt.Errorf("drop cold table of %s: %w", topic, err)
				}
			}
			if _, err := e.rc.Do(ctx, "SREM", e.k.ColdGarbage(), m); err != nil {
				return fmt.Errorf("cold garbage: %w", err)
			}
		}
	}
	for topic, files := range byTopic {
		if err := e.opts.Cold.Remove(ctx, topic, files); err != nil {
			return fmt.Errorf("remove cold files of %s: %w", topic, err)
		}
		args := []any{"SREM", e.k.ColdGarbage()}
		for _, f := range files {
			args = append(args, "file\x00"+topic+"\x00"+f.Path)
		}
		if _, err := e.rc.Do(ctx, args...); err != nil {
			return fmt.Errorf("cold garbage: %w", err)
		}
	}
	return nil
}

// LocalStart is the first offset whose record is still in Redis (Kafka's
// earliest-local, KIP-405).
func (p *Partition) LocalStart() int64 {
	start := p.start.Load()
	for _, sg := range p.Segments() {
		if sg.Local {
			return max(sg.Base, start)
		}
	}
	return p.hw.Load()
}

// LastTiered is the last offset in the cold tier, or -1 (Kafka's
// latest-tiered, KIP-1005).
func (p *Partition) LastTiered() int64 {
	last := int64(-1)
	for _, sg := range p.Segments() {
		if sg.State == SegmentArchived {
			last = sg.Last
		}
	}
	return last
}
