package engine_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// BenchmarkArchiveFromRedis measures the whole archiving path on a
// backlog: 1M records (16-byte keys, 100-byte values that zstd cannot
// shrink) in four partitions, sealed into segments of 1 MiB, read from
// their Redis streams, written as Parquet to versitygw, committed to the
// Iceberg table, marked archived and dropped from Redis. The clock runs
// from turning remote storage on until the last stream has left Redis.
// Besides records/s it reports the CPU each process spent per record:
// korvet (this process: the engine and the cold tier), redis-server and
// versitygw, which share the machine's cores. The reference is Korvet's
// ~32k records/s per stream (115k/s with four).
func BenchmarkArchiveFromRedis(b *testing.B) {
	r := testbed.StartRedis(b)
	s3 := testbed.StartVersityGW(b)
	ctx := context.Background()
	e, _ := enginetest.Open(b, r, engine.Options{Cold: enginetest.Cold(b, enginetest.S3Warehouse(s3, "bench")), TieringInterval: 20 * time.Millisecond})
	const parts, perPart, size = 4, 250_000, 100
	// Random values from a pool larger than a row group, as benchcold
	// has them: real payloads are compact already.
	pool := make([]byte, size*(1<<16)+8)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(pool); i += 8 {
		binary.LittleEndian.PutUint64(pool[i:], rng.Uint64())
	}
	var cpu struct{ korvet, redis, s3 time.Duration }
	var took time.Duration
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		name := fmt.Sprintf("bench%d", n)
		tp, err := e.CreateTopic(ctx, name, parts, map[string]string{"segment.bytes": "1048576", "retention.ms": "-1"}, false)
		if err != nil {
			b.Fatal(err)
		}
		errs := make(chan error, parts)
		for p := range int32(parts) {
			go func() { errs <- fillPartition(ctx, tp.Partition(p), perPart, size, pool) }()
		}
		for range parts {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		// Seal the open segments: with segment.ms at 1, the next append
		// starts a new segment.
		if err := e.IncrementalAlterConfigs(ctx, name, []engine.ConfigOp{{Name: "segment.ms", Value: "1"}}, false); err != nil {
			b.Fatal(err)
		}
		var segments int
		for _, p := range tp.Partitions() {
			if _, _, err := p.Append([]record.Record{{Timestamp: time.Now().UnixMilli(), Value: pool[:size]}}).Wait(ctx); err != nil {
				b.Fatal(err)
			}
			segs := p.Segments()
			if segs[len(segs)-2].State != engine.SegmentSealed {
				b.Fatalf("partition %d: segment %d not sealed", p.ID(), segs[len(segs)-2].ID)
			}
			segments += len(segs) - 1
		}
		before, _ := e.Tiering()
		k0, r0, s0 := selfCPU(b), serverCPU(b, r), serverCPU(b, s3)
		start := time.Now()
		b.StartTimer()
		if err := e.IncrementalAlterConfigs(ctx, name, []engine.ConfigOp{
			{Name: "remote.storage.enable", Value: "true"}, {Name: "local.retention.ms", Value: "0"}, {Name: "segment.ms", Value: "3600000"}}, false); err != nil {
			b.Fatal(err)
		}
		for !archivedAndDropped(tp) {
			if time.Since(start) > 5*time.Minute {
				st, _ := e.Tiering()
				b.Fatalf("archiving stalled: %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		took += time.Since(start)
		cpu.korvet += selfCPU(b) - k0
		cpu.redis += serverCPU(b, r) - r0
		cpu.s3 += serverCPU(b, s3) - s0
		st, _ := e.Tiering()
		if st.Errors != before.Errors {
			b.Fatalf("archiving failed: %s", st.LastError)
		}
		if got := st.ArchivedRecords - before.ArchivedRecords; got < parts*perPart {
			b.Fatalf("archived %d records, want %d", got, parts*perPart)
		}
		if n == 0 {
			b.Logf("%d segments of ~%d records", segments, parts*perPart/segments)
		}
	}
	recs := float64(b.N * parts * perPart)
	b.ReportMetric(recs/took.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.korvet.Microseconds())/recs, "korvet-µs/rec")
	b.ReportMetric(float64(cpu.redis.Microseconds())/recs, "redis-µs/rec")
	b.ReportMetric(float64(cpu.s3.Microseconds())/recs, "s3-µs/rec")
}

// fillPartition appends n records of 16-byte keys and size-byte values
// from pool, 1000 at a time with 8 appends in flight.
func fillPartition(ctx context.Context, p *engine.Partition, n, size int, pool []byte) error {
	const batch, inflight = 1000, 8
	bufs := make([][]record.Record, inflight)
	keys := make([]byte, 16*batch*inflight)
	for i := range bufs {
		bufs[i] = make([]record.Record, batch)
		for j := range bufs[i] {
			k := keys[16*(i*batch+j):][:16]
			binary.BigEndian.PutUint32(k, uint32(p.ID()))
			bufs[i][j].Key = k
		}
	}
	pending := make([]*engine.Pending, inflight)
	vals := (len(pool) - 8) / size
	for off, slot := 0, 0; off < n; off, slot = off+batch, (slot+1)%inflight {
		if pd := pending[slot]; pd != nil {
			if _, _, err := pd.Wait(ctx); err != nil {
				return fmt.Errorf("append to partition %d: %w", p.ID(), err)
			}
		}
		recs := bufs[slot][:min(batch, n-off)]
		now := time.Now().UnixMilli()
		for j := range recs {
			binary.BigEndian.PutUint64(recs[j].Key[8:], uint64(off+j))
			v := (off + j) % vals * size
			recs[j] = record.Record{Key: recs[j].Key, Value: pool[v : v+size], Timestamp: now}
		}
		pending[slot] = p.Append(recs)
	}
	for _, pd := range pending {
		if pd != nil {
			if _, _, err := pd.Wait(ctx); err != nil {
				return fmt.Errorf("append to partition %d: %w", p.ID(), err)
			}
		}
	}
	return nil
}

// archivedAndDropped reports whether every sealed segment of the topic is
// archived and has left Redis.
func archivedAndDropped(tp *engine.Topic) bool {
	for _, p := range tp.Partitions() {
		segs := p.Segments()
		for _, sg := range segs[:len(segs)-1] {
			if sg.State != engine.SegmentArchived || sg.Local {
				return false
			}
		}
	}
	return true
}

// selfCPU is the CPU time this process (the engine and its cold tier)
// has used.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time a testbed server has used.
func serverCPU(tb testing.TB, s interface{ CPUTime() (time.Duration, error) }) time.Duration {
	d, err := s.CPUTime()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
