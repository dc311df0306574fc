package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// Tailing: the KV view on every broker. The commit path (kv_apply.go)
// indexes what this broker appends; the partitions another broker leads
// are followed from Redis. One connection blocks in XREAD on their
// summary streams ({keyspace}:meta:batches:{topic}:{partition}: one entry
// per committed append, ID "<last offset>-1"), from each partition's high
// watermark as this broker knows it. When one moves, the partition's
// view (counters, segment registry) is reread, its watchers are woken and
// the catch-up (kv_catchup.go) indexes the new records from the log.

// tailBlock is how long one XREAD waits; it bounds how late the loop sees
// a new set of followed partitions or the engine closing.
const tailBlock = 500 * time.Millisecond

// tailIdle is how often a loop with nothing to follow looks again, on top
// of the nudges of topic changes and the events that wake it (whose
// subscribers may run before the one that applies the change).
const tailIdle = tailBlock

// startTail starts the loop that follows other brokers' partitions.
func (kv *kvIndex) startTail() {
	kv.tailWake = make(chan struct{}, 1)
	wake := func(events.Event) { kv.nudgeTail() }
	for _, kind := range []string{events.Leader, events.Topic, events.Brokers, events.Resync} {
		kv.e.events.Subscribe(kind, wake)
	}
	kv.e.wg.Add(1)
	go kv.tailLoop()
}

// nudgeTail makes the tail look at the partitions to follow again: a
// topic appeared, grew or changed configs.
func (kv *kvIndex) nudgeTail() {
	select {
	case kv.tailWake <- struct{}{}:
	default:
	}
}

// topicsChanged tells the KV view that topics or partitions changed.
func (e *Engine) topicsChanged() {
	if kv := e.kv.live; kv != nil {
		kv.nudgeTail()
	}
}

func (kv *kvIndex) tailLoop() {
	defer kv.e.wg.Done()
	ctx := kv.e.bg
	var cn *resp.Conn
	defer func() {
		if cn != nil {
			cn.Close()
		}
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		parts := kv.followed()
		if len(parts) == 0 {
			select {
			case <-ctx.Done():
			case <-kv.tailWake:
			case <-time.After(tailIdle):
			}
			continue
		}
		err := func() error {
			if kv.e.k.IsCluster() {
				return kv.pollSharded(ctx, parts)
			}
			if cn == nil {
				c, err := kv.e.rc.Conn(ctx)
				if err != nil {
					return err
				}
				cn = c
			}
			moved, err := kv.tailOnce(ctx, cn, parts)
			if err != nil {
				cn.Close()
				cn = nil
				return err
			}
			if len(moved) > 0 {
				return kv.refreshFollowed(ctx, moved)
			}
			return nil
		}()
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		kv.log.Warn("key index: following other brokers' partitions failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// followed lists the partitions of indexed topics this broker does not
// lead: their records reach the index only through the tail.
func (kv *kvIndex) followed() []*Partition {
	var out []*Partition
	for _, t := range kv.e.Topics() {
		if !t.indexed() {
			continue
		}
		for _, p := range t.Partitions() {
			if !p.IsLeader() {
				out = append(out, p)
			}
		}
	}
	return out
}

// afterID is the summary stream ID after which entries are new to a
// broker that knows the partition up to hw.
func afterID(hw int64) string {
	if hw <= 0 {
		return "0-0"
	}
	return strconv.FormatInt(hw-1, 10) + "-1"
}

// tailOnce waits (up to tailBlock) for an append to any of parts and
// returns those that moved.
func (kv *kvIndex) tailOnce(ctx context.Context, cn *resp.Conn, parts []*Partition) ([]*Partition, error) {
	args := make([]any, 0, 6+2*len(parts))
	args = append(args, "XREAD", "COUNT", 1, "BLOCK", tailBlock.Milliseconds(), "STREAMS")
	byKey := make(map[string]*Partition, len(parts))
	for _, p := range parts {
		args = append(args, p.batchesKey)
		byKey[p.batchesKey] = p
	}
	for _, p := range parts {
		args = append(args, afterID(p.HighWatermark()))
	}
	rctx, cancel := context.WithTimeout(ctx, tailBlock+5*time.Second)
	defer cancel()
	r, err := cn.Do(rctx, args...)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("read summary streams: %w", err)
	}
	if r.IsNil() || r.IsNilArray() {
		return nil, nil
	}
	var moved []*Partition
	var streams, kvp []resp.Reply
	streams = r.Elems(streams)
	for _, s := range streams {
		kvp = s.Elems(kvp[:0])
		if len(kvp) != 2 {
			return nil, fmt.Errorf("read summary streams: unexpected reply shape")
		}
		if p := byKey[string(kvp[0].Bytes())]; p != nil && kvp[1].Len() > 0 {
			moved = append(moved, p)
		}
	}
	return moved, nil
}

// tailPoll is how often the tail looks for appends on a Redis Cluster.
const tailPoll = 50 * time.Millisecond

// pollSharded is the tail on a Redis Cluster, where one XREAD cannot
// wait on streams in different slots: one non-blocking single-stream
// XREAD per partition, pipelined (the client sends each shard its part),
// then a short pause when nothing moved.
func (kv *kvIndex) pollSharded(ctx context.Context, parts []*Partition) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var pl resp.Pipeline
	for _, p := range parts {
		pl.Cmd("XREAD", "COUNT", 1, "STREAMS", p.batchesKey, afterID(p.HighWatermark()))
	}
	rs, err := kv.e.rc.Exec(rctx, &pl)
	if err != nil {
		return fmt.Errorf("read summary streams: %w", err)
	}
	var moved []*Partition
	for i, p := range parts {
		r := rs.At(i)
		if err := r.Err(); err != nil {
			rs.Release()
			return fmt.Errorf("read summary stream of %s/%d: %w", p.t.name, p.id, err)
		}
		if !r.IsNil() && !r.IsNilArray() && r.Len() > 0 {
			moved = append(moved, p)
		}
	}
	rs.Release()
	if len(moved) > 0 {
		return kv.refreshFollowed(ctx, moved)
	}
	select {
	case <-ctx.Done():
	case <-kv.tailWake:
	case <-time.After(tailPoll):
	}
	return nil
}

// refreshFollowed rereads the view of partitions another broker appended
// to, wakes their watchers, and hands the new records to the catch-up.
func (kv *kvIndex) refreshFollowed(ctx context.Context, parts []*Partition) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The aborted index is read after the meta hash, so it holds every
	// abort the meta's view of open transactions has seen end (the marker
	// writes both in one MULTI): the KV view needs both to agree.
	var pl resp.Pipeline
	for _, p := range parts {
		pl.Cmd("HGETALL", p.metaKey)
		pl.Cmd("HGETALL", p.segmentsKey)
		pl.Cmd("XRANGE", p.abortedKey, p.abortedAfter(), "+")
	}
	rs, err := kv.e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("reload followed partitions: %w", err)
	}
	defer rs.Release()
	for i, p := range parts {
		meta, segs := rs.At(3*i), rs.At(3*i+1)
		// A partition this broker leads now keeps its own view; and a
		// view never goes back (an older read than what it has).
		if p.IsLeader() || metaNext(meta) <= p.HighWatermark() {
			continue
		}
		aborted, err := parseAborted(rs.At(3*i + 2))
		if err != nil {
			return fmt.Errorf("reload %s/%d: %w", p.t.name, p.id, err)
		}
		// New aborts first: a reader that sees the new LSO must find them.
		p.addAborted(aborted)
		if err := p.loadState(meta, segs, nil); err != nil {
			return fmt.Errorf("reload %s/%d: %w", p.t.name, p.id, err)
		}
		p.notify()
		kv.behind(p)
	}
	return nil
}

// metaNext is the "next" counter of a partition meta hash reply.
func metaNext(meta resp.Reply) int64 {
	var f []resp.Reply
	f = meta.Elems(f)
	for i := 0; i+1 < len(f); i += 2 {
		if string(f[i].Bytes()) == "next" {
			n, _ := strconv.ParseInt(string(f[i+1].Bytes()), 10, 64)
			return n
		}
	}
	return 0
}

// behind marks p's index as lagging its log and wakes the catch-up.
func (kv *kvIndex) behind(p *Partition) {
	kt, err := kv.topic(p.t)
	if err != nil {
		return
	}
	kp := kt.part(p.id)
	if kp == nil {
		return
	}
	kp.mu.Lock()
	if kp.applied < p.kvTarget() {
		kp.setLagging()
	}
	kp.mu.Unlock()
	kv.nudge()
}
