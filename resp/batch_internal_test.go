package resp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// The Batcher's round trips are steered here by holding the wire: a
// caller's BLPOP (which a Batcher's users must not send; the tests do, to
// keep a round trip on the wire for as long as they need) blocks until
// the test pushes to its list, and the test watches the queue fill.

func batchSetup(t *testing.T) (b *Batcher, admin *Client) {
	t.Helper()
	rd := testbed.StartRedis(t)
	c, err := New(rd.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	admin, err = New(rd.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return NewBatcher(c, 1), admin
}

type batchResult struct {
	reply string
	err   error
}

// batchExec runs one command through b in a goroutine.
func batchExec(ctx context.Context, b *Batcher, args ...any) <-chan batchResult {
	out := make(chan batchResult, 1)
	go func() {
		var p Pipeline
		p.Cmd(args...)
		rs, err := b.Exec(ctx, &p)
		if err != nil {
			out <- batchResult{err: err}
			return
		}
		r := rs.At(0)
		s := string(r.Bytes())
		if r.Type == '*' {
			s = string(r.Raw)
		}
		rs.Release()
		out <- batchResult{reply: s}
	}()
	return out
}

func (b *Batcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// inFlight is the number of queued calls in round trips on the wire
// (not those of callers that found a lane free).
func (b *Batcher) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.carried
}

func mustResult(t *testing.T, what string, ch <-chan batchResult, want string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || r.reply != want {
			t.Fatalf("%s: %q, %v; want %q", what, r.reply, r.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
}

func push(t *testing.T, admin *Client, list string) {
	t.Helper()
	if _, err := admin.Do(context.Background(), "LPUSH", list, "x"); err != nil {
		t.Fatal(err)
	}
}

func TestBatcherCoalesces(t *testing.T) {
	b, admin := batchSetup(t)
	ctx := context.Background()
	hold := batchExec(ctx, b, "BLPOP", "hold", 10)
	testbed.WaitFor(t, 5*time.Second, "the first caller on the wire", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.flying == 1
	})
	var echoes []<-chan batchResult
	for _, v := range []string{"a", "b", strings.Repeat("c", 100_000), "d", "e"} {
		echoes = append(echoes, batchExec(ctx, b, "ECHO", v))
	}
	testbed.WaitFor(t, 5*time.Second, "5 callers queued", func() bool { return b.queued() == 5 })
	push(t, admin, "hold")
	mustResult(t, "BLPOP", hold, "*2\r\n$4\r\nhold\r\n$1\r\nx\r\n")
	for i, v := range []string{"a", "b", strings.Repeat("c", 100_000), "d", "e"} {
		mustResult(t, "ECHO", echoes[i], v)
	}
	if st := b.Stats(); st != (BatchStats{RoundTrips: 2, Pipelines: 6}) {
		t.Fatalf("stats %+v, want the 5 queued in one round trip after the first", st)
	}
	// Alone again: its own round trip.
	mustResult(t, "ECHO alone", batchExec(ctx, b, "ECHO", "z"), "z")
	if st := b.Stats(); st != (BatchStats{RoundTrips: 3, Pipelines: 7}) {
		t.Fatalf("stats %+v after a caller alone", st)
	}
}

func TestBatcherCancel(t *testing.T) {
	b, admin := batchSetup(t)
	ctx := context.Background()
	hold := batchExec(ctx, b, "BLPOP", "hold1", 10)
	testbed.WaitFor(t, 5*time.Second, "the first caller on the wire", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.flying == 1
	})
	lead := batchExec(ctx, b, "BLPOP", "hold2", 10)
	testbed.WaitFor(t, 5*time.Second, "the next leader queued", func() bool { return b.queued() == 1 })
	inCtx, cancelIn := context.WithCancel(ctx)
	defer cancelIn()
	inflight := batchExec(inCtx, b, "ECHO", "in flight")
	testbed.WaitFor(t, 5*time.Second, "2 queued", func() bool { return b.queued() == 2 })
	qCtx, cancelQ := context.WithCancel(ctx)
	queued := batchExec(qCtx, b, "ECHO", "queued")
	testbed.WaitFor(t, 5*time.Second, "3 queued", func() bool { return b.queued() == 3 })

	// A queued caller that gives up leaves the queue, unsent.
	cancelQ()
	r := <-queued
	if !errors.Is(r.err, context.Canceled) || !IsConnError(r.err) || errors.Is(r.err, ErrUnknownOutcome) {
		t.Fatalf("cancelled while queued: %q, %v", r.reply, r.err)
	}
	if n := b.queued(); n != 2 {
		t.Fatalf("%d queued after a cancellation, want 2", n)
	}

	// The next two go together; one that gives up in flight returns at
	// once, outcome unknown, and the round trip goes on for the other.
	push(t, admin, "hold1")
	mustResult(t, "first BLPOP", hold, "*2\r\n$5\r\nhold1\r\n$1\r\nx\r\n")
	testbed.WaitFor(t, 5*time.Second, "the batch of 2 on the wire", func() bool { return b.inFlight() == 2 })
	cancelIn()
	r = <-inflight
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, ErrUnknownOutcome) {
		t.Fatalf("cancelled in flight: %q, %v", r.reply, r.err)
	}
	push(t, admin, "hold2")
	mustResult(t, "second BLPOP", lead, "*2\r\n$5\r\nhold2\r\n$1\r\nx\r\n")
	if st := b.Stats(); st != (BatchStats{RoundTrips: 2, Pipelines: 3}) {
		t.Fatalf("stats %+v", st)
	}
	mustResult(t, "ECHO after", batchExec(ctx, b, "ECHO", "after"), "after")
}

func TestBatcherConnFailure(t *testing.T) {
	b, admin := batchSetup(t)
	ctx := context.Background()
	hold := batchExec(ctx, b, "BLPOP", "hold1", 10)
	testbed.WaitFor(t, 5*time.Second, "the first caller on the wire", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.flying == 1
	})
	second := batchExec(ctx, b, "BLPOP", "hold2", 10)
	third := batchExec(ctx, b, "ECHO", "c")
	testbed.WaitFor(t, 5*time.Second, "2 queued", func() bool { return b.queued() == 2 })
	push(t, admin, "hold1")
	mustResult(t, "first BLPOP", hold, "*2\r\n$5\r\nhold1\r\n$1\r\nx\r\n")
	testbed.WaitFor(t, 5*time.Second, "the batch of 2 blocked in Redis", func() bool {
		r, err := admin.Do(ctx, "CLIENT", "LIST")
		return err == nil && strings.Contains(string(r.Bytes()), "cmd=blpop") && b.inFlight() == 2
	})
	if _, err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	// The connection's failure is every caller's of the round trip.
	for _, ch := range []<-chan batchResult{second, third} {
		r := <-ch
		if !IsConnError(r.err) || !errors.Is(r.err, ErrUnknownOutcome) {
			t.Fatalf("after the connection was killed: %q, %v", r.reply, r.err)
		}
	}
	mustResult(t, "ECHO after", batchExec(ctx, b, "ECHO", "after"), "after")
}
