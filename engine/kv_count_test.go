package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

// ?count=exact from many clients at once is one scan of the index: 50
// concurrent callers share it and get the same figures; a caller that
// gives up leaves it running for the others; the next call scans again.
func TestKVCountShared(t *testing.T) {
	r := testbed.StartRedis(t)
	// No background counts during the test: only the callers' scans.
	n := startKV(t, r, t.TempDir(), engine.Options{Index: engine.IndexOptions{CompactionInterval: time.Hour}})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "c", 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		put(t, tp.Partition(0), kvRec(fmt.Sprint("k", i), "v"))
	}
	put(t, tp.Partition(0), kvRec("k0", tomb))
	n.waitReady()

	var scans atomic.Int64
	release := make(chan struct{})
	n.e.KV().SetCountHook(func(ctx context.Context, topic string) {
		scans.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
	})

	const callers = 50
	type outcome struct {
		st  engine.KVTopicStats
		err error
	}
	out := make(chan outcome, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := n.e.KV().TopicStats(ctx, "c", true)
			out <- outcome{st, err}
		}()
	}
	// One more caller, who gives up while the scan runs.
	quitCtx, quit := context.WithCancel(ctx)
	quitErr := make(chan error, 1)
	go func() {
		_, err := n.e.KV().TopicStats(quitCtx, "c", true)
		quitErr <- err
	}()
	testbed.WaitFor(t, 10*time.Second, "51 callers waiting for the count", func() bool { return n.e.KV().CountWaiters("c") == callers+1 })
	quit()
	select {
	case err := <-quitErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("caller who gave up: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a caller whose context ended still waits for the count")
	}
	testbed.WaitFor(t, 10*time.Second, "50 callers still waiting", func() bool { return n.e.KV().CountWaiters("c") == callers })
	close(release)
	wg.Wait()
	close(out)
	for o := range out {
		if o.err != nil || o.st.Keys != 19 || o.st.Tombstones != 1 || o.st.KeysCountedAt.IsZero() {
			t.Fatalf("caller: %+v %v, want 19 keys and 1 tombstone", o.st, o.err)
		}
	}
	if got := scans.Load(); got != 1 {
		t.Fatalf("%d concurrent count=exact calls ran %d scans, want 1", callers, got)
	}
	t.Logf("%d concurrent callers (and one that gave up) shared %d scan", callers, scans.Load())

	// Finished, the count is not reused: the next call scans again.
	if _, err := n.e.KV().TopicStats(ctx, "c", true); err != nil {
		t.Fatal(err)
	}
	if got := scans.Load(); got != 2 {
		t.Fatalf("a call after the shared count ran %d scans in all, want 2", got)
	}
}

// A count is bounded in time: a scan that does not finish within
// CountTimeout fails every caller with ErrKVUnavailable.
func TestKVCountTimeout(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{Index: engine.IndexOptions{CompactionInterval: time.Hour, CountTimeout: 200 * time.Millisecond}})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "slow", 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	put(t, tp.Partition(0), kvRec("a", "1"))
	n.waitReady()
	stuck := make(chan struct{})
	defer close(stuck)
	n.e.KV().SetCountHook(func(ctx context.Context, _ string) {
		// A scan that would take longer than its bound.
		select {
		case <-stuck:
		case <-ctx.Done():
		}
	})
	began := time.Now()
	_, err = n.e.KV().TopicStats(ctx, "slow", true)
	took := time.Since(began)
	if !errors.Is(err, engine.ErrKVUnavailable) {
		t.Fatalf("count past its bound: %v, want ErrKVUnavailable", err)
	}
	if took < 150*time.Millisecond || took > 5*time.Second {
		t.Fatalf("count gave up after %v, want about the 200ms bound", took)
	}
	t.Logf("count gave up after %v: %v", took.Round(time.Millisecond), err)
}
