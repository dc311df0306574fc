package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// Allocation guards for the rebuild's hot paths: a chunk of 1000 records
// costs a fixed few allocations, never some per record. AllocsPerRun
// counts, it does not time, so these are deterministic.

func TestParseKeyEntriesAllocs(t *testing.T) {
	var plain, txn []string
	for i := range 1000 {
		id, key := fmt.Sprintf("%d-1", i), fmt.Sprintf("key-%012d", i)
		plain = append(plain, xentry(id, "__ts", "1", "__key", key, "__value", strings.Repeat("v", 256), "__header.h", "v"))
		if i%2 == 0 {
			txn = append(txn, xentry(id, "__ts", "1", "__txn", "7.2", "__key", key, "__value", "v"))
		} else {
			txn = append(txn, xentry(id, "__ts", "1", "__key", key)) // a tombstone outside the transaction
		}
	}
	for name, raw := range map[string][]byte{"plain": []byte(arr(plain...)), "txn": []byte(arr(txn...))} {
		recs, txns, err := parseKeyEntriesTxn(raw, nil, nil)
		if err != nil || len(recs) != 1000 {
			t.Fatalf("%s: %d records: %v", name, len(recs), err)
		}
		got := testing.AllocsPerRun(20, func() {
			recs, txns, err = parseKeyEntriesTxn(raw, recs[:0], txns[:0])
			if err != nil || len(recs) != 1000 {
				t.Fatalf("%s: %d records: %v", name, len(recs), err)
			}
		})
		// Reused buffers: nothing to allocate at all.
		if got > 0 {
			t.Errorf("%s: %.1f allocations per reply of 1000 entries, want 0", name, got)
		}
		// Nor on the marks of the reply's framing, as readKeys reads.
		marks, err := resp.MarkReply(raw)
		if err != nil || marks == nil {
			t.Fatalf("%s: marks %d: %v", name, len(marks), err)
		}
		got = testing.AllocsPerRun(20, func() {
			recs, txns, err = parseKeyMarks(raw, marks, recs[:0], txns[:0])
			if err != nil || len(recs) != 1000 {
				t.Fatalf("%s: %d records on marks: %v", name, len(recs), err)
			}
		})
		if got > 0 {
			t.Errorf("%s: %.1f allocations per reply of 1000 entries on marks, want 0", name, got)
		}
	}
}

func TestRebuildApplyAllocs(t *testing.T) {
	kv, kp, c, ld := loadSetup(t, keyScanCount)
	ctx := context.Background()
	got := testbed.Allocs(20, func() {
		ld.next = 0
		ld.l.Reset()
		if err := kv.loadChunk(ctx, kp, c, -1, kv.gen, ld, nil); err != nil {
			t.Fatal(err)
		}
	})
	if ld.l.Len() != keyScanCount {
		t.Fatalf("%d records loaded, want %d", ld.l.Len(), keyScanCount)
	}
	// The transactions' view of the chunk (stableView) is the one allowed.
	if got > 2 {
		t.Errorf("%.1f allocations per chunk of %d records, want at most 2", got, keyScanCount)
	}
}

// kvGetAllocs bounds the allocations of one KV Get.
const kvGetAllocs = 16

// The hot KV read allocates the value's copy and a handful of fixed
// things (the stale budget's context), never anything that grows with the
// record or the index.
func TestKVGetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	e, keys := kvGetSetup(t, 1000)
	kv := e.KV()
	ctx := context.Background()
	i := 0
	got := testbed.Allocs(200, func() {
		rec, err := kv.Get(ctx, "bench", keys[i%len(keys)])
		if err != nil || len(rec.Value) != 256 {
			t.Fatalf("get: %d bytes, %v", len(rec.Value), err)
		}
		i++
	})
	if got > kvGetAllocs {
		t.Errorf("%.1f allocations per KV Get, want at most %d", got, kvGetAllocs)
	}
}
