package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
type Partition struct {
	t       *Topic
	id      int32
	metaKey string
	// batchesKey is the per-append summary stream (see keys.batches).
	batchesKey string

	hw    atomic.Int64 // offsets below hw are committed and readable
	start atomic.Int64 // log start offset

	mu       sync.Mutex
	segment  int64 // open segment id
	next     int64 // next offset to assign; equals hw when idle
	bytes    int64 // bytes appended since offset 0 (entry.EncodedSize)
	maxTs    int64 // running max timestamp
	queue    []*Pending
	flushing bool
	needSync bool // the last transaction's outcome is unknown
	closed   bool
	trimTo   int64 // retention target; a trim is pending while trimTo > start
	waiters  map[chan<- struct{}]struct{}
}

func newPartition(t *Topic, id int32) *Partition {
	return &Partition{
		t:          t,
		id:         id,
		metaKey:    t.e.k.partition(t.name, id),
		batchesKey: t.e.k.batches(t.name, id),
		maxTs:      -1,
		waiters:    make(map[chan<- struct{}]struct{}),
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
	return p.streamKey(p.segment)
}

func (p *Partition) streamKey(seg int64) string { return p.t.e.k.stream(p.t.name, p.id, seg) }

// Bytes is the number of bytes appended over the partition's life.
func (p *Partition) Bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

func (p *Partition) loadState(meta, top resp.Reply) error {
	if err := meta.Err(); err != nil {
		return err
	}
	var f []resp.Reply
	f = meta.Elems(f)
	if len(f) != 5 {
		return fmt.Errorf("unexpected HMGET reply")
	}
	num := func(r resp.Reply, def int64) (int64, error) {
		if r.IsNil() {
			return def, nil
		}
		return strconv.ParseInt(string(r.Bytes()), 10, 64)
	}
	var err error
	var vals [5]int64
	defs := [5]int64{0, 0, 0, -1, 0}
	for i := range vals {
		if vals[i], err = num(f[i], defs[i]); err != nil {
			return fmt.Errorf("bad counter in %s: %w", p.metaKey, err)
		}
	}
	next, start := vals[0], vals[1]
	// The counters are written in the same transaction as the entries, so
	// they agree with the stream; checking the stream's last entry anyway
	// costs nothing and guards against hand-edited keys.
	if vals[4] == 0 && top.Err() == nil && top.Len() > 0 {
		var ent []resp.Reply
		ent = top.Elems(ent)
		var e2 []resp.Reply
		e2 = ent[0].Elems(e2)
		if len(e2) == 2 {
			if off, err := parseEntryID(e2[0].Bytes()); err == nil && off+1 > next {
				p.t.e.log.Warn("partition counter behind its stream; repairing", "topic", p.t.name, "partition", p.id, "counter", next, "stream_next", off+1)
				next = off + 1
			}
		}
	}
	p.mu.Lock()
	p.next, p.bytes, p.maxTs, p.segment = next, vals[2], vals[3], vals[4]
	p.trimTo = start
	p.mu.Unlock()
	p.hw.Store(next)
	p.start.Store(start)
	return nil
}

// parseEntryID returns the offset of a stream entry ID "<offset>-<seq>".
func parseEntryID(id []byte) (int64, error) {
	var off int64
	i := 0
	for ; i < len(id) && id[i] != '-'; i++ {
		c := id[i]
		if c < '0' || c > '9' || off > (1<<62) {
			return 0, fmt.Errorf("bad stream entry id %q", id)
		}
		off = off*10 + int64(c-'0')
	}
	if i == 0 {
		return 0, fmt.Errorf("bad stream entry id %q", id)
	}
	return off, nil
}

// Pending is an append in flight. Wait for it with Wait.
type Pending struct {
	recs          []record.Record
	size          int64
	base          int64
	logAppendTime int64
	err           error
	done          chan struct{}
}

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
	pd := &Pending{recs: recs, done: make(chan struct{}), logAppendTime: -1}
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
	start := !p.flushing
	p.flushing = true
	p.mu.Unlock()
	if start {
		go p.flushLoop()
	}
	return pd
}

func (p *Partition) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.notify()
}

// flushLoop runs while there is work: it takes queued appends (up to
// MaxAppendBytes) and commits them in one MULTI/EXEC round trip.
func (p *Partition) flushLoop() {
	ctx := context.Background()
	enc := new(entry.Encoder)
	var pl resp.Pipeline
	for {
		p.mu.Lock()
		trim := p.trimTo > p.start.Load()
		if len(p.queue) == 0 && !trim {
			p.flushing = false
			p.mu.Unlock()
			return
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
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		var take []*Pending
		var size int64
		n := 0
		for n < len(p.queue) && (n == 0 || size+p.queue[n].size <= int64(p.t.e.opts.MaxAppendBytes)) {
			size += p.queue[n].size
			n++
		}
		take = append(take, p.queue[:n]...)
		p.queue = append(p.queue[:0], p.queue[n:]...)
		base, bytes, maxTs := p.next, p.bytes, p.maxTs
		trimTo, seg := p.trimTo, p.segment
		p.mu.Unlock()

		settings := p.t.currentSettings()
		now := time.Now().UnixMilli()
		next := base
		for _, op := range take {
			op.base = next
			if settings.logAppendTime {
				op.logAppendTime = now
			}
			for i := range op.recs {
				r := &op.recs[i]
				r.Offset = next
				next++
				if settings.logAppendTime {
					r.Timestamp = now
				}
				maxTs = max(maxTs, r.Timestamp)
			}
			bytes += op.size
		}

		stream := p.streamKey(seg)
		pl.Reset()
		pl.Cmd("MULTI")
		var idBuf []byte
		for _, op := range take {
			for i := range op.recs {
				r := &op.recs[i]
				pairs := enc.Prepare(r)
				pl.Array(3 + 2*pairs)
				pl.String("XADD")
				pl.String(stream)
				idBuf = strconv.AppendInt(idBuf[:0], r.Offset, 10)
				idBuf = append(idBuf, "-1"...)
				pl.Bulk(idBuf)
				enc.Append(&pl)
			}
		}
		if next > base {
			pl.Cmd("HSET", p.metaKey, "next", next, "bytes", bytes, "maxts", maxTs)
			pl.Cmd("XADD", p.batchesKey, strconv.FormatInt(next-1, 10)+"-1", "t", maxTs, "b", bytes)
		}
		if trim {
			pl.Cmd("XTRIM", stream, "MINID", strconv.FormatInt(trimTo, 10))
			pl.Cmd("XTRIM", p.batchesKey, "MINID", strconv.FormatInt(trimTo, 10))
			pl.Cmd("HSET", p.metaKey, "start", trimTo)
		}
		pl.Cmd("EXEC")
		err := p.commit(ctx, &pl)
		if err != nil && resp.IsConnError(err) {
			// The transaction may or may not have run: the counter written
			// with it tells.
			if serr := p.resync(ctx); serr == nil {
				p.mu.Lock()
				applied := p.next == next
				p.mu.Unlock()
				if applied {
					err = nil
				}
			}
		}
		p.mu.Lock()
		if err == nil {
			p.next, p.bytes, p.maxTs = next, bytes, maxTs
			p.hw.Store(next)
			if trim && trimTo > p.start.Load() {
				p.start.Store(trimTo)
			}
		} else {
			p.needSync = true
		}
		p.mu.Unlock()
		if err != nil {
			p.t.e.log.Warn("append failed", "topic", p.t.name, "partition", p.id, "records", next-base, "err", err)
			err = fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
		}
		for _, op := range take {
			op.err = err
			close(op.done)
		}
		if err == nil && next > base {
			p.notify()
		}
	}
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

// resync reloads the partition's counters from Redis.
func (p *Partition) resync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var pl resp.Pipeline
	p.mu.Lock()
	seg := p.segment
	p.mu.Unlock()
	pl.Cmd("HMGET", p.metaKey, "next", "start", "bytes", "maxts", "segment")
	pl.Cmd("XREVRANGE", p.streamKey(seg), "+", "-", "COUNT", 1)
	rs, err := p.t.e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("resync %s: %w", p.metaKey, err)
	}
	defer rs.Release()
	if err := p.loadState(rs.At(0), rs.At(1)); err != nil {
		return fmt.Errorf("resync %s: %w", p.metaKey, err)
	}
	p.mu.Lock()
	p.needSync = false
	p.mu.Unlock()
	return nil
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
