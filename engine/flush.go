package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
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
	epoch    int32      // the leader epoch the round writes under
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
	}
	fl.drops, fl.archives = p.dropLocal, p.archives
	p.dropLocal, p.archives = nil, nil
	if trim {
		fl.trimWait, p.trimWait = p.trimWait, nil
	}
	fl.saved = p.segsSaved
	fl.epoch = p.leadEpoch
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
	cmds  scriptCmds
	enc   entry.Encoder
	idBuf []byte
}

// cmdSink takes commands for a round's transaction.
type cmdSink interface{ Cmd(args ...any) }

// scriptCmds encodes commands as fenceScript's ARGV: each command is its
// argument count, then its arguments.
type scriptCmds struct{ resp.ArgBuffer }

func (c *scriptCmds) Cmd(args ...any) {
	c.Int(int64(len(args)))
	for _, a := range args {
		switch v := a.(type) {
		case string:
			c.String(v)
		case []byte:
			c.Bulk(v)
		case int:
			c.Int(int64(v))
		case int64:
			c.Int(v)
		case int32:
			c.Int(int64(v))
		default:
			panic(fmt.Sprintf("engine: unsupported argument type %T", a)) // a programming error
		}
	}
}

// fenceScript runs a round's commands only if this broker still leads
// the partition at its epoch, so a deposed leader writes nothing, and
// atomically, as MULTI/EXEC did. KEYS: the partition meta hash. ARGV:
// epoch, node id, then per command its argument count and arguments.
// Returns 1, or 0 when fenced. Commands are unpacked onto Lua's stack,
// so each is kept under maxScriptCmdArgs arguments.
var fenceScript = newScript(`
local m = redis.call('HMGET', KEYS[1], 'leader', 'leader_epoch')
if m[1] ~= ARGV[2] or m[2] ~= ARGV[1] then return 0 end
local i, n = 3, #ARGV
while i <= n do
  local c = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + c))
  i = i + c + 1
end
return 1
`)

// maxScriptCmdArgs keeps a command within what Redis's Lua can unpack
// (its C stack holds 8000 values).
const maxScriptCmdArgs = 7000

// errFenced: the round's epoch check failed; nothing was written.
var errFenced = errors.New("fenced: the partition's leader epoch moved")

// write builds the round's transaction: the records, the partition's
// counters and producers, the append summary, then any trim, archive
// mark, local drop and change to the segment registry; all of it runs in
// fenceScript under the round's epoch.
func (tx *txBuffers) write(p *Partition, fl *flushRound) {
	st := &fl.st
	c := &tx.cmds
	c.Reset()
	stream := p.streamKey(st.segs[len(st.segs)-1].ID)
	for _, op := range fl.committed {
		for i := range op.recs {
			r := &op.recs[i]
			pairs := tx.enc.Prepare(r)
			c.Int(int64(3 + 2*pairs))
			c.String("XADD")
			c.String(stream)
			tx.idBuf = entry.AppendID(tx.idBuf[:0], r.Offset, op.codec)
			c.Bulk(tx.idBuf)
			tx.enc.Append(c)
		}
	}
	if st.next > st.base || len(fl.changed) > 0 {
		args := []any{"HSET", p.metaKey, "next", st.next, "bytes", st.bytes, "maxts", st.maxTs, "smin", st.segMin, "smax", st.segMax}
		for _, pid := range fl.changed {
			if len(args) >= maxScriptCmdArgs {
				c.Cmd(args...)
				args = []any{"HSET", p.metaKey}
			}
			args = append(args, producerField(pid), st.producers[pid].encode())
		}
		c.Cmd(args...)
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
			if len(args) >= maxScriptCmdArgs {
				c.Cmd(args...)
				args = []any{"HSET", p.segmentsKey}
			}
			args = append(args, sg.ID, sg.encode())
		}
		c.Cmd(args...)
		if len(st.removed) > 0 {
			args := []any{"HDEL", p.segmentsKey}
			for _, id := range st.removed {
				if len(args) >= maxScriptCmdArgs {
					c.Cmd(args...)
					args = []any{"HDEL", p.segmentsKey}
				}
				args = append(args, id)
			}
			c.Cmd(args...)
		}
	}
	pl := &tx.pl
	pl.Reset()
	pl.Array(6 + c.Len())
	pl.String("EVALSHA")
	pl.String(fenceScript.sha)
	pl.Int(1)
	pl.String(p.metaKey)
	pl.Int(int64(fl.epoch))
	pl.Int(int64(p.t.e.opts.NodeID))
	pl.Args(&c.ArgBuffer)
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
	switch {
	case errors.Is(err, errFenced):
		p.t.e.log.Info("append fenced: another broker leads the partition now", "topic", p.t.name, "partition", p.id, "epoch", fl.epoch)
		p.stepDown()
		p.t.e.wakeControl()
		err = p.notLeader()
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

// commit runs the round's script and checks its reply. NOSCRIPT (Redis
// restarted or its scripts were flushed): nothing ran; the script is
// loaded and the round sent again.
func (p *Partition) commit(ctx context.Context, pl *resp.Pipeline) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		rs, err := p.t.e.rc.Exec(ctx, pl)
		if err != nil {
			return fmt.Errorf("append to %s: %w", p.metaKey, err)
		}
		r := rs.At(0)
		err = r.Err()
		if err != nil && attempt == 0 && isNoScript(err) {
			rs.Release()
			if err := fenceScript.load(ctx, p.t.e.rc); err != nil {
				return fmt.Errorf("append to %s: %w", p.metaKey, err)
			}
			continue
		}
		n, ierr := r.Int()
		rs.Release()
		switch {
		case err != nil:
			// A command failing inside the script does not undo the ones
			// before it. With correct counters this cannot happen; if it
			// does, the partition resyncs from Redis before the next append.
			return fmt.Errorf("append: command failed inside transaction: %w", err)
		case ierr != nil:
			return fmt.Errorf("append: %w", ierr)
		case n == 0:
			return errFenced
		}
		return nil
	}
}
