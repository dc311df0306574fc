package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// The index against a map model: random sets, tombstone pointers,
// deletes, checkpoints, topic drops and reopenings; after each step every
// key, checkpoint, count and scan agrees with the model.
func TestIndexModel(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	topics := []TopicID{{1}, {1, 1}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	type tk struct {
		topic int
		key   string
	}
	keys := map[tk]Pointer{}
	ckpts := map[[2]int]int64{}
	rng := rand.New(rand.NewPCG(3, 4))
	randKey := func() string {
		switch rng.IntN(4) {
		case 0:
			return ""
		case 1:
			return string([]byte{0, byte(rng.IntN(3)), 0xff})
		default:
			return fmt.Sprintf("k%d", rng.IntN(200))
		}
	}
	for step := range 300 {
		b := ix.NewBatch()
		pend := map[tk]*Pointer{}
		pendCk := map[[2]int]int64{}
		for range rng.IntN(40) {
			ti := rng.IntN(len(topics))
			k := tk{ti, randKey()}
			switch rng.IntN(5) {
			case 0:
				if err := b.Delete(topics[ti], []byte(k.key)); err != nil {
					t.Fatal(err)
				}
				pend[k] = nil
			default:
				p := Pointer{Partition: int32(rng.IntN(1 << 31)), Offset: rng.Int64(), Tombstone: rng.IntN(4) == 0}
				if err := b.Set(topics[ti], []byte(k.key), p); err != nil {
					t.Fatal(err)
				}
				pend[k] = &p
			}
			if rng.IntN(3) == 0 {
				c := [2]int{ti, rng.IntN(3)}
				pendCk[c] = rng.Int64()
				if err := b.SetCheckpoint(topics[ti], int32(c[1]), pendCk[c]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rng.IntN(10) == 0 {
			b.Close() // dropped: nothing applies
		} else {
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			b.Close()
			for k, p := range pend {
				if p == nil {
					delete(keys, k)
				} else {
					keys[k] = *p
				}
			}
			for c, v := range pendCk {
				ckpts[c] = v
			}
		}
		switch rng.IntN(15) {
		case 0:
			ti := rng.IntN(len(topics))
			if err := ix.DropTopic(topics[ti]); err != nil {
				t.Fatal(err)
			}
			for k := range keys {
				if k.topic == ti {
					delete(keys, k)
				}
			}
			for c := range ckpts {
				if c[0] == ti {
					delete(ckpts, c)
				}
			}
		case 1:
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			if ix, err = Open(dir, Options{}); err != nil {
				t.Fatal(err)
			}
		}
		// Every key of the model, and some that are not.
		for k, want := range keys {
			got, ok, err := ix.Get(topics[k.topic], []byte(k.key))
			if err != nil || !ok || got != want {
				t.Fatalf("step %d: %v = %+v %v %v, want %+v", step, k, got, ok, err, want)
			}
		}
		for range 20 {
			k := tk{rng.IntN(len(topics)), randKey()}
			if _, in := keys[k]; !in {
				if _, ok, err := ix.Get(topics[k.topic], []byte(k.key)); ok || err != nil {
					t.Fatalf("step %d: %v present", step, k)
				}
			}
		}
		for ti := range topics {
			for part := range 3 {
				want, in := ckpts[[2]int{ti, part}]
				got, ok, err := ix.Checkpoint(topics[ti], int32(part))
				if err != nil || ok != in || got != want {
					t.Fatalf("step %d: checkpoint %d/%d = %d %v, want %d %v", step, ti, part, got, ok, want, in)
				}
			}
			// Scan and Iter return the topic's keys in order.
			var want []string
			var live, tombs int64
			for k, p := range keys {
				if k.topic == ti {
					want = append(want, k.key)
					if p.Tombstone {
						tombs++
					} else {
						live++
					}
				}
			}
			sort.Strings(want)
			var got []string
			if err := ix.Scan(context.Background(), topics[ti], func(k []byte, p Pointer) bool {
				if p != keys[tk{ti, string(k)}] {
					t.Fatalf("scan: %q %+v", k, p)
				}
				got = append(got, string(k))
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d: scan %q, want %q", step, got, want)
			}
			it, err := ix.NewIter(topics[ti])
			if err != nil {
				t.Fatal(err)
			}
			var iterated [][]byte
			for it.Next() {
				iterated = append(iterated, bytes.Clone(it.Key()))
			}
			if err := it.Close(); err != nil || len(iterated) != len(want) {
				t.Fatalf("iter: %d keys %v", len(iterated), err)
			}
			l, tb, err := ix.Count(context.Background(), topics[ti])
			if err != nil || l != live || tb != tombs {
				t.Fatalf("count %d %d, want %d %d", l, tb, live, tombs)
			}
		}
	}
	ids, err := ix.Topics()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys, %d checkpoints, topics with checkpoints %d", len(keys), len(ckpts), len(ids))
}

// A second Open of a directory in use fails with ErrLocked, as does Lock.
func TestIndexLocked(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil || !isLocked(err) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := Lock(dir); err == nil || !isLocked(err) {
		t.Fatalf("lock: %v", err)
	}
	ix.Close()
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func isLocked(err error) bool { return errors.Is(err, ErrLocked) }
