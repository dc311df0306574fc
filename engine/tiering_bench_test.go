package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// BenchmarkArchiveFromRedis measures the whole archiving path: sealed
// segments read from Redis streams, written as Parquet to versitygw and
// committed to Iceberg, 100-byte records, four partitions archived at once.
// The reference is Korvet's ~32k records/s per stream (115k/s with four).
func BenchmarkArchiveFromRedis(b *testing.B) {
	r := testbed.StartRedis(b)
	s3 := testbed.StartVersityGW(b)
	ctx := context.Background()
	// A long tiering interval: the benchmark starts the worker's round by
	// sealing, then waits for it.
	e, _ := enginetest.Open(b, r, engine.Options{Cold: enginetest.Cold(b, enginetest.S3Warehouse(s3, "bench")), TieringInterval: 20 * time.Millisecond})
	const parts, perPart = 4, 100_000
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		name := "bench" + string(rune('a'+n))
		tp, err := e.CreateTopic(ctx, name, parts, map[string]string{"segment.bytes": "8000000", "retention.ms": "-1"}, false)
		if err != nil {
			b.Fatal(err)
		}
		val := make([]byte, 100)
		batch := make([]record.Record, 1000)
		for p := 0; p < parts; p++ {
			for i := 0; i < perPart; i += len(batch) {
				for j := range batch {
					batch[j] = record.Record{Timestamp: time.Now().UnixMilli(), Value: val}
				}
				if _, _, err := tp.Partition(int32(p)).Append(batch).Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		// Seal everything: turning remote storage on lets the worker go.
		for _, p := range tp.Partitions() {
			if _, _, err := p.Append(batch[:1]).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		b.StartTimer()
		if err := e.IncrementalAlterConfigs(ctx, name, []engine.ConfigOp{{Name: "remote.storage.enable", Value: "true"}, {Name: "segment.ms", Value: "1"}}, false); err != nil {
			b.Fatal(err)
		}
		for {
			st, _ := e.Tiering()
			if st.ArchivedRecords >= int64((n+1)*parts*perPart) {
				break
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("archiving stalled: %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		b.ReportMetric(float64(parts*perPart)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(115_000, "ref-korvet-4-streams-records/s")
	}
}
