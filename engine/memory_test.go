package engine_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// The sampler measures random 256-byte values (incompressible: Redis
// cannot hold them in fewer bytes) across several segments of two
// partitions, and projects the hot retention once records keep arriving.
func TestMemorySampler(t *testing.T) {
	const maxmem = 256 << 20
	r := testbed.StartRedis(t, "--maxmemory", "268435456")
	e, rc := enginetest.Open(t, r, engine.Options{MemorySampleInterval: 100 * time.Millisecond})
	ctx := context.Background()
	// Small segments: the figures must add up over sealed streams too.
	tp, err := e.CreateTopic(ctx, "rnd", 2, map[string]string{"segment.bytes": "65536"}, false)
	if err != nil {
		t.Fatal(err)
	}
	const perPart, size = 2000, 256
	batch := func(n int) []record.Record {
		out := make([]record.Record, n)
		for i := range out {
			v := make([]byte, size)
			rand.Read(v)
			out[i] = record.Record{Timestamp: time.Now().UnixMilli(), Value: v}
		}
		return out
	}
	for _, p := range tp.Partitions() {
		for i := 0; i < perPart; i += 200 {
			if _, _, err := p.Append(batch(200)).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(p.Segments()); n < 3 {
			t.Fatalf("partition %d has %d segments, want several", p.ID(), n)
		}
	}

	tm := waitMemory(t, e, "first sample of every record", func(tm engine.TopicMemory) bool { return tm.Entries == 2*perPart })
	t.Logf("%s: %.1f Redis bytes per record, %.1f record bytes per record, %d bytes over %d entries", tm.Topic, tm.BytesPerRecord, tm.RecordBytesPerRecord, tm.RedisBytes, tm.Entries)
	if tm.Partitions != 2 {
		t.Fatalf("partitions measured %d, want 2", tm.Partitions)
	}
	if tm.BytesPerRecord < size*0.5 || tm.BytesPerRecord > size*3 {
		t.Fatalf("Redis bytes per record %.1f for %d-byte random values: not plausible", tm.BytesPerRecord, size)
	}
	if tm.RecordBytesPerRecord < size || tm.RecordBytesPerRecord > size+200 {
		t.Fatalf("record bytes per record %.1f for %d-byte values", tm.RecordBytesPerRecord, size)
	}
	st := e.MemoryStatus()
	if st.MaxMemory != maxmem || st.UsedMemory <= tm.RedisBytes || st.SystemMemory <= 0 {
		t.Fatalf("memory status %+v, topic bytes %d", st, tm.RedisBytes)
	}
	// MEMORY USAGE of one stream, asked directly, is in the sum.
	one, err := rc.Do(ctx, "MEMORY", "USAGE", tp.Partition(0).StreamKey(), "SAMPLES", "0")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := one.Int(); n <= 0 || n >= tm.RedisBytes {
		t.Fatalf("open stream %d bytes, topic %d", n, tm.RedisBytes)
	}

	// With records arriving, the rate and the projection appear: the span
	// held now plus the time to fill maxmemory at that rate.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := tp.Partition(1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := p.Append(batch(50)).Wait(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	// One view: the topic's figures and the totals of the same sample.
	deadline := time.Now().Add(10 * time.Second)
	for st = e.MemoryStatus(); st.Topics["rnd"].RecordsPerSecond <= 0; st = e.MemoryStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("no ingest rate while appending: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	halt()
	tm = st.Topics["rnd"]
	if tm.IngestBytesPerSecond <= 0 || st.IngestBytesPerSecond < tm.IngestBytesPerSecond || tm.HotBound != 7*24*time.Hour || !tm.HotRetentionKnown {
		t.Fatalf("ingest %.0f B/s, total %.0f B/s, bound %v, %+v", tm.IngestBytesPerSecond, st.IngestBytesPerSecond, tm.HotBound, tm)
	}
	want, _ := engine.ProjectHotRetention(tm.HotSpan, tm.HotBound, st.MaxMemory-st.UsedMemory, st.IngestBytesPerSecond)
	// 256 MiB of maxmemory fill long before a week at this rate.
	if tm.HotRetention != want || tm.HotRetention < tm.HotSpan || tm.HotRetention >= tm.HotBound {
		t.Fatalf("hot retention %v, span %v, want %v", tm.HotRetention, tm.HotSpan, want)
	}
}

// waitMemory polls the sampler's view of topic "rnd" until ok.
func waitMemory(t *testing.T, e *engine.Engine, what string, ok func(engine.TopicMemory) bool) engine.TopicMemory {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tm, have := e.MemoryStatus().Topics["rnd"]
		if have && ok(tm) {
			return tm
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s: %+v", what, tm)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProjectHotRetention(t *testing.T) {
	const gib = 1 << 30
	day := 24 * time.Hour
	for _, c := range []struct {
		name        string
		span, bound time.Duration
		free        int64
		growing     float64
		want        time.Duration
		ok          bool
	}{
		// 1 GiB free at 1 GiB a day: one more day than held now.
		{"fills", 2 * day, 0, gib, gib / 86400.0, 3 * day, true},
		{"capped by retention", 2 * day, 7 * day, 10 * gib, gib / 86400.0, 7 * day, true},
		{"at its bound", 7 * day, 7 * day, 0, 1e9, 7 * day, true},
		{"full", 2 * day, 0, 0, 100, 2 * day, true},
		{"over the limit", 2 * day, 0, -5, 100, 2 * day, true},
		{"nothing grows, bounded", day, 3 * day, gib, 0, 3 * day, true},
		{"nothing grows, unbounded", day, 0, gib, 0, 0, false},
		// A trickle into a huge Redis does not overflow.
		{"no overflow", time.Hour, 0, 1 << 62, 1e-9, 0, true},
	} {
		got, ok := engine.ProjectHotRetention(c.span, c.bound, c.free, c.growing)
		if c.name == "no overflow" {
			if !ok || got <= c.span {
				t.Errorf("%s: %v %v", c.name, got, ok)
			}
			continue
		}
		d := got - c.want
		if ok != c.ok || d < -time.Second || d > time.Second {
			t.Errorf("%s: got %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
