package cold

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// BenchmarkReadPoint measures a point read (what a KV read of an archived
// key costs korvet, the object store's own work excluded: the warehouse is
// a local directory) with no decoded row groups kept: a random record of a
// segment of 20000 records of 256 B, read with maxBytes 1; and, for
// comparison, the same read decoding its whole row group (the read before
// point reads). allocs/op and B/op are the guard: a point read decodes one
// page of each column.
func BenchmarkReadPoint(b *testing.B) {
	s := openStore(b, Config{Warehouse: "file://" + filepath.Join(b.TempDir(), "warehouse"), ReadCacheBytes: 1})
	ctx := ctxT(b)
	const n = 20000
	recs := make([]record.Record, n)
	val := make([]byte, 256)
	for i := range recs {
		for j := range val {
			val[j] = byte(rand.N(16)) // compresses, but not to nothing
		}
		recs[i] = record.Record{Offset: int64(i), Timestamp: 1_700_000_000_000 + int64(i), Key: []byte(fmt.Sprintf("k-%07d", i)),
			Value: append([]byte(nil), val...), Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}}
	}
	df, err := s.Archive(ctx, ref("bench", 0, 0, 0, n), chunked(recs, 500))
	if err != nil {
		b.Fatal(err)
	}
	pf, err := s.openFile(ctx, df.Path, df.Bytes)
	if err != nil {
		b.Fatal(err)
	}
	cols, err := columnsOf(pf.Schema())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("point", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			off := rng.Int64N(n)
			got, _, err := s.Read(ctx, df, off, 1)
			if err != nil || len(got) != 1 || got[0].Offset != off {
				b.Fatalf("read %d: %d records, %v", off, len(got), err)
			}
		}
	})
	b.Run("rowgroup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.readRowGroup(ctx, df.Path, pf, &cols, rng.IntN(len(pf.Metadata().RowGroups))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
