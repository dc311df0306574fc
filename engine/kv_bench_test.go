package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// benchTopic opens an engine without an index on a fresh Redis, with an
// indexed topic of parts partitions holding perPart records each: 16-byte
// keys, 256-byte values, one header.
func benchTopic(b testing.TB, parts int32, perPart int) (*Engine, *Topic) {
	b.Helper()
	return benchTopicOpts(b, parts, perPart, Options{})
}

// benchTopicOpts is benchTopic with engine options (a key index: the
// records are indexed as they are appended).
func benchTopicOpts(b testing.TB, parts int32, perPart int, opts Options) (*Engine, *Topic) {
	b.Helper()
	r := testbed.StartRedis(b)
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := Open(ctx, rc, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	t, err := e.CreateTopic(ctx, "bench", parts, map[string]string{"korvet.index.enable": "true", "retention.ms": "-1"}, false)
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 256)
	batch := make([]record.Record, 1000)
	for _, p := range t.Partitions() {
		for i := 0; i < perPart; i += len(batch) {
			for j := range batch {
				batch[j] = record.Record{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "key-%012d", i+j), Value: val,
					Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}}
			}
			if _, _, err := p.Append(batch).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	return e, t
}

// BenchmarkReadKeys measures one catch-up read of keyScanCount records:
// the XRANGE and the walk of its reply.
func BenchmarkReadKeys(b *testing.B) {
	_, t := benchTopic(b, 1, keyScanCount)
	p := t.Partition(0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		recs, _, next, _, release, err := p.readKeys(ctx, 0, keyScanCount, nil, nil)
		if err != nil || len(recs) != keyScanCount || next != keyScanCount {
			b.Fatalf("%d records, next %d: %v", len(recs), next, err)
		}
		release()
	}
	b.ReportMetric(float64(b.N*keyScanCount)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkParseKeyEntries measures the walk of one XRANGE reply of
// keyScanCount records alone, on the bytes Redis sent, and (marks) the
// reading of the same records from the Marks its framing left, as
// readKeys does.
func BenchmarkParseKeyEntries(b *testing.B) {
	e, t := benchTopic(b, 1, keyScanCount)
	p := t.Partition(0)
	var pl resp.Pipeline
	pl.Cmd("XRANGE", p.streamKey(0), 0, keyScanCount-1)
	rs, err := e.rc.Exec(context.Background(), &pl)
	if err != nil {
		b.Fatal(err)
	}
	raw := append([]byte(nil), rs.At(0).Raw...)
	rs.Release()
	marks, err := resp.MarkReply(raw)
	if err != nil || marks == nil {
		b.Fatalf("marks %d: %v", len(marks), err)
	}
	for _, onMarks := range []bool{false, true} {
		b.Run(map[bool]string{false: "walk", true: "marks"}[onMarks], func(b *testing.B) {
			recs := make([]record.Record, 0, keyScanCount)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if onMarks {
					recs, _, err = parseKeyMarks(raw, marks, recs[:0], nil)
				} else {
					recs, err = parseKeyEntries(raw, recs[:0])
				}
				if err != nil || len(recs) != keyScanCount {
					b.Fatalf("%d records: %v", len(recs), err)
				}
			}
			b.ReportMetric(float64(b.N*keyScanCount)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkRebuild measures an offline rebuild of two partitions of 50k
// records each into a fresh index, next to its floor measured on the same
// data in the same run: the same XRANGEs, as many in flight, with the
// replies dropped unread (Redis, single-threaded, serves them at this
// rate whatever korvet does with them). Both report the CPU Redis spent
// per record and the rebuild the CPU this process (korvet's side) spent:
// on 2 cores the two compete, so korvet's CPU per record is what bounds
// the rate once Redis is busy.
func BenchmarkRebuild(b *testing.B) {
	const perPart = 50_000
	e, t := benchTopic(b, 2, perPart)
	ctx := context.Background()
	var floor float64
	b.Run("reads", func(b *testing.B) {
		b.ReportAllocs()
		rcpu := redisCPU(b, e.rc)
		for b.Loop() {
			var wg sync.WaitGroup
			for _, p := range t.Partitions() {
				sem := make(chan struct{}, keyReadsAhead)
				for at := int64(0); at < perPart; at += keyScanCount {
					sem <- struct{}{}
					wg.Add(1)
					go func() {
						defer func() { <-sem; wg.Done() }()
						var pl resp.Pipeline
						pl.Cmd("XRANGE", p.streamKey(0), at, at+keyScanCount-1, "COUNT", keyScanCount)
						rs, err := e.rc.Exec(ctx, &pl)
						if err != nil || rs.At(0).Len() != keyScanCount {
							b.Errorf("XRANGE at %d: %v", at, err)
						}
						if err == nil {
							rs.Release()
						}
					}()
				}
			}
			wg.Wait()
		}
		floor = float64(b.N*2*perPart) / b.Elapsed().Seconds()
		b.ReportMetric(floor, "records/s")
		b.ReportMetric((redisCPU(b, e.rc)-rcpu)*1e9/float64(b.N*2*perPart), "redis-ns/record")
	})
	b.Run("rebuild", func(b *testing.B) {
		b.ReportAllocs()
		var cpu time.Duration
		var rcpu float64
		for b.Loop() {
			b.StopTimer()
			ix, err := index.Open(b.TempDir(), index.Options{Bulk: true})
			if err != nil {
				b.Fatal(err)
			}
			r0, c0 := redisCPU(b, e.rc), processCPU()
			b.StartTimer()
			res, err := e.KV().Rebuild(ctx, ix, RebuildOptions{})
			if err != nil || res.Records != 2*perPart {
				b.Fatalf("%+v: %v", res, err)
			}
			b.StopTimer()
			cpu += processCPU() - c0
			rcpu += redisCPU(b, e.rc) - r0
			ix.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.N*2*perPart)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*2*perPart), "korvet-ns/record")
		b.ReportMetric(rcpu*1e9/float64(b.N*2*perPart), "redis-ns/record")
		if floor > 0 {
			b.ReportMetric(floor, "floor-records/s")
		}
	})
}

// loadSetup reads the first n records of a fresh partition into a chunk,
// with a bulk index to load them into: the rebuild's apply step alone.
func loadSetup(tb testing.TB, n int) (*kvIndex, *kvPart, *fillChunk, *partLoad) {
	e, t := benchTopic(tb, 1, n)
	ix, err := index.Open(tb.TempDir(), index.Options{Bulk: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ix.Close() })
	kv := newKVIndex(e, ix, IndexOptions{})
	kv.bulk = true
	kt, err := kv.topic(t)
	if err != nil {
		tb.Fatal(err)
	}
	kp := kt.part(0)
	c := &fillChunk{}
	readRange(context.Background(), t.Partition(0), 0, int64(n), c)
	if c.err != nil || len(c.recs) != n {
		tb.Fatalf("read %d records: %v", len(c.recs), c.err)
	}
	return kv, kp, c, &partLoad{l: ix.NewLoader(t.id, 0)}
}

// BenchmarkRebuildApply measures the rebuild's apply step (loadChunk) on
// a chunk of keyScanCount records already read, without writing a table.
func BenchmarkRebuildApply(b *testing.B) {
	kv, kp, c, ld := loadSetup(b, keyScanCount)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ld.next = 0
		ld.l.Reset()
		if err := kv.loadChunk(ctx, kp, c, -1, kv.gen, ld, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*keyScanCount)/b.Elapsed().Seconds(), "records/s")
}

// kvGetSetup is an engine with a key index over 2 partitions of perPart
// records (benchTopic's), caught up.
func kvGetSetup(tb testing.TB, perPart int) (*Engine, [][]byte) {
	tb.Helper()
	e, _ := benchTopicOpts(tb, 2, perPart, Options{Index: IndexOptions{Dir: tb.TempDir()}})
	for !e.KV().Ready() {
		time.Sleep(time.Millisecond)
	}
	keys := make([][]byte, perPart)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%012d", i)
	}
	return e, keys
}

// BenchmarkKVGet measures the hot KV read (index lookup, the one-record
// read from Redis, the key check) by one caller, and by 16 at once,
// whose reads share round trips to Redis (rtt/op: round trips per read).
func BenchmarkKVGet(b *testing.B) {
	e, keys := kvGetSetup(b, 20_000)
	kv := e.KV()
	ctx := context.Background()
	get := func(b *testing.B, i int) {
		rec, err := kv.Get(ctx, "bench", keys[i%len(keys)])
		if err != nil || len(rec.Value) != 256 {
			b.Fatalf("get %s: %d bytes, %v", keys[i%len(keys)], len(rec.Value), err)
		}
	}
	report := func(b *testing.B, st0 resp.BatchStats) {
		st := e.reads.Stats()
		if n := st.Pipelines - st0.Pipelines; n > 0 {
			b.ReportMetric(float64(st.RoundTrips-st0.RoundTrips)/float64(n), "rtt/op")
		}
	}
	b.Run("serial", func(b *testing.B) {
		st0 := e.reads.Stats()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			get(b, i*7919)
			i++
		}
		report(b, st0)
	})
	b.Run("16", func(b *testing.B) {
		st0 := e.reads.Stats()
		b.ReportAllocs()
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 1000
			for pb.Next() {
				get(b, i*7919)
				i++
			}
		})
		report(b, st0)
	})
}
