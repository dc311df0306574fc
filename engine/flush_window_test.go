package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

// ackedAppend is an append the engine acknowledged: its base and tag.
type ackedAppend struct {
	base int64
	tag  string
}

// appendUntil runs writers appending batches of n records to p, each with
// a tag of its own, until stop is closed, and returns the acknowledged
// appends and how many failed.
func appendUntil(p *engine.Partition, writers, n int, stop <-chan struct{}) (acked []ackedAppend, failed int64) {
	var mu sync.Mutex
	var fails atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tag := fmt.Sprintf("w%d.%d", w, i)
				base, _, err := p.Append(recs(n, time.Now().UnixMilli(), tag)).Wait(context.Background())
				if err != nil {
					fails.Add(1)
					continue
				}
				mu.Lock()
				acked = append(acked, ackedAppend{base, tag})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked, fails.Load()
}

// checkAppends checks that p's log is dense and holds every acknowledged
// append once, at its base, whole; appends that failed may be there too
// (a connection lost after the EXEC), but whole and once.
func checkAppends(t *testing.T, p *engine.Partition, acked []ackedAppend, n int) {
	t.Helper()
	got := readAll(t, p)
	if int64(len(got)) != p.HighWatermark() {
		t.Fatalf("log holds %d records, high watermark %d", len(got), p.HighWatermark())
	}
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("offset %d at position %d: the log has a gap", r.Offset, i)
		}
	}
	where := map[string]int64{} // tag -> offset of its first record
	for i := 0; i < len(got); {
		key := string(got[i].Key)
		tag := key[:len(key)-2] // "<tag>-0"
		if key[len(key)-2:] != "-0" {
			t.Fatalf("offset %d: %q does not begin an append", i, key)
		}
		if _, dup := where[tag]; dup {
			t.Fatalf("append %s is in the log twice", tag)
		}
		where[tag] = int64(i)
		for j := range n {
			if i+j >= len(got) || string(got[i+j].Key) != fmt.Sprintf("%s-%d", tag, j) {
				t.Fatalf("append %s is not whole at offset %d", tag, i)
			}
		}
		i += n
	}
	for _, a := range acked {
		if off, ok := where[a.tag]; !ok || off != a.base {
			t.Fatalf("acknowledged append %s at %d: found at %d (present %v)", a.tag, a.base, off, ok)
		}
	}
}

// Rounds in flight on a connection that Redis drops: the partition's
// counter tells which of them ran, so every acknowledged append is in the
// log once, at the offset it was given, and the log stays dense.
func TestFlushWindowConnectionKilled(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "k", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	admin, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const n = 10
	stop := make(chan struct{})
	var acked []ackedAppend
	var failed int64
	done := make(chan struct{})
	go func() {
		acked, failed = appendUntil(p, 8, n, stop)
		close(done)
	}()
	for kill := range 20 {
		// Each kill lands on a partition taking appends.
		before := p.HighWatermark()
		testbed.WaitFor(t, 20*time.Second, fmt.Sprintf("appends before kill %d", kill), func() bool { return p.HighWatermark() >= before+200 })
		if _, err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
			t.Fatal(err)
		}
	}
	after := p.HighWatermark()
	testbed.WaitFor(t, 20*time.Second, "appends after the kills", func() bool { return p.HighWatermark() >= after+200 })
	close(stop)
	<-done
	t.Logf("%d appends acknowledged, %d failed over 20 connection kills", len(acked), failed)
	if len(acked) == 0 {
		t.Fatal("no append acknowledged")
	}
	checkAppends(t, p, acked, n)
}

// A broker deposed while its rounds are in flight writes nothing more:
// the fence check of every round behind the move refuses it, so the log
// the next leader continues is dense.
func TestFlushWindowFenced(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "f", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	testbed.WaitFor(t, 10*time.Second, "the broker leads f/0", p.IsLeader)
	const n = 10
	stop := make(chan struct{})
	var acked []ackedAppend
	done := make(chan struct{})
	go func() {
		acked, _ = appendUntil(p, 8, n, stop)
		close(done)
	}()
	testbed.WaitFor(t, 20*time.Second, "appends under way", func() bool { return p.HighWatermark() >= 500 })
	// Another broker's claim, as moveScript writes it: a new epoch.
	meta := "korvet:meta:partition:f:0"
	_, epoch := p.Leader()
	if _, err := rc.Do(ctx, "HSET", meta, "leader", 7, "leader_epoch", epoch+1); err != nil {
		t.Fatal(err)
	}
	next := func() int64 {
		v, err := rc.Do(ctx, "HGET", meta, "next")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := v.Int()
		return n
	}
	testbed.WaitFor(t, 10*time.Second, "the deposed broker stops leading", func() bool { return !p.IsLeader() })
	stopped := next()
	// Broker 7 holds no lease: once the lease time passes, this broker
	// claims the partition back (a new epoch) and appends go on.
	testbed.WaitFor(t, 30*time.Second, "this broker leads again", func() bool {
		_, ep := p.Leader()
		return p.IsLeader() && ep > epoch+1
	})
	resumed := p.HighWatermark()
	testbed.WaitFor(t, 20*time.Second, "appends after the claim", func() bool { return p.HighWatermark() >= resumed+200 })
	close(stop)
	<-done
	checkAppends(t, p, acked, n)
	// Nothing was written between the move and the claim: the first
	// record of the new epoch starts where the deposed leader stopped.
	if epEnd, start := p.EpochEnd(epoch); epEnd != epoch || start != stopped {
		t.Errorf("epoch %d ends at %d (epoch %d), want %d: a round wrote after the move", epoch, start, epEnd, stopped)
	}
}
