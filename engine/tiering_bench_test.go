package engine_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// BenchmarkArchiveFromRedis measures the whole archiving path: sealed
// segments read from Redis streams, written as Parquet to versitygw and
// committed to Iceberg, 100-byte records, four partitions archived at once.
// The reference is Korvet's ~32k records/s per stream (115k/s with four).
func BenchmarkArchiveFromRedis(b *testing.B) {
	r := testbed.StartRedis(b)
	s3 := testbed.StartVersityGW(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	store, err := cold.Open(ctx, cold.Config{Warehouse: "s3://bench/wh", Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Region: s3.Region, PathStyle: true, CacheDir: b.TempDir()}, quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	// A long tiering interval: the benchmark starts the worker's round by
	// sealing, then waits for it.
	e, err := engine.Open(ctx, rc, engine.Options{Logger: quiet, Cold: store, TieringInterval: 20 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
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
