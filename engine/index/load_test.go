package index

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// A Loader leaves exactly the bytes Batches would: the same random updates
// (repeated keys, deletes, tombstone pointers, on top of existing data) go
// through Batches into one index and through a Loader, in several runs,
// into another; both stores then hold the same keys and values.
func TestLoaderMatchesBatch(t *testing.T) {
	tw := newTwin(t, TopicID{7}, 3)
	other := TopicID{9}
	// Existing data, which the load must override or delete.
	for _, ix := range []*Index{tw.viaBatch, tw.viaLoad} {
		b := ix.NewBatch()
		for i := range 50 {
			if err := b.Set(tw.topic, fmt.Appendf(nil, "k%d", i), Pointer{Partition: 1, Offset: int64(i)}); err != nil {
				t.Fatal(err)
			}
			if err := b.Set(other, fmt.Appendf(nil, "k%d", i), Pointer{Partition: 0, Offset: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.SetCheckpoint(tw.topic, 3, 50); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	rng := rand.New(rand.NewPCG(5, 6))
	tw.off = 50
	for run := range 4 {
		for range 500 {
			k := fmt.Appendf(nil, "k%d", rng.IntN(120))
			if run == 3 && rng.IntN(3) == 0 {
				k = []byte{} // the empty key is a key
			}
			if rng.IntN(5) == 0 {
				tw.del(k)
			} else {
				tw.set(k, Pointer{Partition: 3, Offset: tw.off, Tombstone: rng.IntN(6) == 0})
			}
		}
		tw.flush()
		if tw.l.Len() != 0 {
			t.Fatalf("%d updates left after Flush", tw.l.Len())
		}
		tw.same(fmt.Sprintf("run %d", run))
	}
	if next, ok, err := tw.viaLoad.Checkpoint(tw.topic, 3); err != nil || !ok || next != tw.off {
		t.Fatalf("checkpoint %d %v %v, want %d", next, ok, err, tw.off)
	}
}

// twin applies the same updates to a Batch of one index and a Loader of
// another, so that a test can compare what each leaves.
type twin struct {
	t                 *testing.T
	viaBatch, viaLoad *Index
	topic             TopicID
	part              int32
	b                 *Batch
	l                 *Loader
	off               int64 // the offset of the next update
	flushes           int
}

func newTwin(t *testing.T, topic TopicID, part int32) *twin {
	open := func() *Index {
		ix, err := Open(t.TempDir(), Options{Bulk: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	tw := &twin{t: t, viaBatch: open(), viaLoad: open(), topic: topic, part: part}
	tw.l = tw.viaLoad.NewLoader(topic, part)
	return tw
}

func (tw *twin) batch() *Batch {
	if tw.b == nil {
		tw.b = tw.viaBatch.NewBatch()
	}
	return tw.b
}

func (tw *twin) set(k []byte, p Pointer) {
	tw.t.Helper()
	if err := tw.batch().Set(tw.topic, k, p); err != nil {
		tw.t.Fatal(err)
	}
	tw.l.Set(k, p)
	tw.off++
}

func (tw *twin) del(k []byte) {
	tw.t.Helper()
	if err := tw.batch().Delete(tw.topic, k); err != nil {
		tw.t.Fatal(err)
	}
	tw.l.Delete(k)
	tw.off++
}

// flush commits the Batch with the checkpoint and flushes the Loader.
func (tw *twin) flush() {
	tw.t.Helper()
	b := tw.batch()
	if err := b.SetCheckpoint(tw.topic, tw.part, tw.off); err != nil {
		tw.t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		tw.t.Fatal(err)
	}
	b.Close()
	tw.b = nil
	if err := tw.l.Flush(context.Background(), tw.off); err != nil {
		tw.t.Fatal(err)
	}
	tw.flushes++
}

// same fails the test unless both indexes hold the same keys and values.
func (tw *twin) same(when string) {
	tw.t.Helper()
	want, got := dump(tw.t, tw.viaBatch), dump(tw.t, tw.viaLoad)
	if len(want) != len(got) {
		tw.t.Fatalf("%s: %d entries via Loader, %d via Batch", when, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(want[i][0], got[i][0]) || !bytes.Equal(want[i][1], got[i][1]) {
			tw.t.Fatalf("%s, entry %d: %q=%x via Loader, %q=%x via Batch", when, i, got[i][0], got[i][1], want[i][0], want[i][1])
		}
	}
}

// Updates in key order are written into the table as they come, and
// leave what Batches leave: runs in order long enough to be streamed,
// with a key updated several times in a row (set, deleted, set again),
// broken by keys that do not Fit (the Loader is flushed first, as a
// rebuild does) and by runs in random order, on top of existing data.
func TestLoaderStreamMatchesBatch(t *testing.T) {
	tw := newTwin(t, TopicID{7}, 2)
	for _, ix := range []*Index{tw.viaBatch, tw.viaLoad} {
		b := ix.NewBatch()
		for i := range 100 {
			if err := b.Set(tw.topic, fmt.Appendf(nil, "k%06d", i*97), Pointer{Partition: 1, Offset: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	rng := rand.New(rand.NewPCG(7, 8))
	tw.off = 100
	streamed := 0
	update := func(k []byte) {
		t.Helper()
		if !tw.l.Fits(k) {
			tw.flush()
		}
		if tw.l.sw != nil {
			streamed++
		}
		if rng.IntN(7) == 0 {
			tw.del(k)
		} else {
			tw.set(k, Pointer{Partition: 2, Offset: tw.off, Tombstone: rng.IntN(9) == 0})
		}
	}
	for run := range 6 {
		if run%3 == 2 {
			for range 3000 { // random order: buffered
				update(fmt.Appendf(nil, "k%06d", rng.IntN(30000)))
			}
			tw.flush()
			continue
		}
		// In order, from a random start: streamed past streamAfter; a key
		// before the last one ends the table.
		k := rng.IntN(10000)
		for range 3 * streamAfter {
			key := fmt.Appendf(nil, "k%06d", k)
			for range 1 + rng.IntN(3) {
				update(key)
			}
			k += 1 + rng.IntN(3)
		}
	}
	tw.flush()
	if streamed < 2*streamAfter || tw.flushes < 6 {
		t.Fatalf("%d updates streamed, %d flushes: the test does not stream", streamed, tw.flushes)
	}
	if m, _ := filepath.Glob(filepath.Join(tw.viaLoad.dir, "load-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
	tw.same("after the runs")
}

// Updates in random order are sorted as Batches order them: keys that
// share a long prefix, and then 8 more bytes, keys that differ only in
// their length or trailing zero bytes, the empty key; many updates of
// each key, in more than a block of writeOrder; through several Flushes.
func TestLoaderSortMatchesBatch(t *testing.T) {
	tw := newTwin(t, TopicID{3}, 1)
	var keys [][]byte
	for i := range 300 {
		keys = append(keys, fmt.Appendf(nil, "tenant-0001/user-%06d", i*37%1000)) // prefix, then 8 bytes alike
		keys = append(keys, fmt.Appendf(nil, "tenant-0001/user-%d", i))
	}
	keys = append(keys, []byte("tenant-0001"), []byte("tenant-0001\x00"), []byte("tenant-0001\x00\x00"),
		[]byte("tenant-0001/user-00000\x00"), []byte("tenant-0001/user-00000"), []byte("t"), []byte{})
	rng := rand.New(rand.NewPCG(9, 10))
	for run := range 3 {
		for range 5000 {
			k := keys[rng.IntN(len(keys))]
			if run == 0 {
				k = k[:min(len(k), 11)] // all share the whole key: the empty depth, short keys
			}
			if rng.IntN(6) == 0 {
				tw.del(k)
			} else {
				tw.set(k, Pointer{Partition: 1, Offset: tw.off})
			}
		}
		if tw.l.sw != nil {
			t.Fatal("updates in random order are written as they come")
		}
		tw.flush()
		tw.same(fmt.Sprintf("run %d", run))
	}
}

// A table being written goes with Reset (a rebuild that fails), and a key
// added out of its order fails the Flush instead of breaking the table.
func TestLoaderStreamReset(t *testing.T) {
	ix, err := Open(t.TempDir(), Options{Bulk: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	l := ix.NewLoader(TopicID{1}, 0)
	fill := func() {
		for i := range 2 * streamAfter {
			l.Set(fmt.Appendf(nil, "key-%06d", i), Pointer{Offset: int64(i)})
		}
		if l.sw == nil {
			t.Fatal("keys in order are not written as they come")
		}
	}
	fill()
	if l.Fits([]byte("key-000001")) || !l.Fits([]byte("key-999999")) {
		t.Fatal("Fits does not follow the table's order")
	}
	l.Reset()
	if m, _ := filepath.Glob(filepath.Join(ix.dir, "load-*")); len(m) != 0 {
		t.Fatalf("left behind by Reset: %v", m)
	}
	fill()
	l.Set([]byte("key-000001"), Pointer{Offset: 1})
	if err := l.Flush(context.Background(), 1); err == nil {
		t.Fatal("Flush of a key out of order succeeded")
	}
	if m, _ := filepath.Glob(filepath.Join(ix.dir, "load-*")); len(m) != 0 {
		t.Fatalf("left behind by a failed Flush: %v", m)
	}
	if _, ok, err := ix.Checkpoint(TopicID{1}, 0); err != nil || ok {
		t.Fatalf("a checkpoint after a failed Flush: %v %v", ok, err)
	}
	if l.Len() != 0 {
		t.Fatalf("%d updates kept after a failed Flush", l.Len())
	}
}

// dump returns every key and value of the store.
func dump(t *testing.T, ix *Index) [][2][]byte {
	t.Helper()
	it, err := ix.db.NewIter(&pebble.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out [][2][]byte
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A load survives a reopening, and leaves no table of its own behind.
func TestLoaderReopen(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, Options{Bulk: true})
	if err != nil {
		t.Fatal(err)
	}
	l := ix.NewLoader(TopicID{1}, 0)
	for i := range 1000 {
		l.Set(fmt.Appendf(nil, "key-%04d", 999-i), Pointer{Offset: int64(i)})
	}
	if err := l.Flush(context.Background(), 1000); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "load-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
	// One a crash left behind goes at the next open.
	if err := os.WriteFile(filepath.Join(dir, "load-1-1.sst"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "load-*")); len(m) != 0 {
		t.Fatalf("left behind after open: %v", m)
	}
	if p, ok, err := ix.Get(TopicID{1}, []byte("key-0000")); err != nil || !ok || p.Offset != 999 {
		t.Fatalf("%+v %v %v", p, ok, err)
	}
	if next, ok, err := ix.Checkpoint(TopicID{1}, 0); err != nil || !ok || next != 1000 {
		t.Fatalf("checkpoint %d %v %v", next, ok, err)
	}
}

// The Loader's hot loop allocates nothing per update: collecting updates
// in random order into buffers a Grow sized, and writing updates in key
// order into the table as they come (the table writer allocates now and
// then for its blocks).
func TestLoaderAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	ix, err := Open(t.TempDir(), Options{Bulk: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	const runs, per = 20, 1000
	keys := make([][]byte, 2*streamAfter+(runs+1)*per)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%09d", i)
	}
	ordered := ix.NewLoader(TopicID{1}, 0)
	i := 0
	for ; i < 2*streamAfter; i++ {
		ordered.Set(keys[i], Pointer{Offset: int64(i)})
	}
	if ordered.sw == nil {
		t.Fatal("keys in order are not written as they come")
	}
	got := testing.AllocsPerRun(runs, func() {
		for range per {
			ordered.Set(keys[i], Pointer{Offset: int64(i)})
			i++
		}
	})
	if got > 4 {
		t.Errorf("%.1f allocations per %d updates written as they come, want at most 4", got, per)
	}
	random := ix.NewLoader(TopicID{2}, 0)
	random.Grow(len(keys), 13*len(keys))
	j := 0
	got = testing.AllocsPerRun(runs, func() {
		for range per {
			random.Set(keys[j*7919%len(keys)], Pointer{Offset: int64(j)})
			j++
		}
	})
	if got > 0 || random.sw != nil {
		t.Errorf("%.1f allocations per %d updates collected (table written: %v), want 0", got, per, random.sw != nil)
	}
	ordered.Reset()
	random.Reset()
}

// BenchmarkLoaderFlush measures loading one partition's table of 500k
// keys (half of a 1M-key rebuild over 2 partitions) into a fresh index:
// collecting the updates (Set) and Flush (sorting, writing, ingesting),
// for keys that come in random order and in key order (written as they
// come).
func BenchmarkLoaderFlush(b *testing.B) {
	const n = 500_000
	for _, inOrder := range []bool{false, true} {
		b.Run(map[bool]string{false: "random", true: "ordered"}[inOrder], func(b *testing.B) {
			keys := make([][]byte, n)
			for i := range keys {
				k := (i * 7919) % n // produced out of order
				if inOrder {
					k = i
				}
				keys[i] = fmt.Appendf(nil, "k-%07d", k)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				ix, err := Open(b.TempDir(), Options{Bulk: true})
				if err != nil {
					b.Fatal(err)
				}
				l := ix.NewLoader(TopicID{1}, 0)
				l.Grow(n, 16*n) // as a rebuild does
				b.StartTimer()
				for i, k := range keys {
					l.Set(k, Pointer{Offset: int64(i)})
				}
				if err := l.Flush(context.Background(), n); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				ix.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}
