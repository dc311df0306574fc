package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
)

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
	txns       []record.Txn // parallel to recs; empty when none is transactional
	bytes      int          // the size of the replies read
	releases   []func()
	err        error
}

// Reads ahead of the applier: up to keyReadsAhead reads in flight per
// partition, each of about keyReadBytes of reply (at most keyScanCount
// entries), so that Redis always has the next read queued while korvet
// parses and indexes, and a partition holds a few MiB of replies at most.
const (
	keyReadsAhead = 6
	keyReadBytes  = 1 << 20
	// keyReadFirst is the size of the first read, alone in flight: the
	// entry size is not known yet.
	keyReadFirst = 16
)

// fillBufs recycles the records of a fill's chunks.
type fillBufs struct{ free chan *fillChunk }

func (fb *fillBufs) get() *fillChunk {
	select {
	case c := <-fb.free:
		return c
	default:
		return &fillChunk{}
	}
}

// put releases c's replies and keeps its slices for another read.
func (fb *fillBufs) put(c *fillChunk) {
	for _, r := range c.releases {
		r()
	}
	clear(c.releases)
	*c = fillChunk{recs: c.recs[:0], txns: c.txns[:0], releases: c.releases[:0]}
	select {
	case fb.free <- c:
	default:
	}
}

// fill applies the partition's log from its checkpoint up to limit (the
// last stable offset when limit < 0, following it until caught up; never
// past it, see kv_txn.go). Reads run ahead of the applier, so Redis and
// Pebble work in parallel. A bulk index (a rebuild) loads the records
// into sorted tables (loadChunk) instead of batches.
func (kv *kvIndex) fill(ctx context.Context, kp *kvPart, limit int64, progress *atomic.Int64) error {
	p := kp.p
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	target := func() int64 {
		if limit >= 0 {
			return min(limit, p.kvTarget())
		}
		return p.kvTarget()
	}
	kv.closeMu.RLock()
	gen := kv.gen
	var ld *partLoad
	if kv.bulk {
		ld = &partLoad{l: kv.ix.NewLoader(p.t.id, p.id)}
		defer ld.l.Reset() // drops a table written but not ingested (after an error)
	}
	kv.closeMu.RUnlock()
	kp.mu.Lock()
	from := max(kp.applied, p.LogStart())
	kp.mu.Unlock()
	if ld != nil {
		ld.next = from
		// Room for the whole span when it fits the budget (offsets bound
		// records; keys guessed at 16 bytes).
		n := int(min(max(target()-from, 0), loadBudget/(index.LoadEntrySize+16)))
		ld.l.Grow(n, 16*n)
	}

	// Offsets are dense (compaction only thins them), so the log ahead
	// splits into windows of offsets read concurrently, a few at a time,
	// and handed to the applier in order. A window is sized from the
	// entries read so far to about keyReadBytes of reply.
	bufs := &fillBufs{free: make(chan *fillChunk, keyReadsAhead+2)}
	chunks := make(chan *fillChunk, 1)
	go func() {
		defer close(chunks)
		var queue []chan *fillChunk
		var seen, seenBytes int64
		probed := false
		at := from
		drain := func() {
			for _, f := range queue {
				bufs.put(<-f)
			}
			queue = nil
		}
		for {
			// One small read first, until the entry size is known.
			for len(queue) < keyReadsAhead && (probed || len(queue) == 0) {
				width := int64(keyReadFirst)
				if seen > 0 {
					width = min(max(keyReadBytes*seen/max(seenBytes, 1), 1), keyScanCount)
				}
				to := min(target(), at+width)
				if at >= to {
					break
				}
				fut := make(chan *fillChunk, 1)
				c := bufs.get()
				go func(a, b int64) { readRange(ctx, p, a, b, c); fut <- c }(at, to)
				queue = append(queue, fut)
				at = to
			}
			if len(queue) == 0 {
				return
			}
			c := <-queue[0]
			queue = queue[1:]
			seen, seenBytes, probed = seen+int64(len(c.recs)), seenBytes+int64(c.bytes), true
			failed := c.err != nil // c is the applier's once sent
			if failed {
				drain()
			}
			select {
			case chunks <- c:
			case <-ctx.Done():
				bufs.put(c)
				drain()
				return
			}
			if failed {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for c := range chunks {
			bufs.put(c)
		}
	}()

	for c := range chunks {
		if errors.Is(c.err, ErrOffsetOutOfRange) && c.from < p.LogStart() {
			// Retention moved past the checkpoint meanwhile: go again
			// from the new log start.
			bufs.put(c)
			kv.nudge()
			break
		}
		if err := c.err; err != nil {
			bufs.put(c)
			return err
		}
		var err error
		if ld != nil {
			err = kv.loadChunk(ctx, kp, c, limit, gen, ld, progress)
		} else {
			err = kv.applyChunk(kp, c, limit, gen, progress)
		}
		bufs.put(c)
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
	if ld != nil {
		if err := kv.loadFlush(ctx, kp, gen, ld); err != nil {
			return err
		}
	}
	// Caught up as far as the reads went; the commit path takes over when
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
	if limit < 0 && kp.applied >= p.kvTarget() {
		kp.setReady()
	} else if limit < 0 {
		kv.nudge()
	}
	return nil
}

// readRange reads the keys of records [a, b) into c, for fill, in as many
// reads as segment boundaries take.
func readRange(ctx context.Context, p *Partition, a, b int64, c *fillChunk) {
	c.from, c.next = a, a
	for c.next < b {
		recs, txns, next, n, release, err := p.readKeys(ctx, c.next, b, c.recs, c.txns)
		if err != nil {
			c.err = err
			return
		}
		c.recs, c.txns, c.bytes = recs, txns, c.bytes+n
		c.releases = append(c.releases, release)
		if next <= c.next {
			break // the log is shorter than b (cannot happen below the high watermark)
		}
		c.next = next
	}
}

// applyChunk indexes one chunk of records.
func (kv *kvIndex) applyChunk(kp *kvPart, c *fillChunk, limit int64, gen uint64, progress *atomic.Int64) error {
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
		return nil // the commit path got there first
	}
	// Taken now, after the reads' target: every transaction that ended
	// below end is in ab when it was aborted.
	_, ab := p.stableView(kp.applied)
	b := kv.ix.NewBatch()
	defer b.Close()
	n := 0
	for i := range c.recs {
		r := &c.recs[i]
		if r.Offset < kp.applied || r.Offset >= end {
			continue
		}
		if skipTxn(c.txns, i, r.Offset, ab) {
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
			behind := kp.p.kvTarget() - kp.applied
			kp.mu.Unlock()
			return fmt.Errorf("%w: partition %d of %s is catching up (%d records behind)", ErrKVUnavailable, kp.p.id, kt.t.name, behind)
		}
	}
	return nil
}
