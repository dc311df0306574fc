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
	ctx := context.Background()
	open := func() *Index {
		ix, err := Open(t.TempDir(), Options{Bulk: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	viaBatch, viaLoad := open(), open()
	topic, other := TopicID{7}, TopicID{9}
	// Existing data, which the load must override or delete.
	for _, ix := range []*Index{viaBatch, viaLoad} {
		b := ix.NewBatch()
		for i := range 50 {
			if err := b.Set(topic, fmt.Appendf(nil, "k%d", i), Pointer{Partition: 1, Offset: int64(i)}); err != nil {
				t.Fatal(err)
			}
			if err := b.Set(other, fmt.Appendf(nil, "k%d", i), Pointer{Partition: 0, Offset: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.SetCheckpoint(topic, 3, 50); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	rng := rand.New(rand.NewPCG(5, 6))
	l := viaLoad.NewLoader(topic, 3)
	off := int64(50)
	for run := range 4 {
		b := viaBatch.NewBatch()
		for range 500 {
			k := fmt.Appendf(nil, "k%d", rng.IntN(120))
			if run == 3 && rng.IntN(3) == 0 {
				k = []byte{} // the empty key is a key
			}
			if rng.IntN(5) == 0 {
				if err := b.Delete(topic, k); err != nil {
					t.Fatal(err)
				}
				l.Delete(k)
			} else {
				p := Pointer{Partition: 3, Offset: off, Tombstone: rng.IntN(6) == 0}
				if err := b.Set(topic, k, p); err != nil {
					t.Fatal(err)
				}
				l.Set(k, p)
			}
			off++
		}
		if err := b.SetCheckpoint(topic, 3, off); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if err := l.Flush(ctx, off); err != nil {
			t.Fatal(err)
		}
		if l.Len() != 0 {
			t.Fatalf("%d updates left after Flush", l.Len())
		}
		want, got := dump(t, viaBatch), dump(t, viaLoad)
		if len(want) != len(got) {
			t.Fatalf("run %d: %d entries via Loader, %d via Batch", run, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(want[i][0], got[i][0]) || !bytes.Equal(want[i][1], got[i][1]) {
				t.Fatalf("run %d entry %d: %x=%x via Loader, %x=%x via Batch", run, i, got[i][0], got[i][1], want[i][0], want[i][1])
			}
		}
	}
	if next, ok, err := viaLoad.Checkpoint(topic, 3); err != nil || !ok || next != off {
		t.Fatalf("checkpoint %d %v %v, want %d", next, ok, err, off)
	}
}

// Updates in key order are written into the table as they come, and
// leave what Batches leave: runs in order long enough to be streamed,
// with a key updated several times in a row (set, deleted, set again),
// broken by keys that do not Fit (the Loader is flushed first, as a
// rebuild does) and by runs in random order, on top of existing data.
func TestLoaderStreamMatchesBatch(t *testing.T) {
	ctx := context.Background()
	open := func() *Index {
		ix, err := Open(t.TempDir(), Options{Bulk: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	viaBatch, viaLoad := open(), open()
	topic := TopicID{7}
	for _, ix := range []*Index{viaBatch, viaLoad} {
		b := ix.NewBatch()
		for i := range 100 {
			if err := b.Set(topic, fmt.Appendf(nil, "k%06d", i*97), Pointer{Partition: 1, Offset: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	rng := rand.New(rand.NewPCG(7, 8))
	l := viaLoad.NewLoader(topic, 2)
	b := viaBatch.NewBatch()
	off := int64(100)
	flushes, streamed := 0, 0
	flush := func() {
		t.Helper()
		if err := b.SetCheckpoint(topic, 2, off); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
		b = viaBatch.NewBatch()
		if err := l.Flush(ctx, off); err != nil {
			t.Fatal(err)
		}
		flushes++
	}
	update := func(k []byte) {
		t.Helper()
		if !l.Fits(k) {
			flush()
		}
		if l.sw != nil {
			streamed++
		}
		if rng.IntN(7) == 0 {
			if err := b.Delete(topic, k); err != nil {
				t.Fatal(err)
			}
			l.Delete(k)
		} else {
			p := Pointer{Partition: 2, Offset: off, Tombstone: rng.IntN(9) == 0}
			if err := b.Set(topic, k, p); err != nil {
				t.Fatal(err)
			}
			l.Set(k, p)
		}
		off++
	}
	for run := range 6 {
		if run%3 == 2 {
			for range 3000 { // random order: buffered
				update(fmt.Appendf(nil, "k%06d", rng.IntN(30000)))
			}
			flush()
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
	flush()
	if streamed < 2*streamAfter || flushes < 6 {
		t.Fatalf("%d updates streamed, %d flushes: the test does not stream", streamed, flushes)
	}
	if m, _ := filepath.Glob(filepath.Join(viaLoad.dir, "load-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
	want, got := dump(t, viaBatch), dump(t, viaLoad)
	if len(want) != len(got) {
		t.Fatalf("%d entries via Loader, %d via Batch", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(want[i][0], got[i][0]) || !bytes.Equal(want[i][1], got[i][1]) {
			t.Fatalf("entry %d: %x=%x via Loader, %x=%x via Batch", i, got[i][0], got[i][1], want[i][0], want[i][1])
		}
	}
}

// Updates in random order are sorted as Batches order them: keys that
// share a long prefix, and then 8 more bytes, keys that differ only in
// their length or trailing zero bytes, the empty key; many updates of
// each key, in more than a block of writeOrder; through several Flushes.
func TestLoaderSortMatchesBatch(t *testing.T) {
	ctx := context.Background()
	open := func() *Index {
		ix, err := Open(t.TempDir(), Options{Bulk: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	viaBatch, viaLoad := open(), open()
	topic := TopicID{3}
	var keys [][]byte
	for i := range 300 {
		keys = append(keys, fmt.Appendf(nil, "tenant-0001/user-%06d", i*37%1000)) // prefix, then 8 bytes alike
		keys = append(keys, fmt.Appendf(nil, "tenant-0001/user-%d", i))
	}
	keys = append(keys, []byte("tenant-0001"), []byte("tenant-0001\x00"), []byte("tenant-0001\x00\x00"),
		[]byte("tenant-0001/user-00000\x00"), []byte("tenant-0001/user-00000"), []byte("t"), []byte{})
	rng := rand.New(rand.NewPCG(9, 10))
	l := viaLoad.NewLoader(topic, 1)
	off := int64(0)
	for run := range 3 {
		b := viaBatch.NewBatch()
		for range 5000 {
			k := keys[rng.IntN(len(keys))]
			if run == 0 {
				k = k[:min(len(k), 11)] // all share the whole key: the empty depth, short keys
			}
			if rng.IntN(6) == 0 {
				if err := b.Delete(topic, k); err != nil {
					t.Fatal(err)
				}
				l.Delete(k)
			} else {
				p := Pointer{Partition: 1, Offset: off}
				if err := b.Set(topic, k, p); err != nil {
					t.Fatal(err)
				}
				l.Set(k, p)
			}
			off++
		}
		if l.sw != nil {
			t.Fatal("updates in random order are written as they come")
		}
		if err := b.SetCheckpoint(topic, 1, off); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if err := l.Flush(ctx, off); err != nil {
			t.Fatal(err)
		}
		want, got := dump(t, viaBatch), dump(t, viaLoad)
		if len(want) != len(got) {
			t.Fatalf("run %d: %d entries via Loader, %d via Batch", run, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(want[i][0], got[i][0]) || !bytes.Equal(want[i][1], got[i][1]) {
				t.Fatalf("run %d entry %d: %q=%x via Loader, %q=%x via Batch", run, i, got[i][0], got[i][1], want[i][0], want[i][1])
			}
		}
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
