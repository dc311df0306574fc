package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

// redisState is what a topic creation writes to: how many keys there are
// and the topic registry's fields (keyspace "korvet").
func redisState(t *testing.T, rc *resp.Client) string {
	t.Helper()
	ctx := context.Background()
	n, err := rc.Do(ctx, "DBSIZE")
	if err != nil {
		t.Fatal(err)
	}
	names, err := rc.Do(ctx, "HKEYS", "korvet:meta:topics")
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	names.ForEach(func(r resp.Reply) bool {
		fields = append(fields, string(r.Bytes()))
		return true
	})
	slices.Sort(fields)
	keys, _ := n.Int()
	return fmt.Sprintf("%d keys, topics %v", keys, fields)
}

// Partition caps: a topic or a broker past them is refused with
// ErrPolicyViolation, naming the config key, before anything reaches
// Redis; up to them everything is created.
func TestPartitionCaps(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{AutoCreateTopics: true, DefaultPartitions: 3, MaxPartitionsPerTopic: 10, MaxPartitions: 25})
	ctx := context.Background()
	refused := func(what, key string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrPolicyViolation) || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s: %v, want ErrPolicyViolation naming %s", what, err, key)
		}
	}
	before := redisState(t, rc)
	_, err := e.CreateTopic(ctx, "wide", 11, nil, false)
	refused("11 partitions", "kafka.max_partitions_per_topic", err)
	_, err = e.CreateTopic(ctx, "huge", 100000, nil, false)
	refused("100000 partitions", "kafka.max_partitions_per_topic", err)
	_, err = e.CreateTopic(ctx, "huge", 100000, nil, true)
	refused("validate only, 100000 partitions", "kafka.max_partitions_per_topic", err)
	if after := redisState(t, rc); after != before || e.Topic("wide") != nil || e.Topic("huge") != nil {
		t.Fatalf("a refused topic was written: Redis had %s, now %s", before, after)
	}

	// __consumer_offsets has 1; two of 10 make 21; 10 more would be 31.
	for _, name := range []string{"a", "b"} {
		if _, err := e.CreateTopic(ctx, name, 10, nil, false); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	before = redisState(t, rc)
	_, err = e.CreateTopic(ctx, "c", 10, nil, false)
	refused("past the total", "kafka.max_partitions", err)
	if err := e.CreatePartitions(ctx, "a", 11, false); err == nil {
		t.Fatal("growing a topic past max_partitions_per_topic went through")
	} else {
		refused("grow past the per-topic cap", "kafka.max_partitions_per_topic", err)
	}
	if _, err := e.CreateTopic(ctx, "d", 1, nil, false); err != nil {
		t.Fatalf("a topic within the total: %v", err)
	}
	if err := e.CreatePartitions(ctx, "d", 5, false); err == nil {
		t.Fatal("growing a topic past max_partitions went through")
	} else {
		refused("grow past the total", "kafka.max_partitions", err)
	}
	// Auto-creation (3 partitions) would make 25: fine; the next not.
	if _, err := e.EnsureTopic(ctx, "auto1"); err != nil {
		t.Fatalf("auto-create within the total: %v", err)
	}
	_, err = e.EnsureTopic(ctx, "auto2")
	refused("auto-create past the total", "kafka.max_partitions", err)
	if e.Topic("c") != nil || e.Topic("auto2") != nil || len(e.Topic("d").Partitions()) != 1 {
		t.Fatal("a refused creation left a topic or partitions behind")
	}
	if after := redisState(t, rc); !strings.Contains(after, "auto1") || strings.Contains(after, "auto2") || strings.Contains(after, " c ") {
		t.Fatalf("Redis after the refusals: %s (before them: %s)", after, before)
	}
	// Deleting frees room.
	if err := e.DeleteTopic(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic(ctx, "c", 10, nil, false); err != nil {
		t.Fatalf("create once room is freed: %v", err)
	}
	t.Logf("Redis: %s", redisState(t, rc))
}

// goroutineDump is every goroutine's stack, for a failure message.
func goroutineDump() string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

// After Close no background goroutine is left: flush loops of partitions
// that had traffic (appends, a trim, segment rolls), retention, tiering,
// the KV index's loops and the group coordinator's timers all stop, and
// calls after Close fail at once instead of starting loops that cannot
// reach Redis (they used to retry a trim forever, without pause, once the
// engine's context was gone).
func TestCloseStopsBackgroundLoops(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	baseline := runtime.NumGoroutine()

	store := enginetest.Cold(t, enginetest.LocalWarehouse(t))
	e, rc := enginetest.Open(t, r, engine.Options{
		AutoCreateTopics:  true,
		Cold:              store,
		TieringInterval:   50 * time.Millisecond,
		RetentionInterval: 50 * time.Millisecond,
		Index:             engine.IndexOptions{Dir: t.TempDir()},
	})
	tp, err := e.CreateTopic(ctx, "busy", 4, map[string]string{"segment.bytes": "2000", "remote.storage.enable": "true", "korvet.index.enable": "true", "retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		for _, p := range tp.Partitions() {
			if _, _, err := p.Append(recs(20, time.Now().UnixMilli(), "r")).Wait(ctx); err != nil {
				t.Fatalf("round %d: append: %v", round, err)
			}
		}
	}
	if _, err := tp.Partition(0).DeleteRecords(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// A group with a member: its session timer is armed.
	if _, err := e.Groups().Join(ctx, group.JoinRequest{Group: "g", ClientID: "c", SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Second,
		ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range"}}}); err != nil {
		t.Fatalf("join: %v", err)
	}

	// Appends racing the close: each ends, committed or refused.
	var wg sync.WaitGroup
	var ended atomic.Int64
	for _, p := range tp.Partitions() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, _, err := p.Append(recs(5, time.Now().UnixMilli(), "race")).Wait(wctx)
				cancel()
				ended.Add(1)
				if errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("an append racing Close hung: %v", err)
					return
				}
			}
		}()
	}
	// Close once the appends are under way, most of them still to come.
	testbed.WaitFor(t, 10*time.Second, "appends under way", func() bool { return ended.Load() >= 4 })
	e.Close()
	wg.Wait()

	// After Close: refused at once, no loop started.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, _, err := tp.Partition(1).Append(recs(1, 1, "late")).Wait(pctx); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("append after Close: %v, want ErrClosed", err)
	}
	if _, err := tp.Partition(1).DeleteRecords(pctx, 1); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("DeleteRecords after Close: %v, want ErrClosed", err)
	}
	rc.Close()
	store.Close()

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 10s after Close, %d before Open:\n%s", runtime.NumGoroutine(), baseline, goroutineDump())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("goroutines back to %d (baseline %d) after Close", runtime.NumGoroutine(), baseline)
}
