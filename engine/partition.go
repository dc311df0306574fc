package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/resp"
)

// Partition is one ordered log. Appends are group-committed: while one Redis
// transaction is in flight, later appends queue up and go out together in
// the next one, which is sent right behind it (flush_window.go): Redis
// runs one round while the next is on its way. A round's fence check
// includes the offset it starts at, so a round behind one that failed
// fails too and the log never has a gap.
//
// The log is a chain of segments, each its own stream; the open one takes
// appends and is sealed (and the next opened) in the same transaction that
// first writes past segment.bytes or segment.ms.
type Partition struct {
	t       *Topic
	id      int32
	metaKey string
	// batchesKey is the per-append summary stream (see keys.batches).
	batchesKey  string
	segmentsKey string
	abortedKey  string
	fenceKey    string

	hw    atomic.Int64 // offsets below hw are committed and readable
	start atomic.Int64 // log start offset
	// readSize is what a record read counts (Record.Size) per stream
	// entry, as the last large read found it (0: none yet), for the
	// entries an XRANGE asks for.
	readSize atomic.Int64
	// removals counts what may have taken records out of the log since
	// the partition was loaded (compaction, trims, dropped segments,
	// reloads, deletion): a read-ahead started before one is not used.
	removals atomic.Uint64

	mu        sync.Mutex
	segs      []Segment // the registry, by id; never modified in place
	next      int64     // next offset to assign; equals hw when idle
	bytes     int64     // bytes appended since offset 0 (entry.EncodedSize)
	maxTs     int64     // running max timestamp
	segMin    int64     // min and max timestamp in the open segment
	segMax    int64
	producers map[int64]*producerState
	txns      map[int64]*openTxn // open transactions; replaced, never modified in place
	aborted   []abortedTxn       // the aborted index, by marker offset
	queue     []*Pending
	flushing  bool
	needSync  bool // the last transaction's outcome is unknown
	closed    bool
	trimTo    int64 // retention target; a trim is pending while trimTo > start
	roll      bool  // seal the open segment at the next flush
	segsSaved bool  // the registry exists in Redis
	dropLocal map[int64]bool
	archives  []archiveReq
	trimWait  []chan error // DeleteRecords calls waiting for the trim
	waiters   map[chan<- struct{}]struct{}

	// Leadership (cluster_leader.go): the leader and epoch last seen in
	// Redis; the epoch this broker leads at (0: it does not lead), with
	// lead mirroring leadEpoch != 0 for lock-free reads; handoff while a
	// transfer drains the queue; the start offsets of recent epochs.
	leaderNode  atomic.Int32
	leaderEpoch atomic.Int32
	lead        atomic.Bool
	leadEpoch   int32
	handoff     bool
	epochs      map[int32]int64
	orphanSince time.Time // control loop only: since when it has no live leader
}

func newPartition(t *Topic, id int32) *Partition {
	p := &Partition{
		t:           t,
		id:          id,
		metaKey:     t.e.k.Partition(t.name, id),
		batchesKey:  t.e.k.Batches(t.name, id),
		segmentsKey: t.e.k.Segments(t.name, id),
		abortedKey:  t.e.k.Aborted(t.name, id),
		fenceKey:    t.e.k.Fence(t.name, id),
		maxTs:       -1,
		waiters:     make(map[chan<- struct{}]struct{}),
	}
	p.leaderNode.Store(-1)
	return p
}

// ID is the partition number.
func (p *Partition) ID() int32 { return p.id }

// Topic is the partition's topic.
func (p *Partition) Topic() *Topic { return p.t }

// HighWatermark is the offset after the last committed record.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LogStart is the first offset still in the log.
func (p *Partition) LogStart() int64 { return p.start.Load() }

// StreamKey is the Redis key of the open segment.
func (p *Partition) StreamKey() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streamKey(p.openID())
}

func (p *Partition) streamKey(seg int64) string { return p.t.e.k.Stream(p.t.name, p.id, seg) }

// openID is the open segment's id; p.mu must be held.
func (p *Partition) openID() int64 {
	if len(p.segs) == 0 {
		return 0
	}
	return p.segs[len(p.segs)-1].ID
}

// Bytes is the number of bytes appended over the partition's life.
func (p *Partition) Bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// Segments returns the segment registry, oldest first, with the open
// segment's figures filled in as of now.
func (p *Partition) Segments() []Segment {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]Segment(nil), p.segs...)
	if n := len(out); n > 0 {
		o := &out[n-1]
		o.Last, o.Bytes, o.MinTs, o.MaxTs = p.next-1, p.bytes-o.StartBytes, p.segMin, p.segMax
	}
	return out
}

// loadState sets the partition from its meta hash (HGETALL) and segment
// registry (HGETALL), and top, the last entry of the open segment's stream
// (XREVRANGE ... COUNT 1) when the caller has it.
func (p *Partition) loadState(meta, segs resp.Reply, top *resp.Reply) error {
	if err := meta.Err(); err != nil {
		return err
	}
	if err := segs.Err(); err != nil {
		return err
	}
	var f []resp.Reply
	f = meta.Elems(f)
	vals := map[string]int64{"next": 0, "start": 0, "bytes": 0, "maxts": -1, "smin": -1, "smax": -1}
	producers := map[int64]*producerState{}
	txns := map[int64]*openTxn{}
	leader, epoch, epochs := int32(-1), int32(0), map[int32]int64{}
	for i := 0; i+1 < len(f); i += 2 {
		name, v := string(f[i].Bytes()), string(f[i+1].Bytes())
		switch name {
		case "leader":
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				leader = int32(n)
			}
			continue
		case "leader_epoch":
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				epoch = int32(n)
			}
			continue
		}
		if e, ok := strings.CutPrefix(name, "epoch:"); ok {
			en, err1 := strconv.ParseInt(e, 10, 32)
			off, err2 := strconv.ParseInt(v, 10, 64)
			if err1 == nil && err2 == nil {
				epochs[int32(en)] = off
			}
			continue
		}
		if id, ok := strings.CutPrefix(name, "pid:"); ok {
			pid, err := strconv.ParseInt(id, 10, 64)
			st, perr := parseProducerState(v)
			if err != nil || perr != nil {
				return fmt.Errorf("bad producer state %s in %s", name, p.metaKey)
			}
			producers[pid] = st
			continue
		}
		if id, ok := strings.CutPrefix(name, "txn:"); ok {
			pid, err := strconv.ParseInt(id, 10, 64)
			o, perr := parseOpenTxn(v)
			if err != nil || perr != nil {
				return fmt.Errorf("bad open transaction %s in %s", name, p.metaKey)
			}
			txns[pid] = o
			continue
		}
		if _, ok := vals[name]; !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("bad counter %s=%q in %s", name, v, p.metaKey)
		}
		vals[name] = n
	}
	var raw [][]byte
	segs.ForEach(func(r resp.Reply) bool {
		raw = append(raw, append([]byte(nil), r.Bytes()...))
		return true
	})
	registry, err := parseSegments(raw)
	if err != nil {
		return fmt.Errorf("segment registry %s: %w", p.segmentsKey, err)
	}
	if len(registry) == 0 {
		// A new partition (or one from before the registry): segment 0
		// is open from the log start. It is written with the first append.
		registry = []Segment{{ID: 0, Base: vals["start"], Last: -1, State: SegmentOpen, Local: true, Created: time.Now().UnixMilli(), MinTs: -1, MaxTs: -1}}
	}
	next := vals["next"]
	// The counters are written in the same transaction as the entries, so
	// they agree with the stream; checking the stream's last entry anyway
	// costs little and guards against hand-edited keys.
	if top != nil && top.Err() == nil && top.Len() > 0 {
		var ent, e2 []resp.Reply
		ent = top.Elems(ent)
		e2 = ent[0].Elems(e2)
		if len(e2) == 2 {
			if off, _, err := entry.ParseID(e2[0].Bytes()); err == nil && off+1 > next {
				p.t.e.log.Warn("partition counter behind its stream; repairing", "topic", p.t.name, "partition", p.id, "counter", next, "stream_next", off+1)
				next = off + 1
			}
		}
	}
	p.mu.Lock()
	p.next, p.bytes, p.maxTs, p.segMin, p.segMax = next, vals["bytes"], vals["maxts"], vals["smin"], vals["smax"]
	p.segs, p.producers, p.segsSaved = registry, producers, segs.Len() > 0
	p.txns = txns
	p.trimTo = max(p.trimTo, vals["start"]) // keep a pending trim (DeleteRecords) across a resync
	p.epochs = epochs
	p.observe(leader, epoch)
	if p.leadEpoch != 0 && (leader != p.t.e.opts.NodeID || epoch != p.leadEpoch) {
		p.stepDownLocked() // deposed while we were not looking
	}
	p.mu.Unlock()
	p.hw.Store(next)
	p.start.Store(vals["start"])
	p.noteRemoval()
	return nil
}

// resync reloads the partition's counters and registry from Redis.
func (p *Partition) resync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := loadPartitions(ctx, p.t.e, []*Partition{p}); err != nil {
		return fmt.Errorf("resync %s: %w", p.metaKey, err)
	}
	p.mu.Lock()
	p.needSync = false
	p.mu.Unlock()
	return nil
}

// refresh brings a partition this broker does not lead up to date from
// Redis: a group coordinator serves partitions another broker writes, and
// its view of them moves only when it looks. The leader's view is always
// current.
func (p *Partition) refresh(ctx context.Context) error {
	if p.IsLeader() {
		return nil
	}
	if err := p.resync(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
	}
	return nil
}

// loadPartitions loads partitions' state in two pipelined round trips:
// counters and registries, then the last entry of each open segment.
func loadPartitions(ctx context.Context, e *Engine, parts []*Partition) error {
	if len(parts) == 0 {
		return nil
	}
	var pl resp.Pipeline
	for _, p := range parts {
		pl.Cmd("HGETALL", p.metaKey)
		pl.Cmd("HGETALL", p.segmentsKey)
		pl.Cmd("XRANGE", p.abortedKey, "-", "+")
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	defer rs.Release()
	pl.Reset()
	for i, p := range parts {
		// The aborted index before the counters and open transactions
		// (it was read after them): a reader that sees the new LSO finds
		// the aborts below it (the KV view, kv_txn.go).
		aborted, err := parseAborted(rs.At(3*i + 2))
		if err != nil {
			return fmt.Errorf("load partition %s/%d: %w", p.t.name, p.id, err)
		}
		p.mu.Lock()
		p.aborted = aborted
		p.mu.Unlock()
		if err := p.loadState(rs.At(3*i), rs.At(3*i+1), nil); err != nil {
			return fmt.Errorf("load partition %s/%d: %w", p.t.name, p.id, err)
		}
		p.mu.Lock()
		p.trimAbortedLocked(p.start.Load())
		p.mu.Unlock()
		pl.Cmd("XREVRANGE", p.StreamKey(), "+", "-", "COUNT", 1)
	}
	tops, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	defer tops.Release()
	for i, p := range parts {
		top := tops.At(i)
		if err := p.loadState(rs.At(3*i), rs.At(3*i+1), &top); err != nil {
			return fmt.Errorf("load partition %s/%d: %w", p.t.name, p.id, err)
		}
	}
	return nil
}

func (p *Partition) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.noteRemoval()
	p.notify()
}

// ProducerInfo describes an idempotent producer a partition knows.
type ProducerInfo struct {
	ID           int64
	Epoch        int16
	LastSequence int32
	LastOffset   int64
}

// Producers lists the idempotent producers the partition remembers.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers))
	for id, st := range p.producers {
		pi := ProducerInfo{ID: id, Epoch: st.epoch, LastSequence: -1, LastOffset: -1}
		if n := len(st.batches); n > 0 {
			pi.LastSequence = st.batches[n-1].lastSeq
			pi.LastOffset = st.batches[n-1].base + int64(st.batches[n-1].lastSeq-st.batches[n-1].firstSeq)
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// LocalBytes is what the partition's records take in Redis (by korvet's
// entry size estimate): the segments whose streams are still there.
func (p *Partition) LocalBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for i, sg := range p.segs {
		switch {
		case !sg.Local:
		case i == len(p.segs)-1:
			n += p.bytes - sg.StartBytes
		default:
			n += sg.Bytes
		}
	}
	return n
}

// Watch registers ch to receive a non-blocking send whenever records are
// committed (or the partition goes away). Call the returned func to stop.
func (p *Partition) Watch(ch chan<- struct{}) (unwatch func()) {
	p.mu.Lock()
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.waiters, ch)
		p.mu.Unlock()
	}
}

func (p *Partition) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
