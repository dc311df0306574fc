package web_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/web"
)

// BenchmarkKVGetCold: sequential GET /v1/kv/{topic}/{key} over loopback
// HTTP for keys whose records live only in the cold tier (archived to
// versitygw, their streams gone from Redis). Reference: rpkv's cold read
// p50 10.58 ms (MinIO); target p99 <= 5 ms. Each GET is followed by the
// floor it stands on, measured in the same run: one ranged GET of 2 KiB of
// an archived file straight from versitygw with minio-go (ref-get-*, in
// the uncached case); gets/read and get-B/read are what a KV read cost the
// object store.
func BenchmarkKVGetCold(b *testing.B) {
	// uncached: every read fetches its row group from versitygw (only the
	// Parquet footers stay cached, on disk); cached: korvet's default
	// 64 MiB of decoded row groups.
	b.Run("uncached", func(b *testing.B) { benchKVGetCold(b, 1, true) })
	b.Run("cached", func(b *testing.B) { benchKVGetCold(b, 0, false) })
}

func benchKVGetCold(b *testing.B, readCache int, floor bool) {
	r := testbed.StartRedis(b)
	s3 := testbed.StartVersityGW(b)
	ctx := context.Background()
	cfg := enginetest.S3Warehouse(s3, "kvbench")
	cfg.ReadCacheBytes = readCache
	store := enginetest.Cold(b, cfg)
	eng, _ := enginetest.Open(b, r, engine.Options{Cold: store, TieringInterval: 20 * time.Millisecond, GroupInitialRebalanceDelay: -1, Index: engine.IndexOptions{Dir: filepath.Join(b.TempDir(), "index")}})
	const keys = 20000
	tp, err := eng.CreateTopic(ctx, "coldkv", 1, map[string]string{"korvet.index.enable": "true", "remote.storage.enable": "true",
		"segment.bytes": "1000000", "local.retention.ms": "0", "retention.ms": "-1"}, false)
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 256)
	for i := 0; i < keys; i += 500 {
		batch := make([]record.Record, 500)
		for j := range batch {
			batch[j] = record.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(fmt.Sprintf("k-%07d", i+j)), Value: val}
		}
		if _, _, err := tp.Partition(0).Append(batch).Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// One more record seals the last full segment; wait until every
	// sealed segment has left Redis.
	deadline := time.Now().Add(20 * time.Second)
	for {
		segs := tp.Partition(0).Segments()
		local := 0
		for _, sg := range segs {
			if sg.Local {
				local++
			}
		}
		if local == 1 && len(segs) > 1 {
			break
		}
		if time.Now().After(deadline) {
			st, _ := eng.Tiering()
			b.Fatalf("segments not archived: %+v; tiering %+v", segs[0], st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	open := tp.Partition(0).Segments()
	coldBelow := open[len(open)-1].Base // keys below this offset are cold only
	srv := httptest.NewServer(web.New(eng, web.Options{Logger: testbed.Logger()}))
	defer srv.Close()
	hc := srv.Client()
	get := func(i int) {
		res, err := hc.Get(fmt.Sprintf("%s/v1/kv/coldkv/k-%07d", srv.URL, i))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || n != 256 {
			b.Fatalf("GET k-%07d: %d, %d bytes", i, res.StatusCode, n)
		}
	}
	mc, err := minio.New(s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""),
		Region: s3.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		b.Fatal(err)
	}
	var files []engine.Segment
	for _, sg := range open[:len(open)-1] {
		if sg.FileBytes > 4<<10 {
			files = append(files, sg)
		}
	}
	if len(files) == 0 {
		b.Fatal("no archived files")
	}
	buf := make([]byte, 2<<10)
	rawGet := func(rng *rand.Rand) {
		sg := files[rng.IntN(len(files))]
		key := strings.TrimPrefix(sg.File, "s3://kvbench/")
		off := rng.Int64N(sg.FileBytes - int64(len(buf)))
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, off+int64(len(buf))-1); err != nil {
			b.Fatal(err)
		}
		obj, err := mc.GetObject(ctx, "kvbench", key, opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(obj, buf); err != nil {
			b.Fatalf("GET %s: %v", key, err)
		}
		obj.Close()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	before := store.Stats()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		lat := make([]time.Duration, 0, 2000)
		ref := make([]time.Duration, 0, 2000)
		for i := 0; i < 2000; i++ {
			k := rng.IntN(int(coldBelow))
			t0 := time.Now()
			get(k)
			t1 := time.Now()
			lat = append(lat, t1.Sub(t0))
			if floor {
				rawGet(rng)
				ref = append(ref, time.Since(t1))
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		if floor {
			slices.Sort(ref)
			b.ReportMetric(float64(ref[len(ref)/2].Microseconds())/1000, "ref-get-p50-ms")
			b.ReportMetric(float64(ref[len(ref)*99/100].Microseconds())/1000, "ref-get-p99-ms")
		}
		b.ReportMetric(10.58, "ref-rpkv-cold-p50-ms")
	}
	// What a read costs the object store: ranged GETs and their bytes.
	st := store.Stats()
	reads := float64(b.N * 2000)
	b.ReportMetric(float64(st.Gets-before.Gets)/reads, "gets/read")
	b.ReportMetric(float64(st.GetBytes-before.GetBytes)/reads, "get-B/read")
}
