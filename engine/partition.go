package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// Partition is one ordered log. Appends are group-committed: while one Redis
// transaction is in flight, later appends queue up and go out together in
// the next one, so a single partition keeps Redis busy without ever having
// two transactions in flight (which could leave a gap if the first failed).
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

	hw    atomic.Int64 // offsets below hw are committed and readable
	start atomic.Int64 // log start offset

	mu        sync.Mutex
	segs      []Segment // the registry, by id; never modified in place
	next      int64     // next offset to assign; equals hw when idle
	bytes     int64     // bytes appended since offset 0 (entry.EncodedSize)
	maxTs     int64     // running max timestamp
	segMin    int64     // min and max timestamp in the open segment
	segMax    int64
	producers map[int64]*producerState
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
}

func newPartition(t *Topic, id int32) *Partition {
	return &Partition{
		t:           t,
		id:          id,
		metaKey:     t.e.k.Partition(t.name, id),
		batchesKey:  t.e.k.Batches(t.name, id),
		segmentsKey: t.e.k.Segments(t.name, id),
		maxTs:       -1,
		waiters:     make(map[chan<- struct{}]struct{}),
	}
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
	for i := 0; i+1 < len(f); i += 2 {
		name, v := string(f[i].Bytes()), string(f[i+1].Bytes())
		if id, ok := strings.CutPrefix(name, "pid:"); ok {
			pid, err := strconv.ParseInt(id, 10, 64)
			st, perr := parseProducerState(v)
			if err != nil || perr != nil {
				return fmt.Errorf("bad producer state %s in %s", name, p.metaKey)
			}
			producers[pid] = st
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
	p.trimTo = max(p.trimTo, vals["start"]) // keep a pending trim (DeleteRecords) across a resync
	p.mu.Unlock()
	p.hw.Store(next)
	p.start.Store(vals["start"])
	return nil
}

// Pending is an append in flight. Wait for it with Wait.
type Pending struct {
	recs          []record.Record
	prod          Producer
	codec         int8
	size          int64
	base          int64
	logAppendTime int64
	err           error
	done          chan struct{}
}

// Producer identifies an idempotent producer's batch. ID < 0: none.
type Producer struct {
	ID       int64
	Epoch    int16
	FirstSeq int32
}

// NoProducer is the Producer of plain (non-idempotent) appends.
var NoProducer = Producer{ID: -1}

// Wait blocks until the append is committed or failed and returns the
// offset of its first record and, for LogAppendTime topics, the time
// stamped on the records (-1 otherwise).
func (pd *Pending) Wait(ctx context.Context) (base, logAppendTime int64, err error) {
	select {
	case <-pd.done:
		return pd.base, pd.logAppendTime, pd.err
	case <-ctx.Done():
		return -1, -1, fmt.Errorf("waiting for append: %w", ctx.Err())
	}
}

// Append queues records for the log and returns at once; offsets are
// assigned in the order of Append calls. recs must stay untouched until the
// Pending is done; their Offset fields are set by the engine.
func (p *Partition) Append(recs []record.Record) *Pending {
	return p.AppendBatch(NoProducer, 0, recs)
}

// AppendBatch is Append for one record batch, of an idempotent producer
// unless prod is NoProducer: the batch is checked against the producer's
// sequence in the same step that assigns offsets, and a retry of a recent
// batch answers that batch's offset without appending again. codec is the
// compression the batch arrived with (Kafka's attribute bits: 0 none, 1
// gzip, 2 snappy, 3 lz4, 4 zstd), which fetches then use again.
func (p *Partition) AppendBatch(prod Producer, codec int8, recs []record.Record) *Pending {
	if codec < 0 || codec > entry.MaxCodec {
		codec = 0
	}
	pd := &Pending{recs: recs, prod: prod, codec: codec, done: make(chan struct{}), logAppendTime: -1}
	for i := range recs {
		pd.size += int64(entry.EncodedSize(&recs[i]))
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pd.err = fmt.Errorf("%w: %s", ErrTopicDeleted, p.t.name)
		close(pd.done)
		return pd
	}
	p.queue = append(p.queue, pd)
	p.kickLocked()
	p.mu.Unlock()
	return pd
}

// kickLocked starts the flush loop unless it runs; p.mu must be held.
// Once the engine is closed no loop starts, and what is queued fails.
func (p *Partition) kickLocked() {
	if p.flushing || p.closed {
		return
	}
	if !p.t.e.startFlusher() {
		p.failQueuedLocked(fmt.Errorf("%w: %s/%d", ErrClosed, p.t.name, p.id))
		return
	}
	p.flushing = true
	go p.flushLoop()
}

// failQueuedLocked fails every append, trim wait and archive mark waiting
// for a flush; p.mu must be held.
func (p *Partition) failQueuedLocked(err error) {
	for _, op := range p.queue {
		op.err = err
		close(op.done)
	}
	for _, w := range p.trimWait {
		w <- err
	}
	for _, a := range p.archives {
		a.done <- err
	}
	p.queue, p.trimWait, p.archives = nil, nil, nil
}

func (p *Partition) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.notify()
}

// flushLoop runs while there is work: it takes queued appends (up to
// MaxAppendBytes) and commits them, with any pending segment roll, trim or
// local drop, in one MULTI/EXEC round trip.
func (p *Partition) flushLoop() {
	defer p.t.e.flushers.Done()
	ctx := p.t.e.bg
	var tx txBuffers
	for {
		fl, ok := p.collect(ctx)
		if !ok {
			return
		}
		fl.plan(p.t.currentSettings(), time.Now())
		tx.write(p, &fl)
		err := p.commitRound(ctx, &tx.pl, &fl)
		if err == nil {
			p.index(fl.committed, fl.st.next)
		}
		fl.acknowledge(err)
		if err == nil && fl.st.next > fl.st.base {
			p.notify()
		}
	}
}

// flushRound is the work of one round of the flush loop.
type flushRound struct {
	take     []*Pending // appends taken from the queue
	st       flushState
	saved    bool // the segment registry exists in Redis
	trim     bool // a trim is pending
	trimWait []chan error
	drops    map[int64]bool
	archives []archiveReq

	// Set by plan: the appends that go in (take less refused ones and
	// retries of batches already in the log), and the producers whose
	// state changed.
	committed []*Pending
	changed   []int64
}

// collect takes the next round's work, first resyncing with Redis after
// a transaction whose outcome is unknown. ok is false when there is no
// work left, or the engine is closing: the loop ends.
func (p *Partition) collect(ctx context.Context) (fl flushRound, ok bool) {
	for {
		p.mu.Lock()
		if ctx.Err() != nil {
			// The engine is closing: nothing more can reach Redis, and
			// retrying would spin.
			p.failQueuedLocked(fmt.Errorf("%w: %s/%d", ErrClosed, p.t.name, p.id))
			p.flushing = false
			p.mu.Unlock()
			return fl, false
		}
		trim := p.trimTo > p.start.Load()
		if len(p.queue) == 0 && !trim && !p.roll && len(p.dropLocal) == 0 && len(p.archives) == 0 {
			p.flushing = false
			p.mu.Unlock()
			return fl, false
		}
		if p.needSync {
			p.mu.Unlock()
			err := p.resync(ctx)
			p.mu.Lock()
			if err != nil {
				ops := p.queue
				p.queue = nil
				p.mu.Unlock()
				for _, op := range ops {
					op.err = fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
					close(op.done)
				}
				// Back off a little so a client retrying at once does not
				// spin against a Redis that is down.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
				continue
			}
			trim = p.trimTo > p.start.Load()
		}
		fl = p.takeLocked(trim)
		p.mu.Unlock()
		return fl, true
	}
}

// takeLocked takes queued appends, up to MaxAppendBytes (one at least),
// and the other work waiting for a flush; p.mu must be held.
func (p *Partition) takeLocked(trim bool) flushRound {
	var size int64
	n := 0
	for n < len(p.queue) && (n == 0 || size+p.queue[n].size <= int64(p.t.e.opts.MaxAppendBytes)) {
		size += p.queue[n].size
		n++
	}
	fl := flushRound{take: append([]*Pending(nil), p.queue[:n]...), trim: trim}
	p.queue = append(p.queue[:0], p.queue[n:]...)
	fl.st = flushState{
		base: p.next, bytes: p.bytes, maxTs: p.maxTs, segMin: p.segMin, segMax: p.segMax,
		segs: p.segs, trimTo: p.trimTo, roll: p.roll, producers: p.producers,
	}
	fl.drops, fl.archives = p.dropLocal, p.archives
	p.dropLocal, p.archives = nil, nil
	if trim {
		fl.trimWait, p.trimWait = p.trimWait, nil
	}
	fl.saved = p.segsSaved
	p.roll = false
	return fl
}

// plan seals the open segment if due and gives offsets to the appends
// that go in.
func (fl *flushRound) plan(settings topicSettings, now time.Time) {
	fl.st.planSegments(settings, now, len(fl.take) > 0, fl.saved)
	fl.committed, fl.changed = fl.st.assign(fl.take, settings, now)
}

// txBuffers are the flush loop's buffers, reused round after round.
type txBuffers struct {
	pl    resp.Pipeline
	enc   entry.Encoder
	idBuf []byte
}

// write builds the round's transaction: the records, the partition's
// counters and producers, the append summary, then any trim, archive
// mark, local drop and change to the segment registry.
func (tx *txBuffers) write(p *Partition, fl *flushRound) {
	st := &fl.st
	pl := &tx.pl
	pl.Reset()
	pl.Cmd("MULTI")
	stream := p.streamKey(st.segs[len(st.segs)-1].ID)
	for _, op := range fl.committed {
		for i := range op.recs {
			r := &op.recs[i]
			pairs := tx.enc.Prepare(r)
			pl.Array(3 + 2*pairs)
			pl.String("XADD")
			pl.String(stream)
			tx.idBuf = entry.AppendID(tx.idBuf[:0], r.Offset, op.codec)
			pl.Bulk(tx.idBuf)
			tx.enc.Append(pl)
		}
	}
	if st.next > st.base || len(fl.changed) > 0 {
		args := []any{"HSET", p.metaKey, "next", st.next, "bytes", st.bytes, "maxts", st.maxTs, "smin", st.segMin, "smax", st.segMax}
		for _, pid := range fl.changed {
			args = append(args, producerField(pid), st.producers[pid].encode())
		}
		pl.Cmd(args...)
	}
	if st.next > st.base {
		tx.idBuf = entry.AppendID(tx.idBuf[:0], st.next-1, 0)
		pl.Cmd("XADD", p.batchesKey, tx.idBuf, "t", st.maxTs, "b", st.bytes)
	}
	if fl.trim {
		p.planTrim(pl, st)
	}
	for _, a := range fl.archives {
		st.markArchived(a)
	}
	for id := range fl.drops {
		p.planDropLocal(pl, st, id)
	}
	if st.segsChanged {
		args := []any{"HSET", p.segmentsKey}
		for _, sg := range st.segs {
			args = append(args, sg.ID, sg.encode())
		}
		pl.Cmd(args...)
		if len(st.removed) > 0 {
			args := []any{"HDEL", p.segmentsKey}
			for _, id := range st.removed {
				args = append(args, id)
			}
			pl.Cmd(args...)
		}
	}
	pl.Cmd("EXEC")
}

// commitRound runs the round's transaction and, if Redis took it, makes
// the round's state the partition's; if it did not, the partition resyncs
// before the next round.
func (p *Partition) commitRound(ctx context.Context, pl *resp.Pipeline, fl *flushRound) error {
	st := &fl.st
	err := p.commit(ctx, pl)
	if err != nil && resp.IsConnError(err) {
		// The transaction may or may not have run: the counter written
		// with it tells.
		if serr := p.resync(ctx); serr == nil && st.next > st.base {
			p.mu.Lock()
			applied := p.next == st.next
			p.mu.Unlock()
			if applied {
				err = nil
			}
		}
	}
	p.mu.Lock()
	if err == nil {
		p.next, p.bytes, p.maxTs, p.segMin, p.segMax = st.next, st.bytes, st.maxTs, st.segMin, st.segMax
		p.segs, p.producers = st.segs, st.producers
		p.segsSaved = p.segsSaved || st.segsChanged
		p.hw.Store(st.next)
		if fl.trim && st.trimTo > p.start.Load() {
			p.start.Store(st.trimTo)
		}
	} else {
		p.needSync = true
		if st.roll {
			p.roll = true
		}
	}
	p.mu.Unlock()
	if err != nil {
		p.t.e.log.Warn("append failed", "topic", p.t.name, "partition", p.id, "records", st.next-st.base, "err", err)
		err = fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
	}
	return err
}

// index hands a committed round to the key index before its producers
// hear back, so that a KV read after an acknowledged append sees it.
func (p *Partition) index(committed []*Pending, next int64) {
	live := p.t.e.kv.live
	if live == nil || len(committed) == 0 {
		return
	}
	batches := make([][]record.Record, len(committed))
	for i, op := range committed {
		batches[i] = op.recs
	}
	live.onCommit(p, batches, next)
}

// acknowledge tells the round's appends, archive marks and trim waits
// how it went.
func (fl *flushRound) acknowledge(err error) {
	for _, op := range fl.take {
		if err != nil && op.err == nil {
			op.err = err
		}
		close(op.done)
	}
	for _, a := range fl.archives {
		a.done <- err
	}
	for _, w := range fl.trimWait {
		w <- err
	}
}

// flushState is the partition as one flush will leave it if Redis takes
// the transaction; it is applied to the Partition only on success.
type flushState struct {
	base, next, bytes, maxTs, segMin, segMax int64
	segs                                     []Segment
	segsChanged                              bool
	removed                                  []int64
	trimTo                                   int64
	roll                                     bool
	producers                                map[int64]*producerState
}

// assign checks producer sequences and gives offsets to the appends that
// go in. It returns them and the producers whose state changed.
func (st *flushState) assign(take []*Pending, settings topicSettings, now time.Time) (committed []*Pending, changed []int64) {
	st.next = st.base
	nowMs := now.UnixMilli()
	prods := st.producers
	copied := false
	for _, op := range take {
		op.base = -1
		if op.prod.ID >= 0 {
			cur := prods[op.prod.ID]
			last := op.prod.FirstSeq + int32(len(op.recs)) - 1
			dup, err := cur.check(op.prod.Epoch, op.prod.FirstSeq, last)
			if err != nil {
				op.err = err
				continue
			}
			if dup >= 0 {
				op.base = dup // a retry of a batch already in the log
				continue
			}
			if !copied {
				prods = maps.Clone(prods)
				if prods == nil {
					prods = map[int64]*producerState{}
				}
				copied = true
			}
			prods[op.prod.ID] = cur.with(op.prod.Epoch, op.prod.FirstSeq, last, st.next)
			if !slices.Contains(changed, op.prod.ID) {
				changed = append(changed, op.prod.ID)
			}
		}
		op.base = st.next
		if settings.logAppendTime {
			op.logAppendTime = nowMs
		}
		for i := range op.recs {
			r := &op.recs[i]
			r.Offset = st.next
			st.next++
			if settings.logAppendTime {
				r.Timestamp = nowMs
			}
			st.maxTs = max(st.maxTs, r.Timestamp)
			if st.segMin < 0 || r.Timestamp < st.segMin {
				st.segMin = r.Timestamp
			}
			st.segMax = max(st.segMax, r.Timestamp)
		}
		st.bytes += op.size
		committed = append(committed, op)
	}
	st.producers = prods
	return committed, changed
}

// planSegments seals the open segment when it is full or old (or a seal
// was asked for) before this flush's records go in, so no segment grows
// past segment.bytes by more than one flush; the new segment opens at the
// flush's first offset.
func (st *flushState) planSegments(settings topicSettings, now time.Time, appending, saved bool) {
	open := st.segs[len(st.segs)-1]
	hasRecords := st.base > open.Base
	full := settings.segmentBytes > 0 && st.bytes-open.StartBytes >= settings.segmentBytes
	old := settings.segmentMs > 0 && now.UnixMilli()-open.Created >= settings.segmentMs
	if !hasRecords || !(st.roll || appending && (full || old)) {
		st.roll = false
		st.segsChanged = !saved
		return
	}
	segs := append([]Segment(nil), st.segs...)
	sealed := &segs[len(segs)-1]
	sealed.Last, sealed.Bytes = st.base-1, st.bytes-sealed.StartBytes
	sealed.MinTs, sealed.MaxTs = st.segMin, st.segMax
	sealed.State, sealed.Sealed = SegmentSealed, now.UnixMilli()
	segs = append(segs, Segment{ID: open.ID + 1, Base: st.base, Last: -1, StartBytes: st.bytes, State: SegmentOpen, Local: true, Created: now.UnixMilli(), MinTs: -1, MaxTs: -1})
	st.segs, st.segsChanged, st.roll = segs, true, true
	st.segMin, st.segMax = -1, -1
}

// commit runs one transaction and checks every reply in it.
func (p *Partition) commit(ctx context.Context, pl *resp.Pipeline) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rs, err := p.t.e.rc.Exec(ctx, pl)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	defer rs.Release()
	// Queued commands answer QUEUED; a queuing error (OOM, syntax) aborts
	// the whole transaction with EXECABORT, which is what we want.
	ex := rs.At(rs.Len() - 1)
	if err := ex.Err(); err != nil {
		for i := 1; i < rs.Len()-1; i++ {
			if qerr := rs.At(i).Err(); qerr != nil {
				return fmt.Errorf("append: %w", qerr)
			}
		}
		return fmt.Errorf("append: %w", err)
	}
	if ex.IsNil() {
		return errors.New("append: transaction aborted")
	}
	var failed error
	ex.ForEach(func(r resp.Reply) bool {
		if e := r.Err(); e != nil {
			failed = e
			return false
		}
		return true
	})
	if failed != nil {
		// Commands in an EXEC that fail at run time do not roll the others
		// back. With correct counters this cannot happen; if it does, the
		// partition resyncs from Redis before the next append.
		return fmt.Errorf("append: command failed inside transaction: %w", failed)
	}
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
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	defer rs.Release()
	pl.Reset()
	for i, p := range parts {
		if err := p.loadState(rs.At(2*i), rs.At(2*i+1), nil); err != nil {
			return fmt.Errorf("load partition %s/%d: %w", p.t.name, p.id, err)
		}
		pl.Cmd("XREVRANGE", p.StreamKey(), "+", "-", "COUNT", 1)
	}
	tops, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	defer tops.Release()
	for i, p := range parts {
		top := tops.At(i)
		if err := p.loadState(rs.At(2*i), rs.At(2*i+1), &top); err != nil {
			return fmt.Errorf("load partition %s/%d: %w", p.t.name, p.id, err)
		}
	}
	return nil
}

// planTrim adds to the transaction what retention's trim to st.trimTo
// takes: whole segments below it go (their streams unlinked, cold files
// queued for deletion), the segment holding it is trimmed with XTRIM MINID.
func (p *Partition) planTrim(pl *resp.Pipeline, st *flushState) {
	target := st.trimTo
	var keep []Segment
	for i, sg := range st.segs {
		open := i == len(st.segs)-1
		switch {
		case !open && sg.Last < target:
			if sg.Local {
				pl.Cmd("UNLINK", p.streamKey(sg.ID))
			}
			if sg.File != "" {
				pl.Cmd("SADD", p.t.e.k.ColdGarbage(), "file\x00"+p.t.name+"\x00"+sg.File)
			}
			st.removed = append(st.removed, sg.ID)
		case sg.Base < target && sg.Local:
			pl.Cmd("XTRIM", p.streamKey(sg.ID), "MINID", strconv.FormatInt(target, 10))
			keep = append(keep, sg)
		default:
			keep = append(keep, sg)
		}
	}
	if len(st.removed) > 0 {
		st.segs, st.segsChanged = keep, true
	}
	pl.Cmd("XTRIM", p.batchesKey, "MINID", strconv.FormatInt(target, 10))
	pl.Cmd("HSET", p.metaKey, "start", target)
}

type archiveReq struct {
	seg       int64
	file      string
	fileBytes int64
	done      chan error
}

func (st *flushState) markArchived(a archiveReq) {
	for i, sg := range st.segs {
		if sg.ID == a.seg && sg.State == SegmentSealed {
			segs := append([]Segment(nil), st.segs...)
			segs[i].State, segs[i].File, segs[i].FileBytes = SegmentArchived, a.file, a.fileBytes
			st.segs, st.segsChanged = segs, true
		}
	}
}

// MarkArchived records in the registry that a sealed segment's records are
// in the cold tier as file. It returns once the registry is durable in
// Redis. Marking an already archived segment does nothing.
func (p *Partition) MarkArchived(ctx context.Context, seg int64, file string, fileBytes int64) error {
	done := make(chan error, 1)
	p.mu.Lock()
	p.archives = append(p.archives, archiveReq{seg, file, fileBytes, done})
	p.kickLocked()
	p.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("mark segment %d archived: %w", seg, ctx.Err())
	}
}

// DeleteRecords moves the log start up to offset (Kafka's DeleteRecords;
// -1 means the high watermark) and returns the new log start once Redis
// has it.
func (p *Partition) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: %d not in [0, %d]", ErrOffsetOutOfRange, offset, hw)
	}
	if offset <= p.start.Load() {
		return p.start.Load(), nil
	}
	done := make(chan error, 1)
	p.mu.Lock()
	p.trimTo = max(p.trimTo, offset)
	p.trimWait = append(p.trimWait, done)
	p.kickLocked()
	p.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			return -1, err
		}
		return p.start.Load(), nil
	case <-ctx.Done():
		return -1, fmt.Errorf("delete records: %w", ctx.Err())
	}
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

// DropLocal asks for an archived segment's stream to leave Redis.
func (p *Partition) DropLocal(seg int64) {
	p.mu.Lock()
	if p.dropLocal == nil {
		p.dropLocal = map[int64]bool{}
	}
	p.dropLocal[seg] = true
	p.kickLocked()
	p.mu.Unlock()
}

// rollIfIdle seals the open segment when it holds records and is older
// than segment.ms, so a quiet partition's data can still be archived.
func (p *Partition) rollIfIdle(now time.Time) {
	ms := p.t.currentSettings().segmentMs
	p.mu.Lock()
	defer p.mu.Unlock()
	open := p.segs[len(p.segs)-1]
	if p.next > open.Base && ms > 0 && now.UnixMilli()-open.Created >= ms {
		p.roll = true
		p.kickLocked()
	}
}

// planDropLocal removes an archived segment's stream from Redis: its
// records are read from the cold tier from then on.
func (p *Partition) planDropLocal(pl *resp.Pipeline, st *flushState, id int64) {
	for i, sg := range st.segs {
		if sg.ID != id || i == len(st.segs)-1 || sg.State != SegmentArchived || !sg.Local {
			continue
		}
		segs := append([]Segment(nil), st.segs...)
		segs[i].Local = false
		st.segs, st.segsChanged = segs, true
		pl.Cmd("UNLINK", p.streamKey(id))
	}
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
