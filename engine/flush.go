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
// as one fenced MULTI/EXEC, sends it, and once Redis has answered,
// commits it, indexes it and acknowledges it. While a round is in flight
// the next one is planned on top of it and sent behind it
// (flush_window.go).

// flushLoop runs while there is work: it takes queued appends (up to
// MaxAppendBytes) and commits them, with any pending segment roll, trim or
// local drop, in one MULTI/EXEC.
func (p *Partition) flushLoop() {
	defer p.t.e.flushers.Done()
	ctx := p.t.e.bg
	w, _ := p.t.e.windows.Get().(*window)
	if w == nil {
		w = &window{}
	}
	defer p.t.e.putWindow(w)
	for {
		r := w.free()
		if last := w.last(); last != nil {
			ok := false
			if r.fl, ok = p.collectBehind(ctx, &last.fl); !ok {
				p.finishOldest(ctx, w)
				continue
			}
		} else {
			ok := false
			if r.fl, ok = p.collect(ctx); !ok {
				return
			}
		}
		r.fl.plan(p.t.currentSettings(), time.Now())
		r.tx.write(p, &r.fl)
		p.send(ctx, w, r)
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
	fl := flushRound{take: p.takeQueueLocked(), trim: trim}
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

// takeQueueLocked takes queued appends, up to MaxAppendBytes (one at
// least); p.mu must be held.
func (p *Partition) takeQueueLocked() []*Pending {
	var size int64
	n := 0
	for n < len(p.queue) && (n == 0 || size+p.queue[n].size <= int64(p.t.e.opts.MaxAppendBytes)) {
		size += p.queue[n].size
		n++
	}
	take := append([]*Pending(nil), p.queue[:n]...)
	p.queue = append(p.queue[:0], p.queue[n:]...)
	return take
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

// txBuffers are a round's buffers, reused round after round.
type txBuffers struct {
	head  resp.Pipeline // WATCH and the fence check
	pl    resp.Pipeline // MULTI, the round's commands, EXEC (and WAIT)
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

// Fencing: a round is sent as
//
//	WATCH meta fence
//	EVAL fenceScript meta fence <node> <epoch> <base>
//	MULTI ... EXEC
//
// in one write. The script checks that this broker leads at the round's
// epoch and that the partition's next offset in Redis is the round's
// first; if not, it increments the fence key, which the round WATCHes, so
// its EXEC aborts. A claim or transfer after the WATCH rewrites the meta
// hash, which aborts the EXEC as well: a deposed leader writes nothing.
// Since the check needs no answer before the MULTI, the next round can be
// sent right behind this one (flush_window.go); it starts where this one
// ends, so if this one fails, the next one's check fails too.
//
// Measured against running the whole round inside a Lua script that
// checks the epoch first: the script cost Redis about 40% more CPU per
// 100 B record (every command goes through redis.call); against a WATCH
// and HMGET answered before the MULTI is sent (korvet's earlier fence,
// still used after a cluster redirect: checkedRound), one round trip less
// per round and no wait between rounds (see BenchmarkCommitRound).
var fenceScript = `
local m = redis.call('HMGET', KEYS[1], 'leader', 'leader_epoch', 'next')
if m[1] == ARGV[1] and m[2] == ARGV[2] and (m[3] or '0') == ARGV[3] then return 1 end
redis.call('INCR', KEYS[2])
return {m[1] or '', m[2] or '', m[3] or ''}
`

// errFenced: the round's epoch check failed; nothing was written.
var errFenced = errors.New("fenced: the partition's leader epoch moved")

// write builds the round's transaction: the records, the partition's
// counters and producers, the append summary, then any trim, archive
// mark, local drop and change to the segment registry.
func (tx *txBuffers) write(p *Partition, fl *flushRound) {
	tx.head.Reset()
	tx.head.Cmd("WATCH", p.metaKey, p.fenceKey)
	tx.head.Cmd("EVAL", fenceScript, 2, p.metaKey, p.fenceKey,
		strconv.Itoa(int(p.t.e.opts.NodeID)), strconv.Itoa(int(fl.epoch)), strconv.FormatInt(fl.st.base, 10))
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

// commitRound runs the round's transaction on its own and settles it.
func (p *Partition) commitRound(ctx context.Context, tx *txBuffers, fl *flushRound) error {
	err := p.commit(ctx, tx, fl)
	if err != nil && resp.IsConnError(err) {
		return p.unclear(ctx, []*flushRound{fl}, err)[0]
	}
	return p.settle(fl, err)
}

// settle makes a round's state the partition's if Redis took it; if it
// did not, the partition resyncs before the next round. It returns what
// the round's appends hear.
func (p *Partition) settle(fl *flushRound, err error) error {
	st := &fl.st
	var short error
	if errors.Is(err, ErrNotEnoughReplicas) {
		// Written; only the acks=all appends hear of the missing replicas.
		short, err = err, nil
	}
	if short != nil {
		fl.shortOfReplicas(short)
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
			p.noteRemoval()
		}
		if st.segsChanged {
			p.noteRemoval() // a segment sealed, archived, trimmed or dropped
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

// shortOfReplicas tells the round's acks=all appends that their records
// are written but not confirmed by enough replicas.
func (fl *flushRound) shortOfReplicas(err error) {
	for _, op := range fl.take {
		if op.allReplicas && op.err == nil {
			op.err = err
		}
	}
}

// unclear settles rounds sent one behind the other on a connection that
// failed (err) before all their replies came: each may or may not have
// run. The partition's counter in Redis tells: the rounds are applied in
// order, each only where the one before it ended, so those ending at or
// below the counter ran and the others did not. It returns what each
// round's appends hear.
func (p *Partition) unclear(ctx context.Context, rounds []*flushRound, err error) []error {
	errs := make([]error, len(rounds))
	serr := p.resync(ctx)
	p.mu.Lock()
	next, lead := p.next, p.leadEpoch
	p.mu.Unlock()
	// The counter must stand where one of these rounds began or ended,
	// and this broker must still lead at their epoch: else another
	// writer moved it, and nothing can be told.
	known := serr == nil && lead == rounds[0].epoch && next == rounds[0].st.base
	for _, fl := range rounds {
		known = known || serr == nil && lead == fl.epoch && next == fl.st.next
	}
	for i, fl := range rounds {
		if known && fl.st.next > fl.st.base && fl.st.next <= next {
			if fl.wait {
				// The WAIT's answer was lost with the connection.
				fl.shortOfReplicas(fmt.Errorf("%w: the connection to Redis failed before WAIT answered: %v", ErrNotEnoughReplicas, err))
			}
			continue // the resync loaded the state it left
		}
		p.mu.Lock()
		p.needSync = true
		if fl.st.roll {
			p.roll = true
		}
		p.mu.Unlock()
		p.t.e.log.Warn("append failed", "topic", p.t.name, "partition", p.id, "records", fl.st.next-fl.st.base, "err", err)
		errs[i] = fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
	}
	return errs
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
// again as a checkedRound on a new connection, which follows the
// refreshed slot map (and an ASK to the node importing the slot), for up
// to commitRedirectBudget. So is a round whose EXEC aborted although its
// check passed.
func (p *Partition) commit(ctx context.Context, tx *txBuffers, fl *flushRound) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cn, err := p.t.e.rc.Conn(ctx)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	err = cn.Send(ctx, &tx.head, &tx.pl)
	if err == nil {
		err = p.receiveRound(ctx, cn, fl)
	}
	p.doneWith(cn, err)
	return p.retryChecked(ctx, tx, fl, err)
}

// doneWith returns a round's connection to the pool, or drops it when
// the round left it in doubt.
func (p *Partition) doneWith(cn *resp.Conn, err error) {
	if err == nil {
		cn.Release() // EXEC ended the MULTI and the WATCH
	} else {
		cn.Close()
	}
}

// retryChecked runs again, as checkedRound, a round that err says did not
// run and may run now: a cluster redirect, or an EXEC aborted although
// the round's check passed (a leadership move after the WATCH, which the
// check now tells, or another round's fence). Other outcomes stand.
func (p *Partition) retryChecked(ctx context.Context, tx *txBuffers, fl *flushRound, err error) error {
	if err == nil || !resp.IsRedirect(err) && !errors.Is(err, errAborted) {
		return err
	}
	give := time.Now().Add(commitRedirectBudget)
	backoff := 5 * time.Millisecond
	for {
		if resp.IsRedirect(err) {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 200*time.Millisecond)
		}
		err = p.checkedRound(ctx, tx, fl)
		if err == nil || !resp.IsRedirect(err) || time.Now().After(give) {
			return err
		}
	}
}

// errAborted: the round's EXEC aborted (nil) although its fence check
// passed; none of it ran.
var errAborted = errors.New("exec aborted: a watched key changed after the fence check")

// receiveRound reads the replies of a round sent with Conn.Send (its
// head, then its transaction) and tells how it went.
func (p *Partition) receiveRound(ctx context.Context, cn *resp.Conn, fl *flushRound) error {
	head, err := cn.Receive(ctx)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	defer head.Release()
	body, err := cn.Receive(ctx)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	defer body.Release()
	if err := head.At(0).Err(); err != nil {
		return fmt.Errorf("append to %s: watch: %w", p.metaKey, err)
	}
	checked := head.At(1)
	var checkErr error
	switch {
	case checked.Err() != nil:
		if resp.IsRedirect(checked.Err()) {
			return fmt.Errorf("append to %s: fence check: %w", p.metaKey, checked.Err())
		}
		checkErr = checked.Err()
	case !isOne(checked):
		var f []resp.Reply
		f = checked.Elems(f)
		if len(f) != 3 {
			return fmt.Errorf("append to %s: fence check answered %d values, want 3", p.metaKey, len(f))
		}
		if err := p.fenceCheck(fl, f[0].Bytes(), f[1].Bytes(), f[2].Bytes()); err != nil {
			return err
		}
		return fmt.Errorf("append to %s: the fence check refused %q", p.metaKey, checked.Raw)
	}
	err = p.execResult(body, fl)
	if checkErr != nil && err == nil {
		// Redis refused the script itself (a script of someone else's
		// running too long, say) but ran the transaction: it went in
		// unchecked. If this broker was deposed meanwhile, the new
		// leader's next round sees the counter moved and reloads.
		p.t.e.log.Error("an append ran without its fence check", "topic", p.t.name, "partition", p.id, "err", checkErr)
		p.t.e.wakeControl()
	}
	if errors.Is(err, errAborted) && checkErr != nil {
		err = fmt.Errorf("append to %s: fence check: %w", p.metaKey, checkErr)
	}
	return err
}

// isOne tells whether r is the integer reply 1: the fence check passed.
func isOne(r resp.Reply) bool {
	n, err := r.Int()
	return err == nil && n == 1
}

// fenceCheck compares the partition's leader, epoch and next offset in
// Redis (next nil: none yet, 0) with what the round was planned on.
func (p *Partition) fenceCheck(fl *flushRound, leader, epoch, next []byte) error {
	if string(leader) != strconv.Itoa(int(p.t.e.opts.NodeID)) || string(epoch) != strconv.Itoa(int(fl.epoch)) {
		return fmt.Errorf("%w (check)", errFenced)
	}
	n := int64(0)
	if len(next) > 0 {
		var err error
		if n, err = strconv.ParseInt(string(next), 10, 64); err != nil {
			return fmt.Errorf("append to %s: next %q in Redis: %w", p.metaKey, next, err)
		}
	}
	if n != fl.st.base {
		return fmt.Errorf("append to %s: %w: next is %d in Redis, %d here", p.metaKey, errBehind, n, fl.st.base)
	}
	return nil
}

// checkedRound runs the round with the fence korvet used before
// fenceScript, for a round that met a cluster redirect: WATCH meta and
// HMGET leader, epoch and next, answered before the transaction is sent
// on the same connection. A cluster Conn whose first call is answered
// ASK in full follows it to the node importing the slot, which the
// one-write round cannot (its MULTI is answered, not redirected).
func (p *Partition) checkedRound(ctx context.Context, tx *txBuffers, fl *flushRound) error {
	cn, err := p.t.e.rc.Conn(ctx)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	err = p.checkedOnce(ctx, cn, tx, fl)
	p.doneWith(cn, err)
	if errors.Is(err, errAborted) {
		err = fmt.Errorf("%w (exec aborted)", errFenced) // the meta hash changed since WATCH
	}
	return err
}

func (p *Partition) checkedOnce(ctx context.Context, cn *resp.Conn, tx *txBuffers, fl *flushRound) error {
	var check resp.Pipeline
	check.Cmd("WATCH", p.metaKey)
	check.Cmd("HMGET", p.metaKey, "leader", "leader_epoch", "next")
	rs, err := cn.Exec(ctx, &check)
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
	if len(f) != 3 {
		rs.Release()
		return fmt.Errorf("append to %s: check answered %d values, want 3", p.metaKey, len(f))
	}
	err = p.fenceCheck(fl, f[0].Bytes(), f[1].Bytes(), f[2].Bytes())
	rs.Release()
	if err != nil {
		return err
	}
	rs, err = cn.Exec(ctx, &tx.pl)
	if err != nil {
		return fmt.Errorf("append to %s: %w", p.metaKey, err)
	}
	defer rs.Release()
	return p.execResult(rs, fl)
}

// execResult checks the replies of a round's MULTI ... EXEC (and WAIT).
func (p *Partition) execResult(rs *resp.Replies, fl *flushRound) error {
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
		return errAborted
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

// errBehind: Redis's partition counter is not where this leader left it.
// With one writer per epoch that means Redis lost acknowledged writes:
// a master failed over to a replica that did not have them (see
// redis.wait_replicas). The partition reloads from Redis.
var errBehind = errors.New("the partition in Redis is not where this broker left it (a Redis failover lost writes?)")

// commitRedirectBudget bounds how long an append round keeps following a
// cluster's redirects before it fails with a retriable error.
const commitRedirectBudget = 3 * time.Second
