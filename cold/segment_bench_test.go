package cold

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/korvet/korvet/engine/record"
)

// BenchmarkSegmentWriter measures writing one segment file of 20000 JSON
// records (about 100 B and 256 B values, 12-byte keys), per record, and
// what the file takes per record, with the default 32 KiB pages, with
// 8 KiB pages and with the 256 KiB pages files had before point reads.
func BenchmarkSegmentWriter(b *testing.B) {
	codec := &zstd.Codec{Level: zstd.SpeedFastest}
	sc := segmentSchema()
	cols, err := columnsOf(sc)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{100, 256, -100} {
		recs := make([]record.Record, 20000)
		if size < 0 {
			// Random values (what zstd cannot shrink) with 16-byte keys,
			// as BenchmarkArchiveFromRedis archives.
			size = -size
			pool := make([]byte, 20000*(size+16))
			for i := range pool {
				pool[i] = byte(rng.Uint32())
			}
			for i := range recs {
				kv := pool[i*(size+16):][:size+16]
				recs[i] = record.Record{Offset: int64(i), Timestamp: 1_700_000_000_000 + int64(i), Key: kv[:16], Value: kv[16:]}
			}
			b.Run(fmt.Sprintf("random=%dB/page=32KiB", size), func(b *testing.B) { benchSegmentWriter(b, sc, cols, codec, recs, 32<<10) })
			continue
		}
		for i := range recs {
			v := fmt.Sprintf(`{"id":%d,"user":"user-%d","plan":"%s","score":%d,"tags":[`, i, rng.IntN(5000), []string{"free", "pro", "team"}[rng.IntN(3)], rng.IntN(1000))
			for len(v) < size-10 {
				v += fmt.Sprintf(`"t%d",`, rng.IntN(100))
			}
			v += `"end"]}`
			recs[i] = record.Record{Offset: int64(i), Timestamp: 1_700_000_000_000 + int64(i), Key: []byte(fmt.Sprintf("user-%07d", i)), Value: []byte(v)}
		}
		for _, page := range []int{8 << 10, 32 << 10, 256 << 10} {
			b.Run(fmt.Sprintf("value=%dB/page=%dKiB", size, page>>10), func(b *testing.B) { benchSegmentWriter(b, sc, cols, codec, recs, page) })
		}
	}
}

func benchSegmentWriter(b *testing.B, sc *parquet.Schema, cols fileColumns, codec *zstd.Codec, recs []record.Record, page int) {
	b.ReportAllocs()
	var out countingWriter
	for b.Loop() {
		out = 0
		sw := newSegmentWriter(&out, sc, cols, nil, codec, SegmentRef{Topic: "t"}, 256<<10, page)
		for i := 0; i < len(recs); i += 500 {
			if err := sw.write(recs[i:i+500], nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := sw.close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	b.ReportMetric(float64(out)/float64(len(recs)), "file-B/record")
}

type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}
