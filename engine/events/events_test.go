package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func client(t *testing.T, url string) *resp.Client {
	t.Helper()
	rc, err := resp.New(url, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

// recv waits for one event on ch.
func recv(t *testing.T, ch <-chan events.Event, what string) events.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s event within 10s", what)
		return events.Event{}
	}
}

// Two brokers on one Redis: what one publishes, both see, in order, with
// its fields; local events reach only their own process; a lost
// connection ends in a Resync.
func TestBusAcrossBrokers(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rcA, rcB := client(t, r.URL), client(t, r.URL)
	a := events.New(rcA, "ks:meta:events", 1, testbed.Logger())
	b := events.New(rcB, "ks:meta:events", 2, testbed.Logger())

	// Published before the buses run: not delivered (they start at the end).
	if err := a.Publish(ctx, events.Topic, "topic", "old"); err != nil {
		t.Fatal(err)
	}
	gotA, gotB, resyncB := make(chan events.Event, 256), make(chan events.Event, 256), make(chan events.Event, 16)
	a.Subscribe(events.Topic, func(ev events.Event) { gotA <- ev })
	b.Subscribe(events.Topic, func(ev events.Event) { gotB <- ev })
	b.Subscribe(events.Resync, func(ev events.Event) { resyncB <- ev })
	localB := make(chan events.Event, 4)
	b.Subscribe(events.Brokers, func(ev events.Event) { localB <- ev })
	go a.Run(ctx)
	go b.Run(ctx)

	// The buses start tailing asynchronously; publish until B hears.
	deadline := time.Now().Add(10 * time.Second)
	var first events.Event
	for first.Kind == "" {
		if time.Now().After(deadline) {
			t.Fatal("broker 2 never saw broker 1's event")
		}
		if err := a.Publish(ctx, events.Topic, "topic", "probe"); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-gotB:
		case <-time.After(200 * time.Millisecond):
		}
	}
	if first.Node != 1 || first.Get("topic") != "probe" || first.ID == "" {
		t.Fatalf("event = %+v, want node 1 topic probe with an ID", first)
	}

	for _, name := range []string{"t1", "t2", "t3"} {
		if err := b.Publish(ctx, events.Topic, "topic", name); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range []chan events.Event{gotA, gotB} {
		for _, want := range []string{"t1", "t2", "t3"} {
			ev := recv(t, ch, "topic "+want)
			for ev.Get("topic") == "probe" { // probes still on their way
				ev = recv(t, ch, "topic "+want)
			}
			if ev.Get("topic") != want || ev.Node != 2 || ev.Kind != events.Topic {
				t.Fatalf("event = %+v, want topic %s from node 2", ev, want)
			}
		}
	}

	b.Emit(events.Brokers, "change", "expired")
	if ev := recv(t, localB, "local"); ev.Get("change") != "expired" || ev.ID != "" {
		t.Fatalf("local event = %+v", ev)
	}

	// Kill B's connections: its reader reconnects and says Resync, and
	// still sees what comes next.
	kill := client(t, r.URL)
	if rep, err := kill.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil || rep.Err() != nil {
		t.Fatalf("CLIENT KILL: %v %v", err, rep.Err())
	}
	recv(t, resyncB, "resync")
	deadline = time.Now().Add(10 * time.Second)
	for got := false; !got; {
		if time.Now().After(deadline) {
			t.Fatal("broker 2 hears nothing after reconnecting")
		}
		if err := a.Publish(ctx, events.Topic, "topic", "after"); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-gotB:
			got = ev.Get("topic") == "after"
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := a.Publish(ctx, events.Topic, "odd"); err == nil {
		t.Fatal("an odd field list was published")
	}
}
