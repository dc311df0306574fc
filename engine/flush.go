package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/resp"
)

// The flush loop: each round collects queued work, plans it, writes it
// as one MULTI/EXEC, commits it, indexes it and acknowledges it.

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
		err := p.commitRound(ctx, &tx, &fl)
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
	epoch    int32      // the leader epoch the round writes under
	replicas int        // Options.WaitReplicas
	wait     bool       // an acks=all append is in the round: WAIT for replicas
	take     []*Pending // appends taken from the queue
	st       flushState
	saved    bool // the segment registry exists in Redis
	trim     bool // a trim is pending
	trimWait []chan error
	drops    map[int64]bool
	archives []archiveReq
	zstd     bool // korvet.storage.compression=zstd: values go compressed
	zstdMin  int  // except those shorter (korvet.storage.compression.min.bytes)

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
		if p.leadEpoch == 0 {
			// Not (or no longer) the leader: what waits fails, and the
			// leader does the partition's work.
			p.failQueuedLocked(p.notLeader())
			p.roll, p.dropLocal = false, nil
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
		txns: p.txns,
	}
	fl.drops, fl.archives = p.dropLocal, p.archives
	p.dropLocal, p.archives = nil, nil
	if trim {
		fl.trimWait, p.trimWait = p.trimWait, nil
	}
	fl.saved = p.segsSaved
	fl.epoch = p.leadEpoch
	fl.replicas = p.t.e.opts.WaitReplicas
	p.roll = false
	return fl
}

// plan seals the open segment if due and gives offsets to the appends
// that go in.
func (fl *flushRound) plan(settings topicSettings, now time.Time) {
	fl.zstd, fl.zstdMin = settings.zstd, settings.zstdMin
	fl.st.planSegments(settings, now, len(fl.take) > 0, fl.saved)
	fl.committed, fl.changed = fl.st.assign(fl.take, settings, now)
	fl.wait = false
	if fl.replicas > 0 {
		for _, op := range fl.take {
			fl.wait = fl.wait || op.allReplicas
		}
	}
}

// txBuffers are the flush loop's buffers, reused round after round.
type txBuffers struct {
	check resp.Pipeline // WATCH and the epoch check
	pl    resp.Pipeline // MULTI, the round's commands, EXEC
	enc   entry.Encoder
	idBuf []byte
}

// cmdSink takes commands for a round's transaction.
type cmdSink interface{ Cmd(args ...any) }

// roundWriter is where writeCmds puts a round: a resp.Pipeline (a
// benchmark writes it elsewhere too).
type roundWriter interface {
	cmdSink
	Array(n int)
	String(s string)
	Bulk(b []byte)
}

// Fencing: a round runs as WATCH meta + HMGET leader, leader_epoch (one
// round trip), then, if this broker still leads at the round's epoch,
// MULTI ... EXEC (another) on the same connection. A claim or transfer
// rewrites the meta hash, so one that lands between the check and the
// EXEC aborts the EXEC: a deposed leader writes nothing. Measured against
// running the round inside a Lua script that checks the epoch first
// (one round trip): the script cost Redis about 40% more CPU per 100 B
// record (every command goes through redis.call), and produce slowed
// more than with the extra round trip (see BenchmarkCommitRound).

// errFenced: the round's epoch check failed; nothing was written.
var errFenced = errors.New("fenced: the partition's leader epoch moved")

// write builds the round's transaction: the records, the partition's
// counters and producers, the append summary, then any trim, archive
// mark, local drop and change to the segment registry.
func (tx *txBuffers) write(p *Partition, fl *flushRound) {
	pl := &tx.pl
	pl.Reset()
	pl.Cmd("MULTI")
	tx.writeCmds(p, fl, pl)
	pl.Cmd("EXEC")
	if fl.wait {
		// On the connection that ran the EXEC: WAIT counts the replicas
		// that have everything this connection wrote.
		pl.Cmd("WAIT", fl.replicas, p.t.e.opts.WaitTimeout.Milliseconds())
	}
}

func (tx *txBuffers) writeCmds(p *Partition, fl *flushRound, c roundWriter) {
	st := &fl.st
	stream := p.streamKey(st.segs[len(st.segs)-1].ID)
	tx.enc.Zstd, tx.enc.ZstdMin = nil, fl.zstdMin
	if fl.zstd {
		tx.enc.Zstd = p.t.compressor()
	}
	for _, op := range fl.committed {
		for i := range op.recs {
			r := &op.recs[i]
			if tx.enc.Zstd != nil && op.zc != nil {
				var frame []byte
				if op.frames != nil {
					frame = op.frames[i]
				}
				tx.enc.UseFrame(op.zc, frame)
			}
			pairs := tx.enc.PrepareTxn(r, op.txnTag, op.marker != nil)
			c.Array(3 + 2*pairs)
			c.String("XADD")
			c.String(stream)
			tx.idBuf = entry.AppendID(tx.idBuf[:0], r.Offset, op.codec)
			c.Bulk(tx.idBuf)
			tx.enc.Append(c)
		}
	}
	// A round that waits for replicas always writes, so that its WAIT
	// also covers a retried batch written by an earlier round: replicas
	// apply the replication stream in order.
	if st.next > st.base || len(fl.changed) > 0 || fl.wait {
		args := []any{"HSET", p.metaKey, "next", st.next, "bytes", st.bytes, "maxts", st.maxTs, "smin", st.segMin, "smax", st.segMax}
		for _, pid := range fl.changed {
			args = append(args, producerField(pid), st.producers[pid].encode())
		}
		var closed []any
		for _, pid := range st.txnChanged {
			if o := st.txns[pid]; o != nil {
				args = append(args, txnField(pid), o.encode())
			} else {
				closed = append(closed, txnField(pid))
			}
		}
		c.Cmd(args...)
		if len(closed) > 0 {
			c.Cmd(append([]any{"HDEL", p.metaKey}, closed...)...)
		}
	}
	for _, a := range st.newAborted {
		tx.idBuf = entry.AppendID(tx.idBuf[:0], a.marker, 0)
		c.Cmd("XADD", p.abortedKey, tx.idBuf, "pid", a.pid, "first", a.first)
	}
	if st.next > st.base {
		tx.idBuf = entry.AppendID(tx.idBuf[:0], st.next-1, 0)
		c.Cmd("XADD", p.batchesKey, tx.idBuf, "t", st.maxTs, "b", st.bytes)
	}
	if fl.trim {
		p.planTrim(c, st)
	}
	for _, a := range fl.archives {
		st.markArchived(a)
	}
	for id := range fl.drops {
		p.planDropLocal(c, st, id)
	}
	if st.segsChanged {
		args := []any{"HSET", p.segmentsKey}
		for _, sg := range st.segs {
			args = append(args, sg.ID, sg.encode())
		}
		c.Cmd(args...)
		if len(st.removed) > 0 {
			args := []any{"HDEL", p.segmentsKey}
			for _, id := range st.removed {
				args = append(args, id)
			}
			c.Cmd(args...)
		}
	}
}

// commitRound runs the round's transaction and, if Redis took it, makes
// the round's state the partition's; if it did not, the partition resyncs
// before the next round.
func (p *Partition) commitRound(ctx context.Context, tx *txBuffers, fl *flushRound) error {
	st := &fl.st
	err := p.commit(ctx, &tx.check, &tx.pl, fl)
	var short error
	if errors.Is(err, ErrNotEnoughReplicas) {
		// Written; only the acks=all appends hear of the missing replicas.
		short, err = err, nil
	}
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
	if short != nil {
		for _, op := range fl.take {
			if op.allReplicas && op.err == nil {
				op.err = short
			}
		}
	}
	p.mu.Lock()
	if err == nil {
		p.next, p.bytes, p.maxTs, p.segMin, p.segMax = st.next, st.bytes, st.maxTs, st.segMin, st.segMax
		p.segs, p.producers, p.txns = st.segs, st.producers, st.txns
		for _, a := range st.newAborted {
			// A resync after an unclear EXEC may have loaded them already.
			if n := len(p.aborted); n == 0 || p.aborted[n-1].marker < a.marker {
				p.aborted = append(p.aborted, a)
			}
		}
		p.segsSaved = p.segsSaved || st.segsChanged
		p.hw.Store(st.next)
		if fl.trim && st.trimTo > p.start.Load() {
			p.start.Store(st.trimTo)
			p.trimAbortedLocked(st.trimTo)
		}
	} else {
		p.needSync = true
		if st.roll {
			p.roll = true
		}
	}
	p.mu.Unlock()
	switch {
	case errors.Is(err, errFenced):
		p.t.e.log.Info("append fenced: another broker leads the partition now", "topic", p.t.name, "partition", p.id, "epoch", fl.epoch)
		// Only the leadership this round wrote under: the partition may
		// have been taken up again at a later epoch meanwhile.
		p.stepDownBelow(fl.epoch + 1)
		p.t.e.wakeControl()
		err = fmt.Errorf("%w; %v", p.notLeader(), err)
	case err != nil:
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
	batches := make([]kvBatch, 0, len(committed))
	for _, op := range committed {
		if op.marker != nil {
			continue // control records are no key's value
		}
		b := kvBatch{recs: op.recs, pid: -1}
		if op.prod.Transactional {
			b.pid = op.prod.ID
		}
		batches = append(batches, b)
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
	// Open transactions (copy on write: txnsCopied once st owns txns),
	// the producers whose txn:<pid> field changes, and the transactions
	// this round aborts.
	txns       map[int64]*openTxn
	txnsCopied bool
	txnChanged []int64
	newAborted []abortedTxn
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
		if op.marker != nil {
			var ok bool
			if prods, ok = st.planMarker(op, prods, &copied, &changed); !ok {
				continue // no transaction to end: nothing written
			}
		} else if op.prod.ID >= 0 {
			cur := prods[op.prod.ID]
			last := op.prod.FirstSeq + int32(len(op.recs)) - 1
			dup, err := cur.check(op.prod.Epoch, op.prod.FirstSeq, last)
			if err == nil {
				err = st.checkTxn(op)
			}
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
		if op.prod.Transactional {
			st.planTxn(op)
		}
	}
	st.producers = prods
	return committed, changed
}

// commit runs the round fenced (see txBuffers) and checks every reply.
// On a Redis Cluster, a slot that moves or fails over answers MOVED, ASK,
// TRYAGAIN or CLUSTERDOWN instead: none of the round ran, and it is sent
// again on a new connection, which follows the refreshed slot map, for
// up to commitRedirectBudget.
func (p *Partition) commit(ctx context.Context, check, pl *resp.Pipeline, fl *flushRound) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	give := time.Now().Add(commitRedirectBudget)
	backoff := 5 * time.Millisecond
	for {
		err := p.commitOnce(ctx, check, pl, fl)
		if err == nil || !resp.IsRedirect(err) || time.Now().After(give) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// commitRedirectBudget bounds how long an append round keeps following a
// cluster's redirects before it fails with a retriable error.
const commitRedirectBudget = 3 * time.Second

// errBehind: Redis's partition counter is not where this leader left it.
// With one writer per epoch that means Redis lost acknowledged writes:
// a master failed over to a replica that did not have them (see
// redis.wait_replicas). The partition reloads from Redis.
var errBehind = errors.New("the partition in Redis is not where this broker left it (a Redis failover lost writes?)")

func (p *Partition) commitOnce(ctx context.Context, check, pl *resp.Pipeline, fl *flushRound) error {
	cn, err := p.t.e.rc.Conn(ctx)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	clean := false
	defer func() {
		if clean {
			cn.Release() // EXEC ended the MULTI and the WATCH
		} else {
			cn.Close()
		}
	}()
	check.Reset()
	check.Cmd("WATCH", p.metaKey)
	check.Cmd("HMGET", p.metaKey, "leader", "leader_epoch", "next")
	rs, err := cn.Exec(ctx, check)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	for i := range 2 {
		if err := rs.At(i).Err(); err != nil {
			rs.Release()
			return fmt.Errorf("append to %s: check: %w", p.metaKey, err)
		}
	}
	var f []resp.Reply
	f = rs.At(1).Elems(f)
	ok := len(f) == 3 && string(f[0].Bytes()) == strconv.Itoa(int(p.t.e.opts.NodeID)) && string(f[1].Bytes()) == strconv.Itoa(int(fl.epoch))
	var next int64
	if ok && !f[2].IsNil() {
		next, err = strconv.ParseInt(string(f[2].Bytes()), 10, 64)
		ok = err == nil
	}
	rs.Release()
	if !ok {
		return fmt.Errorf("%w (check)", errFenced)
	}
	if next != fl.st.base {
		return fmt.Errorf("append to %s: %w: next is %d in Redis, %d here", p.metaKey, errBehind, next, fl.st.base)
	}
	rs, err = cn.Exec(ctx, pl)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	defer rs.Release()
	clean = true
	last := rs.Len() - 1
	if fl.wait {
		last-- // the WAIT after the EXEC
	}
	// Queued commands answer QUEUED; a queuing error (OOM, syntax, or a
	// cluster redirect) aborts the whole transaction with EXECABORT,
	// which is what we want.
	ex := rs.At(last)
	if err := ex.Err(); err != nil {
		for i := 1; i < last; i++ {
			if qerr := rs.At(i).Err(); qerr != nil {
				return fmt.Errorf("append: %w", qerr)
			}
		}
		return fmt.Errorf("append: %w", err)
	}
	if ex.IsNil() {
		return fmt.Errorf("%w (exec aborted)", errFenced) // the meta hash changed since WATCH
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
	if fl.wait {
		n, err := rs.At(last + 1).Int()
		if err != nil {
			return fmt.Errorf("%w: WAIT: %v", ErrNotEnoughReplicas, err)
		}
		if n < int64(fl.replicas) {
			return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotEnoughReplicas, n, fl.replicas, p.t.e.opts.WaitTimeout)
		}
	}
	return nil
}
