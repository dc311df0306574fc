package cold

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
)

// backend is a warehouse under test: a local directory or versitygw.
type backend struct {
	name string
	cfg  Config
	s3   *testbed.S3
}

func localBackend(t testing.TB) backend {
	return backend{name: "local", cfg: Config{Warehouse: "file://" + filepath.Join(t.TempDir(), "warehouse")}}
}

func s3Backend(t testing.TB) backend {
	s3 := testbed.StartVersityGW(t)
	return backend{name: "s3", s3: s3, cfg: Config{
		Warehouse: "s3://korvet-test/wh",
		Endpoint:  s3.Endpoint,
		AccessKey: s3.AccessKey,
		SecretKey: s3.SecretKey,
		Region:    s3.Region,
		PathStyle: true,
	}}
}

// eachBackend runs f against a local warehouse and against versitygw.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, mk := range []func(testing.TB) backend{localBackend, s3Backend} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func openStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var topicID = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// makeRecords builds n records from offset base with every shape a Kafka
// record can take: null and empty keys and values, binary bytes, no
// headers, duplicate headers, null header values, empty header keys.
func makeRecords(base int64, n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		off := base + int64(i)
		r := record.Record{Offset: off, Timestamp: 1_700_000_000_000 + off*10}
		switch i % 7 {
		case 0:
			r.Key = nil
			r.Value = []byte(fmt.Sprintf(`{"n":%d}`, off))
		case 1:
			r.Key = []byte{}
			r.Value = []byte{}
		case 2:
			r.Key = []byte(fmt.Sprintf("key-%d", off))
			r.Value = nil // tombstone
		case 3:
			r.Key = []byte{0, 0xff, 0xfe, byte(off)}
			r.Value = bytes.Repeat([]byte{byte(off), 0, 0xff}, 50)
		case 4:
			r.Key = []byte("k")
			r.Value = []byte("v")
			r.Headers = []record.Header{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("a"), Value: nil}, {Key: []byte("a"), Value: []byte{}}}
		case 5:
			r.Key = []byte("dup")
			r.Value = []byte(strings.Repeat("x", 100))
			r.Headers = []record.Header{{Key: []byte{}, Value: []byte{0}}}
		case 6:
			r.Timestamp = -1 // a producer may send anything
			r.Key = []byte("neg")
			r.Value = []byte("ts")
			r.Headers = []record.Header{{Key: []byte("trace"), Value: nil}, {Key: []byte("b"), Value: []byte("\x00\x01")}}
		}
		recs[i] = r
	}
	return recs
}

// chunked feeds recs to Archive size records at a time, none of them
// transactional.
func chunked(recs []record.Record, size int) func() ([]record.Record, []record.Txn, error) {
	return chunkedTxn(recs, nil, size)
}

// chunkedTxn is chunked with transaction info: txns empty or parallel to
// recs.
func chunkedTxn(recs []record.Record, txns []record.Txn, size int) func() ([]record.Record, []record.Txn, error) {
	return func() ([]record.Record, []record.Txn, error) {
		if len(recs) == 0 {
			return nil, nil, io.EOF
		}
		n := min(size, len(recs))
		out := recs[:n]
		recs = recs[n:]
		var tx []record.Txn
		if len(txns) > 0 {
			k := min(n, len(txns)) // tests of a mismatch pass it on
			tx, txns = txns[:k], txns[k:]
		}
		return out, tx, nil
	}
}

func equalRecords(t *testing.T, got, want []record.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, g, w)
		}
		for j := range w.Headers {
			if !bytes.Equal(g.Headers[j].Key, w.Headers[j].Key) || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %+v want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func ref(topic string, partition int32, segment, base int64, n int) SegmentRef {
	return SegmentRef{Topic: topic, TopicID: topicID, Partition: partition, Segment: segment, BaseOffset: base, LastOffset: base + int64(n) - 1}
}

func TestArchiveAndReadBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		cfg := b.cfg
		cfg.CacheDir = t.TempDir()
		cfg.RowGroupBytes = 16 << 10 // several row groups per file
		s := openStore(t, cfg)
		ctx := ctxT(t)

		segs := []struct {
			part      int32
			seg, base int64
			n         int
		}{{0, 0, 0, 1000}, {0, 1, 1000, 500}, {1, 0, 0, 7}}
		want := map[string][]record.Record{}
		for _, sg := range segs {
			recs := makeRecords(sg.base, sg.n)
			df, err := s.Archive(ctx, ref("orders.v1", sg.part, sg.seg, sg.base, sg.n), chunked(recs, 64))
			if err != nil {
				t.Fatal(err)
			}
			if df.Records != int64(sg.n) || df.MinOffset != sg.base || df.MaxOffset != sg.base+int64(sg.n)-1 ||
				df.Partition != sg.part || df.Segment != sg.seg || df.TopicID != topicID || df.Bytes <= 0 {
				t.Fatalf("data file %+v", df)
			}
			minTs, maxTs := recs[0].Timestamp, recs[0].Timestamp
			for _, r := range recs {
				minTs, maxTs = min(minTs, r.Timestamp), max(maxTs, r.Timestamp)
			}
			if df.MinTimestamp != minTs || df.MaxTimestamp != maxTs {
				t.Fatalf("timestamps %d..%d, want %d..%d", df.MinTimestamp, df.MaxTimestamp, minTs, maxTs)
			}
			want[df.Path] = recs
		}

		files, err := s.Files(ctx, "orders.v1")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 3 || files[0].Partition != 0 || files[0].MinOffset != 0 || files[1].MinOffset != 1000 || files[2].Partition != 1 {
			t.Fatalf("files %+v", files)
		}
		// A fresh store (korvet after a restart) finds the same files.
		s2 := openStore(t, b.cfg)
		files2, err := s2.Files(ctx, "orders.v1")
		if err != nil || len(files2) != 3 || files2[1] != files[1] {
			t.Fatalf("files after reopen: %+v, %v", files2, err)
		}

		for _, f := range files {
			recs := want[f.Path]
			// Everything, in one read.
			got, _, err := s.Read(ctx, f, f.MinOffset, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, recs)
			// Page through from the middle with small fetches.
			from := f.MinOffset + int64(len(recs)/3)
			var paged []record.Record
			for from <= f.MaxOffset {
				got, _, err := s.Read(ctx, f, from, 3000)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 0 {
					t.Fatalf("no records at %d", from)
				}
				paged = append(paged, got...)
				from = got[len(got)-1].Offset + 1
			}
			equalRecords(t, paged, recs[len(recs)/3:])
			// Past the end: nothing.
			if got, _, err := s.Read(ctx, f, f.MaxOffset+1, 1<<20); err != nil || len(got) != 0 {
				t.Fatalf("read past the end: %d records, %v", len(got), err)
			}
			// A tiny maxBytes still returns one record.
			if got, _, err := s.Read(ctx, f, f.MinOffset, 1); err != nil || len(got) != 1 || got[0].Offset != f.MinOffset {
				t.Fatalf("read with maxBytes 1: %+v, %v", got, err)
			}
		}

		// Offset for time: timestamps rise with offsets except every 7th
		// record (timestamp -1).
		f := files[0]
		for _, c := range []struct {
			ts      int64
			off     int64
			found   bool
			tsFound int64
		}{
			{-5, 0, true, 1_700_000_000_000},
			{1_700_000_000_000 + 505*10, 505, true, 1_700_000_000_000 + 505*10},
			{1_700_000_000_000 + 502*10 + 1, 504, true, 1_700_000_000_000 + 504*10}, // 503 has ts -1
			{1_700_000_000_000 + 999*10 + 1, 0, false, 0},
		} {
			off, ts, found, err := s.OffsetForTime(ctx, f, c.ts)
			if err != nil || found != c.found || found && (off != c.off || ts != c.tsFound) {
				t.Fatalf("OffsetForTime(%d) = %d, %d, %v, %v; want %d, %d, %v", c.ts, off, ts, found, err, c.off, c.tsFound, c.found)
			}
		}
	})
}

func TestArchiveIdempotent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := openStore(t, b.cfg)
		ctx := ctxT(t)
		recs := makeRecords(0, 100)
		r := ref("idem", 0, 0, 0, 100)

		// A crash between upload and commit: the object is there, the
		// table does not list it.
		s.afterUpload = func() error { return errors.New("simulated crash") }
		if _, err := s.Archive(ctx, r, chunked(recs, 10)); err == nil {
			t.Fatal("archive survived the crash")
		}
		s.afterUpload = nil
		if files, err := s.Files(ctx, "idem"); err != nil || len(files) != 0 {
			t.Fatalf("files after crash: %+v, %v", files, err)
		}

		// korvet restarts and archives the segment again.
		s2 := openStore(t, b.cfg)
		df, err := s2.Archive(ctx, r, chunked(recs, 10))
		if err != nil {
			t.Fatal(err)
		}
		// And once more (the bookkeeping after the commit was lost).
		called := false
		df2, err := s2.Archive(ctx, r, func() ([]record.Record, []record.Txn, error) { called = true; return nil, nil, io.EOF })
		if err != nil || df2 != df || called {
			t.Fatalf("second archive: %+v, %v (next called: %v)", df2, err, called)
		}
		s3 := openStore(t, b.cfg)
		if df3, err := s3.Archive(ctx, r, chunked(recs, 10)); err != nil || df3 != df {
			t.Fatalf("archive on a fresh store: %+v, %v", df3, err)
		}
		files, err := s3.Files(ctx, "idem")
		if err != nil || len(files) != 1 {
			t.Fatalf("files: %+v, %v", files, err)
		}
		// The Iceberg scan sees each record once.
		if n := scanCount(t, s3, "idem"); n != 100 {
			t.Fatalf("scan found %d rows, want 100", n)
		}
	})
}

func TestS3Outage(t *testing.T) {
	b := s3Backend(t)
	s := openStore(t, b.cfg)
	ctx := ctxT(t)
	if _, err := s.Archive(ctx, ref("outage", 0, 0, 0, 10), chunked(makeRecords(0, 10), 5)); err != nil {
		t.Fatal(err)
	}

	// The store goes away in the middle of an archive.
	recs := makeRecords(10, 2000)
	r := ref("outage", 0, 1, 10, 2000)
	calls := 0
	next := chunked(recs, 100)
	_, err := s.Archive(ctx, r, func() ([]record.Record, []record.Txn, error) {
		calls++
		if calls == 3 {
			b.s3.Kill()
		}
		return next()
	})
	if err == nil {
		t.Fatal("archive succeeded with the store down")
	}
	t.Logf("archive during outage: %v", err)
	// Still down: fails again, quickly.
	start := time.Now()
	if _, err := s.Archive(ctx, r, chunked(recs, 100)); err == nil {
		t.Fatal("archive succeeded with the store down")
	}
	t.Logf("failed in %v", time.Since(start))

	b.s3.Restart(t)
	files, err := openStore(t, b.cfg).Files(ctx, "outage")
	if err != nil || len(files) != 1 {
		t.Fatalf("after the outage the table holds %+v, %v; want only the first segment", files, err)
	}
	df, err := s.Archive(ctx, r, chunked(recs, 100))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Read(ctx, df, 10, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs)
	if files, _ := s.Files(ctx, "outage"); len(files) != 2 {
		t.Fatalf("files %+v", files)
	}

	// The store goes away after the upload, before the commit.
	r3 := ref("outage", 0, 2, 2010, 50)
	s.afterUpload = func() error { b.s3.Kill(); return nil }
	if _, err := s.Archive(ctx, r3, chunked(makeRecords(2010, 50), 50)); err == nil {
		t.Fatal("commit succeeded with the store down")
	}
	s.afterUpload = nil
	b.s3.Restart(t)
	if _, err := s.Archive(ctx, r3, chunked(makeRecords(2010, 50), 50)); err != nil {
		t.Fatal(err)
	}
	if files, err := openStore(t, b.cfg).Files(ctx, "outage"); err != nil || len(files) != 3 {
		t.Fatalf("files %+v, %v", files, err)
	}
	// korvet starting while the store is down: Open works, archiving
	// waits for the store (and creates the bucket then).
	b.s3.Kill()
	cfg := b.cfg
	cfg.Warehouse = "s3://created-later/wh"
	late := openStore(t, cfg)
	if _, err := late.Archive(ctx, ref("late", 0, 0, 0, 5), chunked(makeRecords(0, 5), 5)); err == nil {
		t.Fatal("archive succeeded with the store down")
	}
	b.s3.Restart(t)
	if _, err := late.Archive(ctx, ref("late", 0, 0, 0, 5), chunked(makeRecords(0, 5), 5)); err != nil {
		t.Fatal(err)
	}

	// A cold read fails while the store is down and works after.
	s5 := openStore(t, b.cfg)
	b.s3.Kill()
	if _, _, err := s5.Read(ctx, df, 500, 1<<20); err == nil {
		t.Fatal("cold read succeeded with the store down")
	}
	b.s3.Restart(t)
	if got, _, err := s5.Read(ctx, df, 500, 1<<20); err != nil || got[0].Offset != 500 {
		t.Fatalf("read after the outage: %v", err)
	}
}

func TestReadFetchesOnlyNeededRowGroups(t *testing.T) {
	b := s3Backend(t)
	cfg := b.cfg
	cfg.RowGroupBytes = 32 << 10
	cfg.CacheDir = t.TempDir()
	s := openStore(t, cfg)
	ctx := ctxT(t)
	recs := makeRecords(0, 20000)
	df, err := s.Archive(ctx, ref("rg", 0, 0, 0, len(recs)), chunked(recs, 500))
	if err != nil {
		t.Fatal(err)
	}

	// A restarted korvet: empty memory, footer cache on disk empty too.
	cfg.CacheDir = t.TempDir()
	s2 := openStore(t, cfg)
	pf, err := s2.openFile(ctx, df.Path, df.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	groups := len(pf.Metadata().RowGroups)
	if groups < 20 {
		t.Fatalf("only %d row groups", groups)
	}
	s2.footers.forget(df.Path)

	before := s2.Stats()
	got, _, err := s2.Read(ctx, df, 12345, 2000)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got[:1], recs[12345:12346])
	d := diff(s2.Stats(), before)
	// One GET for the footer, one for the row group.
	if d.Gets != 2 || d.GetBytes > df.Bytes/int64(groups)*3+tailGuess {
		t.Fatalf("cold read: %d GETs, %d bytes of a %d-byte file in %d row groups", d.Gets, d.GetBytes, df.Bytes, groups)
	}
	t.Logf("cold read from the middle: %d GETs, %d of %d bytes (%d row groups)", d.Gets, d.GetBytes, df.Bytes, groups)

	// The footer is cached now: one GET per row group read.
	before = s2.Stats()
	if _, _, err := s2.Read(ctx, df, 18000, 2000); err != nil {
		t.Fatal(err)
	}
	if d := diff(s2.Stats(), before); d.Gets != 1 {
		t.Fatalf("warm read: %d GETs", d.Gets)
	}
	// A consumer reading on within that row group needs no request.
	before = s2.Stats()
	if got, _, err := s2.Read(ctx, df, 18010, 2000); err != nil || got[0].Offset != 18010 {
		t.Fatalf("read on: %v", err)
	}
	if d := diff(s2.Stats(), before); d.Gets != 0 {
		t.Fatalf("read within a decoded row group: %d GETs", d.Gets)
	}
	// And survives a restart on disk.
	s3 := openStore(t, cfg)
	before = s3.Stats()
	if _, _, err := s3.Read(ctx, df, 100, 2000); err != nil {
		t.Fatal(err)
	}
	if d := diff(s3.Stats(), before); d.Gets != 1 {
		t.Fatalf("read after restart with a disk cache: %d GETs", d.Gets)
	}
	// Offset for time reads two columns of one row group.
	before = s3.Stats()
	off, _, found, err := s3.OffsetForTime(ctx, df, 1_700_000_000_000+15000*10)
	if err != nil || !found || off != 15001 { // 15000 has timestamp -1
		t.Fatalf("OffsetForTime: %d %v %v", off, found, err)
	}
	if d := diff(s3.Stats(), before); d.Gets != 1 || d.GetBytes > df.Bytes/int64(groups) {
		t.Fatalf("offset for time: %d GETs, %d bytes", d.Gets, d.GetBytes)
	}
}

func diff(a, b Stats) Stats {
	return Stats{Gets: a.Gets - b.Gets, GetBytes: a.GetBytes - b.GetBytes, Puts: a.Puts - b.Puts, PutBytes: a.PutBytes - b.PutBytes}
}

func TestRemove(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := openStore(t, b.cfg)
		ctx := ctxT(t)
		var dfs []DataFile
		for seg := int64(0); seg < 4; seg++ {
			df, err := s.Archive(ctx, ref("ret", 0, seg, seg*50, 50), chunked(makeRecords(seg*50, 50), 50))
			if err != nil {
				t.Fatal(err)
			}
			dfs = append(dfs, df)
		}
		if err := s.Remove(ctx, "ret", dfs[:2]); err != nil {
			t.Fatal(err)
		}
		files, err := s.Files(ctx, "ret")
		if err != nil || len(files) != 2 || files[0].Segment != 2 {
			t.Fatalf("files after remove: %+v, %v", files, err)
		}
		for _, df := range dfs[:2] {
			if _, err := s.obj.size(ctx, df.Path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s still there: %v", df.Path, err)
			}
			if _, _, err := s.Read(ctx, df, 0, 100); err == nil {
				t.Fatalf("read of a removed file succeeded")
			}
		}
		// Retried: nothing left to do, no error.
		if err := s.Remove(ctx, "ret", dfs[:2]); err != nil {
			t.Fatal(err)
		}
		if n := scanCount(t, s, "ret"); n != 100 {
			t.Fatalf("scan after remove: %d rows", n)
		}
		// Old snapshots are gone, so no manifest references the files.
		tbl, err := tableIO(s).LoadTable(ctx, s.ident("ret"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(tbl.Metadata().Snapshots()); n != 1 {
			t.Fatalf("%d snapshots after retention", n)
		}
		// A fresh store agrees.
		s2 := openStore(t, b.cfg)
		if files, err := s2.Files(ctx, "ret"); err != nil || len(files) != 2 {
			t.Fatalf("files: %+v, %v", files, err)
		}
	})
}

func TestDropAndTopicMismatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := openStore(t, b.cfg)
		ctx := ctxT(t)
		if _, err := s.Archive(ctx, ref("gone", 0, 0, 0, 5), chunked(makeRecords(0, 5), 5)); err != nil {
			t.Fatal(err)
		}
		r := ref("gone", 0, 0, 0, 5)
		r.TopicID[0] ^= 1 // the topic, deleted and created again
		if _, err := s.Archive(ctx, r, chunked(makeRecords(0, 5), 5)); !errors.Is(err, ErrTopicMismatch) {
			t.Fatalf("archive for another topic id: %v", err)
		}
		if err := s.Drop(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if files, err := s.Files(ctx, "gone"); err != nil || len(files) != 0 {
			t.Fatalf("files after drop: %+v, %v", files, err)
		}
		left, err := s.obj.list(ctx, s.cat.tableLocation(s.ident("gone")))
		if err != nil || len(left) != 0 {
			t.Fatalf("objects left after drop: %v, %v", left, err)
		}
		if _, err := s.Archive(ctx, r, chunked(makeRecords(0, 5), 5)); err != nil {
			t.Fatal(err)
		}
		if err := s.Drop(ctx, "never-there"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestArchiveRejects(t *testing.T) {
	s := openStore(t, localBackend(t).cfg)
	ctx := ctxT(t)
	if _, err := s.Archive(ctx, ref("e", 0, 0, 0, 0), chunked(nil, 1)); !errors.Is(err, ErrNoRecords) {
		t.Fatalf("empty segment: %v", err)
	}
	recs := makeRecords(0, 3)
	recs[1], recs[2] = recs[2], recs[1]
	if _, err := s.Archive(ctx, ref("e", 0, 0, 0, 3), chunked(recs, 3)); !errors.Is(err, errOffsetOrder) {
		t.Fatalf("out of order: %v", err)
	}
	if _, err := s.Archive(ctx, ref("e", 0, 0, 5, 3), chunked(makeRecords(0, 3), 3)); err == nil {
		t.Fatal("records outside the segment's range accepted")
	}
	if _, err := s.Archive(ctx, ref("../x", 0, 0, 0, 3), chunked(makeRecords(0, 3), 3)); err == nil {
		t.Fatal("bad topic name accepted")
	}
	// Nothing of it reached the table.
	if files, err := s.Files(ctx, "e"); err != nil || len(files) != 0 {
		t.Fatalf("files %+v, %v", files, err)
	}
}

func TestManySegmentsKeepMetadataSmall(t *testing.T) {
	s := openStore(t, localBackend(t).cfg)
	ctx := ctxT(t)
	const n = 60
	for seg := int64(0); seg < n; seg++ {
		if _, err := s.Archive(ctx, ref("many", 0, seg, seg*3, 3), chunked(makeRecords(seg*3, 3), 3)); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := tableIO(s).LoadTable(ctx, s.ident("many"))
	if err != nil {
		t.Fatal(err)
	}
	if k := len(tbl.Metadata().Snapshots()); k > 2*s.keepSnaps {
		t.Fatalf("%d snapshots kept", k)
	}
	metas, _ := s.obj.list(ctx, joinURI(s.cat.tableLocation(s.ident("many")), "metadata"))
	var jsons int
	for _, m := range metas {
		if strings.HasSuffix(m, ".metadata.json") {
			jsons++
		}
	}
	if jsons > 25 {
		t.Fatalf("%d metadata files kept", jsons)
	}
	if k := scanCount(t, s, "many"); k != n*3 {
		t.Fatalf("scan: %d rows", k)
	}
	files, _ := s.Files(ctx, "many")
	if len(files) != n {
		t.Fatalf("%d files", len(files))
	}
}

func TestPutIfAbsent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := openStore(t, b.cfg)
		ctx := ctxT(t)
		uri := joinURI(s.root, "x", "v1.metadata.json")
		if err := s.obj.putIfAbsent(ctx, uri, []byte("one")); err != nil {
			t.Fatal(err)
		}
		if err := s.obj.putIfAbsent(ctx, uri, []byte("two")); !errors.Is(err, os.ErrExist) {
			t.Fatalf("second put: %v", err)
		}
		if got, err := s.obj.get(ctx, uri); err != nil || string(got) != "one" {
			t.Fatalf("got %q, %v", got, err)
		}
		if _, err := s.obj.get(ctx, uri+"-missing"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("missing object: %v", err)
		}
	})
}

// TestConcurrentWriters: two korvets archiving into one table (which korvet
// never does on purpose) lose no commit: a writer that loses the race for
// a metadata version retries on the new one.
func TestConcurrentWriters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		a, c := openStore(t, b.cfg), openStore(t, b.cfg)
		ctx := ctxT(t)
		if _, err := a.Archive(ctx, ref("race", 0, 0, 0, 5), chunked(makeRecords(0, 5), 5)); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for i, s := range []*Store{a, c} {
			go func() {
				for seg := int64(1); seg <= 6; seg++ {
					p := int32(i + 1)
					if _, err := s.Archive(ctx, ref("race", p, seg, seg*5, 5), chunked(makeRecords(seg*5, 5), 5)); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		fresh := openStore(t, b.cfg)
		files, err := fresh.Files(ctx, "race")
		if err != nil || len(files) != 13 {
			t.Fatalf("%d files, %v", len(files), err)
		}
		if n := scanCount(t, fresh, "race"); n != 65 {
			t.Fatalf("scan: %d rows", n)
		}
	})
}

// randomRecords are n records with incompressible 200-byte values, so a
// segment of them is larger than one PUT.
func randomRecords(base int64, n int) []record.Record {
	rng := rand.New(rand.NewPCG(uint64(base), 7))
	pool := make([]byte, 200*n)
	for i := 0; i+8 <= len(pool); i += 8 {
		binary.LittleEndian.PutUint64(pool[i:], rng.Uint64())
	}
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: base + int64(i), Timestamp: int64(i), Key: pool[200*i : 200*i+8], Value: pool[200*i : 200*i+200]}
	}
	return recs
}

// TestLargeSegmentMultipart streams a segment larger than one PUT as a
// multipart upload, with the store failing midway once.
func TestLargeSegmentMultipart(t *testing.T) {
	b := s3Backend(t)
	s := openStore(t, b.cfg)
	ctx := ctxT(t)
	recs := randomRecords(0, 60000) // ~12 MB
	r := ref("big", 0, 0, 0, len(recs))
	next := chunked(recs, 1000)
	calls := 0
	_, err := s.Archive(ctx, r, func() ([]record.Record, []record.Txn, error) {
		if calls++; calls == 50 { // past the first 8 MiB: streaming
			b.s3.Kill()
		}
		return next()
	})
	if err == nil {
		t.Fatal("archive succeeded with the store down")
	}
	b.s3.Restart(t)
	df, err := s.Archive(ctx, r, chunked(recs, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if df.Bytes < singlePutMax {
		t.Fatalf("file of %d bytes did not need a multipart upload", df.Bytes)
	}
	got, _, err := openStore(t, b.cfg).Read(ctx, df, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs)
}
