package cold

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// gappySegment is txnSegment(0, n) with records left out, as compaction
// leaves a segment before it is archived: every 13th, and a stretch of
// 120 in the middle. Offsets keep their gaps.
func gappySegment(n int) ([]record.Record, []record.Txn) {
	recs, txns := txnSegment(0, n)
	var kr []record.Record
	var kt []record.Txn
	for i := range recs {
		if i%13 == 0 || i >= n/3 && i < n/3+120 {
			continue
		}
		kr, kt = append(kr, recs[i]), append(kt, txns[i])
	}
	return kr, kt
}

// A point read (maxBytes up to pointReadBytes) of every offset, in a
// segment with and without gaps, returns what a whole-row-group read
// returns from there, transactions included, with one ranged GET of the
// pages that hold the record (the footer cached), never the row group.
func TestPointRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		cfg := b.cfg
		cfg.CacheDir = t.TempDir()
		cfg.RowGroupBytes = 32 << 10
		cfg.PageBytes = 1 << 10 // many pages in every column
		cfg.ReadCacheBytes = 1  // nothing decoded is kept
		s := openStore(t, cfg)
		ctx := ctxT(t)
		for seg, tc := range []struct {
			name      string
			gaps, big bool
		}{{"dense", false, false}, {"gaps", true, false}, {"values", false, true}} {
			t.Run(tc.name, func(t *testing.T) {
				recs, txns := txnSegment(0, 3000)
				switch {
				case tc.gaps:
					recs, txns = gappySegment(3000)
				case tc.big:
					// Values are most of a row group: a point read fetches
					// the pages of one record, and of the columns between
					// them, not all of the value column.
					for i := range recs {
						recs[i].Value = make([]byte, 500)
						for j := range recs[i].Value {
							recs[i].Value[j] = byte(rand.N(256))
						}
					}
				}
				first, last := recs[0].Offset, recs[len(recs)-1].Offset
				df, err := s.Archive(ctx, ref("point", 0, int64(seg), first, int(last-first+1)), chunkedTxn(recs, txns, 100))
				if err != nil {
					t.Fatal(err)
				}
				pf, err := s.openFile(ctx, df.Path, df.Bytes)
				if err != nil {
					t.Fatal(err)
				}
				md := pf.Metadata()
				if len(md.RowGroups) < 4 {
					t.Fatalf("%d row groups", len(md.RowGroups))
				}
				var rgBytes int64 // of a row group, on average
				for i := range md.RowGroups {
					rgBytes += md.RowGroups[i].TotalCompressedSize
				}
				rgBytes /= int64(len(md.RowGroups))
				want := map[int64]record.Txn{}
				for i, r := range recs {
					want[r.Offset] = txns[i]
				}
				step := int64(1)
				if b.name == "s3" {
					step = 3
				}
				var gets, bytes int64
				for off := first; off <= last; off += step {
					// The record a point read must find: the first at or after off.
					i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
					before := s.Stats()
					got, gotTxns, err := s.Read(ctx, df, off, 1)
					if err != nil {
						t.Fatalf("read %d: %v", off, err)
					}
					d := diff(s.Stats(), before)
					gets, bytes = gets+d.Gets, bytes+d.GetBytes
					if d.Gets != 1 {
						t.Fatalf("point read of %d: %d GETs", off, d.Gets)
					}
					equalRecords(t, got, recs[i:i+1])
					equalTxns(t, got, gotTxns, txns[i:], recs[i].Offset)
					// A few more bytes: the records of those pages.
					got, gotTxns, err = s.Read(ctx, df, off, pointReadBytes)
					if err != nil {
						t.Fatalf("read %d: %v", off, err)
					}
					equalRecords(t, got, recs[i:i+len(got)])
					for j, r := range got {
						if len(gotTxns) > 0 && gotTxns[j] != want[r.Offset] {
							t.Fatalf("offset %d: txn %+v, want %+v", r.Offset, gotTxns[j], want[r.Offset])
						}
					}
				}
				n := (last-first)/step + 1
				t.Logf("%d point reads: %.1f GETs, %d bytes each; %d row groups of %d bytes on average, file %d",
					n, float64(gets)/float64(n), bytes/n, len(md.RowGroups), rgBytes, df.Bytes)
				if tc.big && bytes/n > rgBytes*3/4 {
					t.Fatalf("point reads fetch %d bytes each, a row group is %d", bytes/n, rgBytes)
				}
			})
		}
	})
}

// A point read keeps what it decoded: the next one in the same pages, or
// in a row group a consumer read whole, makes no request.
func TestPointReadCache(t *testing.T) {
	cfg := localBackend(t).cfg
	cfg.RowGroupBytes = 32 << 10
	cfg.PageBytes = 2 << 10
	s := openStore(t, cfg)
	ctx := ctxT(t)
	recs := makeRecords(0, 3000)
	df, err := s.Archive(ctx, ref("pc", 0, 0, 0, len(recs)), chunked(recs, 100))
	if err != nil {
		t.Fatal(err)
	}
	read := func(off int64, maxBytes int) int64 {
		t.Helper()
		before := s.Stats()
		got, _, err := s.Read(ctx, df, off, maxBytes)
		if err != nil || len(got) == 0 || got[0].Offset != off {
			t.Fatalf("read %d: %d records, %v", off, len(got), err)
		}
		return diff(s.Stats(), before).Gets
	}
	read(0, 1) // the footer
	if g := read(100, 1); g != 1 {
		t.Fatalf("point read: %d GETs", g)
	}
	if g := read(101, 1); g != 0 {
		t.Fatalf("point read in the same pages: %d GETs", g)
	}
	if g := read(2000, 1<<20); g == 0 {
		t.Fatalf("fetch: %d GETs", g)
	}
	if g := read(2001, 1); g != 0 {
		t.Fatalf("point read in a decoded row group: %d GETs", g)
	}
}

// A footer cached on disk before offset indexes were kept with it (the
// tail was only the footer) gets them with one GET, once, and point reads
// work from there.
func TestPointReadOldFooterCache(t *testing.T) {
	b := s3Backend(t)
	cfg := b.cfg
	cfg.CacheDir = t.TempDir()
	cfg.ReadCacheBytes = 1
	cfg.RowGroupBytes = 32 << 10
	s := openStore(t, cfg)
	ctx := ctxT(t)
	recs := makeRecords(0, 3000)
	df, err := s.Archive(ctx, ref("old", 0, 0, 0, len(recs)), chunked(recs, 100))
	if err != nil {
		t.Fatal(err)
	}
	// The old cache file: size, then footer, footer length and magic.
	whole, err := s.obj.get(ctx, df.Path)
	if err != nil {
		t.Fatal(err)
	}
	flen := int(binary.LittleEndian.Uint32(whole[len(whole)-8:]))
	old := binary.LittleEndian.AppendUint64(nil, uint64(len(whole)))
	old = append(old, whole[len(whole)-8-flen:]...)
	file := filepath.Join(cfg.CacheDir, "footers", cacheKey(df.Path))
	if err := os.WriteFile(file, old, 0o644); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, cfg)
	before := s2.Stats()
	got, _, err := s2.Read(ctx, df, 1234, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs[1234:1235])
	if d := diff(s2.Stats(), before); d.Gets != 2 {
		t.Fatalf("first point read with an old footer cache: %d GETs, want the offset indexes and the pages", d.Gets)
	}
	if st, err := os.Stat(file); err != nil || st.Size() <= int64(len(old)) {
		t.Fatalf("footer cache not rewritten with the offset indexes: %v", err)
	}
	s3 := openStore(t, cfg)
	before = s3.Stats()
	if got, _, err := s3.Read(ctx, df, 2345, 1); err != nil || got[0].Offset != 2345 {
		t.Fatalf("read: %v", err)
	}
	if d := diff(s3.Stats(), before); d.Gets != 1 {
		t.Fatalf("point read after the upgrade: %d GETs", d.Gets)
	}
}

func TestRowsOf(t *testing.T) {
	for _, c := range []struct {
		from, minOff, maxOff, n int64
		r1, r2                  int64
		ok                      bool
	}{
		{5, 0, 9, 10, 5, 5, true},    // dense
		{0, 10, 19, 10, 0, 0, true},  // before the row group
		{19, 10, 19, 10, 9, 9, true}, // its last offset
		{20, 10, 19, 10, 0, 0, false},
		{15, 10, 29, 10, 0, 5, true}, // 10 gaps: rows 0 to 5
		{28, 10, 29, 10, 8, 9, true},
		{5, 0, 5, 10, 0, 0, false}, // fewer offsets than rows
		{0, 0, 0, 0, 0, 0, false},
	} {
		r1, r2, ok := rowsOf(c.from, c.minOff, c.maxOff, c.n)
		if ok != c.ok || ok && (r1 != c.r1 || r2 != c.r2) {
			t.Errorf("rowsOf(%d, %d, %d, %d) = %d, %d, %v; want %d, %d, %v", c.from, c.minOff, c.maxOff, c.n, r1, r2, ok, c.r1, c.r2, c.ok)
		}
	}
}
