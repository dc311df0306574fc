package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
)

// A rebuild that loads tables gives the index that committing batches (as
// the live index does) gives, whether it writes one table per partition
// or many: repeated keys keep their latest record, tombstones delete (or,
// compacted, leave a tombstone pointer), records without a key are
// skipped.
func TestRebuildLoadMatchesBatches(t *testing.T) {
	e, _ := benchTopic(t, 1, 0)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, compacted := range []bool{false, true} {
		cfg := map[string]string{"korvet.index.enable": "true", "retention.ms": "-1"}
		name := "plain"
		if compacted {
			cfg, name = map[string]string{"cleanup.policy": "compact"}, "compacted"
		}
		tp, err := e.CreateTopic(ctx, name, 3, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range tp.Partitions() {
			for range 5 {
				batch := make([]record.Record, 500)
				for j := range batch {
					r := &batch[j]
					// Keys of their own per partition: which partition
					// wins a key in several is the order they load in.
					r.Key = fmt.Appendf(nil, "p%d-k%d", p.id, rng.IntN(300))
					switch rng.IntN(10) {
					case 0: // a tombstone
					case 1:
						r.Key = nil // no key: not indexed
						r.Value = []byte("v")
					default:
						r.Value = []byte("v")
					}
				}
				if _, _, err := p.Append(batch).Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		build := func(o RebuildOptions) *index.Index {
			ix, err := index.Open(t.TempDir(), index.Options{Bulk: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ix.Close() })
			o.Topics = []string{name}
			res, err := e.KV().Rebuild(ctx, ix, o)
			if err != nil || res.Records != 3*5*500 {
				t.Fatalf("%s %+v: %+v %v", name, o, res, err)
			}
			return ix
		}
		want := dumpTopic(t, build(RebuildOptions{batches: true}), tp)
		for _, budget := range []int{0, 2000} { // one table; dozens per partition
			got := dumpTopic(t, build(RebuildOptions{loadBudget: budget}), tp)
			if len(got) != len(want) {
				t.Fatalf("%s, budget %d: %d keys loaded, %d via batches", name, budget, len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i].key, want[i].key) || got[i].p != want[i].p {
					t.Fatalf("%s, budget %d: key %d is %q %+v loaded, %q %+v via batches", name, budget, i, got[i].key, got[i].p, want[i].key, want[i].p)
				}
			}
		}
	}
}

type keyPointer struct {
	key []byte
	p   index.Pointer
}

// dumpTopic returns the topic's pointers and its partitions' checkpoints
// (as pointers of the key "checkpoint").
func dumpTopic(t *testing.T, ix *index.Index, tp *Topic) []keyPointer {
	t.Helper()
	var out []keyPointer
	err := ix.Scan(context.Background(), tp.id, func(k []byte, p index.Pointer) bool {
		out = append(out, keyPointer{bytes.Clone(k), p})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tp.Partitions() {
		next, ok, err := ix.Checkpoint(tp.id, p.id)
		if err != nil || !ok {
			t.Fatalf("checkpoint of %d: %v %v", p.id, ok, err)
		}
		out = append(out, keyPointer{[]byte("checkpoint"), index.Pointer{Partition: p.id, Offset: next}})
	}
	return out
}
