// Package events is how korvet brokers sharing one Redis tell each other
// that shared state changed: one stream under the keyspace,
// {keyspace}:meta:events, that every broker tails with a blocking XREAD.
//
// An entry is a flat list of fields: "kind", "node" (the broker that wrote
// it), then the kind's own fields (see the Kind constants). Events say
// what changed, never the new state: a subscriber rereads Redis, so a
// missed or repeated event costs a reload, never a wrong answer. That is
// also why the stream is trimmed (MAXLEN ~ MaxLen) without care for slow
// readers: a reader that falls behind the trim, or loses its connection,
// gets one Resync event instead.
package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/korvet/korvet/resp"
)

// Kinds of events. Fields other than kind and node are listed with each.
const (
	// Brokers: the set of live brokers changed. Fields: "change" (join,
	// leave, expired). Also emitted locally when a lease lapses, which no
	// broker writes to the stream.
	Brokers = "brokers"
	// Leader: a partition's leader changed. Fields: "topic",
	// "partition", "leader", "epoch".
	Leader = "leader"
	// Topic: a topic was created, deleted, grew partitions or had its
	// configs changed. Fields: "topic", "change" (created, deleted,
	// partitions, configs).
	Topic = "topic"
	// ACL: ACLs were created or deleted.
	ACL = "acl"
	// User: a SCRAM credential was set or deleted. Fields: "user".
	User = "user"
	// GroupConfig: a group's configs or a share group's existence
	// changed. Fields: "group".
	GroupConfig = "groupconfig"
	// GroupOffsets: a broker that does not coordinate a group changed its
	// offsets (completed a transaction's offsets); the coordinator
	// rereads them. Fields: "group".
	GroupOffsets = "groupoffsets"
	// Txn: a transaction coordinator asks a partition's leader to write
	// a transaction's marker. Fields: "topic", "partition", "id" (the
	// transactional id), "pid", "epoch", "result" (commit, abort). The
	// leader decides from the coordinator's state in Redis, not from
	// result, so a late or repeated event cannot end a later transaction.
	Txn = "txn"
	// Resync is local only: events may have been missed (the reader lost
	// its connection or fell behind the trim); reload everything.
	Resync = "resync"
)

// MaxLen bounds the stream: about this many recent events are kept.
const MaxLen = 10000

// Event is one change.
type Event struct {
	ID     string // stream entry ID; empty for local events
	Kind   string
	Node   int32 // the broker that wrote it; -1 if unknown
	Fields map[string]string
}

// Get returns one field, "" if absent.
func (e Event) Get(name string) string { return e.Fields[name] }

// Bus publishes events and delivers every event in the stream (a
// broker's own included) to the subscribers of its kind, in stream order,
// on one goroutine: a subscriber must not block for long.
type Bus struct {
	rc   *resp.Client
	key  string
	node int32
	log  *slog.Logger

	mu   sync.Mutex
	subs map[string]map[int]func(Event)
	next int

	// deliverMu makes subscribers run one at a time, whether the event
	// came from the stream or from Emit.
	deliverMu sync.Mutex

	// start is where Run begins reading: set by Prime, else the stream's
	// end when Run connects.
	start string
}

// ResyncEvery is how often Run delivers a Resync even when nothing was
// missed: the safety net under a change whose event could not be
// written (the change itself was).
const ResyncEvery = 30 * time.Second

// Prime fixes where Run starts reading: the stream's end now. Call it
// before loading the shared state the events are about, so that no
// change made after the load goes unseen.
func (b *Bus) Prime(ctx context.Context) error {
	cn, err := b.rc.Conn(ctx)
	if err != nil {
		return fmt.Errorf("event stream %s: %w", b.key, err)
	}
	defer cn.Close()
	id, err := lastID(ctx, cn, b.key)
	if err != nil {
		return err
	}
	b.start = id
	return nil
}

// New returns a Bus on the stream key for broker node. Run delivers.
func New(rc *resp.Client, key string, node int32, log *slog.Logger) *Bus {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Bus{rc: rc, key: key, node: node, log: log, subs: map[string]map[int]func(Event){}}
}

// Key is the stream's Redis key.
func (b *Bus) Key() string { return b.key }

// Subscribe calls fn for each event of kind (Resync included when kind
// is Resync). The returned func unsubscribes.
func (b *Bus) Subscribe(kind string, fn func(Event)) (cancel func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs[kind] == nil {
		b.subs[kind] = map[int]func(Event){}
	}
	id := b.next
	b.next++
	b.subs[kind][id] = fn
	return func() {
		b.mu.Lock()
		delete(b.subs[kind], id)
		b.mu.Unlock()
	}
}

// Args returns the XADD arguments (without the command name) that publish
// an event: for callers that add it to their own pipeline or MULTI, so
// the event is written with the change it announces. fields are name,
// value pairs.
func (b *Bus) Args(kind string, fields ...string) []any {
	args := make([]any, 0, 9+len(fields))
	args = append(args, b.key, "MAXLEN", "~", MaxLen, "*", "kind", kind, "node", b.node)
	for _, f := range fields {
		args = append(args, f)
	}
	return args
}

// Append adds the XADD of an event to pl.
func (b *Bus) Append(pl *resp.Pipeline, kind string, fields ...string) {
	pl.Cmd(append([]any{"XADD"}, b.Args(kind, fields...)...)...)
}

// Publish writes an event to the stream.
func (b *Bus) Publish(ctx context.Context, kind string, fields ...string) error {
	if len(fields)%2 != 0 {
		return fmt.Errorf("publish %s event: odd number of fields", kind)
	}
	r, err := b.rc.Do(ctx, append([]any{"XADD"}, b.Args(kind, fields...)...)...)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Errorf("publish %s event to %s: %w", kind, b.key, err)
	}
	return nil
}

// Emit delivers an event to this process's subscribers only (say, a
// broker's lease seen lapsing), on the caller's goroutine, before it
// returns.
func (b *Bus) Emit(kind string, fields ...string) {
	b.deliver(Event{Kind: kind, Node: b.node, Fields: pairs(fields)})
}

func pairs(fields []string) map[string]string {
	m := make(map[string]string, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i]] = fields[i+1]
	}
	return m
}

// block is how long one XREAD waits; it bounds how late Run sees ctx end.
const block = 500 * time.Millisecond

// Run tails the stream from its current end until ctx ends, delivering
// events. On a connection error it waits, reconnects and delivers Resync
// (events in between may be lost).
func (b *Bus) Run(ctx context.Context) {
	last := b.start
	backoff := 100 * time.Millisecond
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(ResyncEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				b.deliver(Event{Kind: Resync, Node: b.node})
			}
		}
	}()
	for ctx.Err() == nil {
		err := b.tail(ctx, &last)
		if ctx.Err() != nil {
			return
		}
		b.log.Warn("event stream read failed; retrying", "key", b.key, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		b.deliver(Event{Kind: Resync, Node: b.node})
	}
}

// tail reads on one connection until an error. last is the ID after which
// to read; "" starts at the stream's end now.
func (b *Bus) tail(ctx context.Context, last *string) error {
	cn, err := b.rc.Conn(ctx)
	if err != nil {
		return err
	}
	defer cn.Close()
	if *last == "" {
		id, err := lastID(ctx, cn, b.key)
		if err != nil {
			return err
		}
		*last = id
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, block+5*time.Second)
		r, err := cn.Do(rctx, "XREAD", "COUNT", 512, "BLOCK", block.Milliseconds(), "STREAMS", b.key, *last)
		cancel()
		if err != nil {
			return err
		}
		if err := r.Err(); err != nil {
			return err
		}
		if r.IsNilArray() || r.IsNil() {
			continue
		}
		evs, newLast, err := parseXRead(r, b.key)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			b.deliver(ev)
		}
		if newLast != "" {
			*last = newLast
		}
	}
}

func lastID(ctx context.Context, cn *resp.Conn, key string) (string, error) {
	r, err := cn.Do(ctx, "XREVRANGE", key, "+", "-", "COUNT", 1)
	if err != nil {
		return "", fmt.Errorf("read the end of %s: %w", key, err)
	}
	if err := r.Err(); err != nil {
		return "", fmt.Errorf("read the end of %s: %w", key, err)
	}
	id := "0-0"
	r.ForEach(func(e resp.Reply) bool {
		var f []resp.Reply
		if f = e.Elems(f); len(f) == 2 {
			id = string(f[0].Bytes())
		}
		return false
	})
	return id, nil
}

var errShape = errors.New("unexpected XREAD reply")

// parseXRead turns an XREAD reply on one stream into events.
func parseXRead(r resp.Reply, key string) ([]Event, string, error) {
	var streams, kv, entries, ent, fields []resp.Reply
	streams = r.Elems(streams)
	var out []Event
	last := ""
	for _, s := range streams {
		kv = s.Elems(kv[:0])
		if len(kv) != 2 || string(kv[0].Bytes()) != key {
			return nil, "", fmt.Errorf("%w: %s", errShape, key)
		}
		entries = kv[1].Elems(entries[:0])
		for _, e := range entries {
			ent = e.Elems(ent[:0])
			if len(ent) != 2 {
				return nil, "", fmt.Errorf("%w: entry of %s", errShape, key)
			}
			id := string(ent[0].Bytes())
			last = id
			fields = ent[1].Elems(fields[:0])
			ev := Event{ID: id, Node: -1, Fields: make(map[string]string, len(fields)/2)}
			for i := 0; i+1 < len(fields); i += 2 {
				name, val := string(fields[i].Bytes()), string(fields[i+1].Bytes())
				switch name {
				case "kind":
					ev.Kind = val
				case "node":
					if n, err := strconv.ParseInt(val, 10, 32); err == nil {
						ev.Node = int32(n)
					}
				default:
					ev.Fields[name] = val
				}
			}
			if ev.Kind != "" {
				out = append(out, ev)
			}
		}
	}
	return out, last, nil
}

// deliver calls the subscribers of ev's kind. A panicking subscriber is
// a bug, but must not take the broker's event loop down with it.
func (b *Bus) deliver(ev Event) {
	b.deliverMu.Lock()
	defer b.deliverMu.Unlock()
	b.mu.Lock()
	fns := make([]func(Event), 0, len(b.subs[ev.Kind]))
	for _, fn := range b.subs[ev.Kind] {
		fns = append(fns, fn)
	}
	b.mu.Unlock()
	for _, fn := range fns {
		func() {
			defer func() {
				if p := recover(); p != nil {
					b.log.Error("event subscriber panicked", "kind", ev.Kind, "panic", p)
				}
			}()
			fn(ev)
		}()
	}
}
