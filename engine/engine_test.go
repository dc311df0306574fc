package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

func recs(n int, ts int64, tag string) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{Timestamp: ts, Key: []byte(fmt.Sprintf("%s-%d", tag, i)), Value: []byte(fmt.Sprintf("value %s %d", tag, i))}
	}
	return out
}

func readAll(t *testing.T, p *engine.Partition) []record.Record {
	t.Helper()
	var out []record.Record
	off := p.LogStart()
	for off < p.HighWatermark() {
		res, err := p.Read(context.Background(), off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			out = append(out, cloneRecord(r))
		}
		off = res.Records[len(res.Records)-1].Offset + 1
		res.Release()
	}
	return out
}

// cloneRecord copies r out of the buffers of a read, nil slices staying nil.
func cloneRecord(r record.Record) record.Record {
	c := record.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, record.Header{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)})
	}
	return c
}

// Concurrent appends to one partition are group-committed: every append
// gets a contiguous range, ranges do not overlap, and the log holds
// exactly what was appended, densely.
func TestConcurrentAppendsAreDenseAndAtomic(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	tp, err := e.CreateTopic(context.Background(), "c", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	const writers, perWriter, batch = 8, 50, 20
	var wg sync.WaitGroup
	bases := make(chan [2]int64, writers*perWriter)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				b := recs(batch, time.Now().UnixMilli(), fmt.Sprintf("w%d.%d", w, i))
				base, _, err := p.Append(b).Wait(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				bases <- [2]int64{base, int64(w*perWriter + i)}
			}
		}(w)
	}
	wg.Wait()
	close(bases)
	seen := map[int64]bool{}
	for b := range bases {
		if seen[b[0]] || b[0]%batch != 0 {
			t.Fatalf("append base %d overlaps or is misaligned", b[0])
		}
		seen[b[0]] = true
	}
	got := readAll(t, p)
	if len(got) != writers*perWriter*batch || p.HighWatermark() != int64(len(got)) {
		t.Fatalf("log holds %d records, hw %d", len(got), p.HighWatermark())
	}
	for i, g := range got {
		if g.Offset != int64(i) {
			t.Fatalf("offset %d at position %d", g.Offset, i)
		}
		// Records of one append are contiguous and in order.
		if i%batch != 0 && string(got[i-1].Key[:len(got[i-1].Key)-len(fmt.Sprint(i%batch-1))]) != string(g.Key[:len(g.Key)-len(fmt.Sprint(i%batch))]) {
			t.Fatalf("append split at offset %d: %q after %q", i, g.Key, got[i-1].Key)
		}
	}
}

func TestRetentionMsTrimsOldAppends(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{RetentionInterval: 50 * time.Millisecond})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "old", 1, map[string]string{"retention.ms": "3600000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	if _, _, err := p.Append(recs(30, old, "old")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Append(recs(20, time.Now().UnixMilli(), "new")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.LogStart() != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("log start %d, want 30", p.LogStart())
		}
		time.Sleep(20 * time.Millisecond)
	}
	n, _ := rc.Do(ctx, "XLEN", p.StreamKey())
	if l, _ := n.Int(); l != 20 {
		t.Fatalf("stream holds %d entries, want 20", l)
	}
	if _, err := p.Read(ctx, 29, 100); !errors.Is(err, engine.ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	// The log start survives a restart.
	e.Close()
	e2, _ := enginetest.Open(t, r, engine.Options{})
	if s := e2.Topic("old").Partition(0).LogStart(); s != 30 {
		t.Fatalf("log start after restart %d", s)
	}
}

// keptPartition creates topic name with one partition whose records are
// kept (retention.ms -1) and returns that partition.
func keptPartition(t *testing.T, e *engine.Engine, name string) *engine.Partition {
	t.Helper()
	tp, err := e.CreateTopic(context.Background(), name, 1, map[string]string{"retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	return tp.Partition(0)
}

// A Redis that dies mid-traffic: appends fail with a retriable error, and
// after Redis is back the partition resyncs and continues densely, with
// nothing acknowledged lost.
func TestAppendAcrossRedisRestart(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	p := keptPartition(t, e, "r")
	acked := 0
	for i := 0; i < 10; i++ {
		if _, _, err := p.Append(recs(10, time.Now().UnixMilli(), "a")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		acked += 10
	}
	r.Stop() // clean shutdown: AOF has everything
	_, _, err := p.Append(recs(10, time.Now().UnixMilli(), "down")).Wait(ctx)
	if !errors.Is(err, engine.ErrStorageUnavailable) {
		t.Fatalf("append with Redis down: %v, want ErrStorageUnavailable", err)
	}
	r.Restart(t)
	var base int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		base, _, err = p.Append(recs(10, time.Now().UnixMilli(), "b")).Wait(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("append after Redis came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if base != int64(acked) {
		t.Fatalf("append after restart at %d, want %d (dense)", base, acked)
	}
	if got := readAll(t, p); len(got) != acked+10 {
		t.Fatalf("log holds %d records, want %d", len(got), acked+10)
	}
}

func TestOffsetForTime(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	p := keptPartition(t, e, "ts")
	// Timestamps not in order within appends, as CreateTime allows.
	ts := []int64{100, 90, 200, 150, 300, 310, 305, 400}
	for i := 0; i < len(ts); i += 2 {
		b := []record.Record{{Timestamp: ts[i], Value: []byte("x")}, {Timestamp: ts[i+1], Value: []byte("y")}}
		if _, _, err := p.Append(b).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ at, off int64 }{{0, 0}, {95, 0}, {101, 2}, {150, 2}, {201, 4}, {306, 5}, {400, 7}, {401, 8}} {
		off, _, err := p.OffsetForTime(ctx, c.at)
		if err != nil {
			t.Fatal(err)
		}
		if off != c.off {
			t.Errorf("offset for time %d: %d, want %d", c.at, off, c.off)
		}
	}
	if off, ts, _ := p.MaxTimestamp(ctx); off != 7 || ts != 400 {
		t.Errorf("max timestamp: offset %d ts %d", off, ts)
	}
}

// TestAppendAfterRedisLostWrites simulates a failover to a replica that
// lacked the last append (redis.wait_replicas = 0): the stream and the
// counter in Redis are behind the leader's. The next append must not
// leave a gap or write past what Redis holds: it fails (retriable), the
// partition reloads, and appends carry on from Redis's counter.
func TestAppendAfterRedisLostWrites(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	p := keptPartition(t, e, "lost")
	if _, _, err := p.Append(recs(5, time.Now().UnixMilli(), "kept")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Append(recs(3, time.Now().UnixMilli(), "lost")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// What a replica promoted between the two appends holds.
	var pl resp.Pipeline
	for off := 5; off < 8; off++ {
		pl.Cmd("XDEL", "korvet:storage:local:lost:0:0", strconv.Itoa(off)+"-1")
	}
	pl.Cmd("XDEL", "korvet:meta:batches:lost:0", "7-1")
	pl.Cmd("HSET", "korvet:meta:partition:lost:0", "next", 5)
	// A replica that never had them has never seen their IDs either.
	pl.Cmd("XSETID", "korvet:storage:local:lost:0:0", "4-1")
	pl.Cmd("XSETID", "korvet:meta:batches:lost:0", "4-1")
	rs, err := rc.Exec(ctx, &pl)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs.Len() {
		if i >= 5 {
			if err := rs.At(i).Err(); err != nil {
				t.Fatalf("simulating the loss, XSETID: %v", err)
			}
			continue
		}
		if n, err := rs.At(i).Int(); err != nil || (i < 4 && n != 1) {
			t.Fatalf("simulating the loss, command %d: %d %v", i, n, err)
		}
	}
	rs.Release()

	_, _, err = p.Append(recs(1, time.Now().UnixMilli(), "first")).Wait(ctx)
	if !errors.Is(err, engine.ErrStorageUnavailable) {
		t.Fatalf("append over lost writes: %v, want ErrStorageUnavailable (retriable)", err)
	}
	base, _, err := p.Append(recs(2, time.Now().UnixMilli(), "after")).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if base != 5 {
		t.Fatalf("append after the reload at offset %d, want 5 (Redis's counter)", base)
	}
	got := readAll(t, p)
	if len(got) != 7 {
		t.Fatalf("log holds %d records, want 7", len(got))
	}
	for i, rec := range got {
		if rec.Offset != int64(i) {
			t.Fatalf("record %d has offset %d: the log has a gap", i, rec.Offset)
		}
	}
}
