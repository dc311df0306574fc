package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// readArgs are the arguments of a ReadWholeBelow.
type readArgs struct {
	offset          int64
	maxBytes, whole int
	below           int64
}

func (a readArgs) start(ctx context.Context, p *engine.Partition) *engine.ReadAhead {
	return p.StartReadAhead(ctx, a.offset, a.maxBytes, a.whole, a.below)
}

func (a readArgs) take(ctx context.Context, ra *engine.ReadAhead) (*engine.ReadResult, bool) {
	return ra.Take(ctx, a.offset, a.maxBytes, a.whole, a.below)
}

// offsets lists a read's offsets and releases it.
func offsets(res *engine.ReadResult) string {
	var offs []int64
	for _, r := range res.Records {
		offs = append(offs, r.Offset)
	}
	res.Release()
	if len(offs) == 0 {
		return "nothing"
	}
	return fmt.Sprint(offs[0], "..", offs[len(offs)-1], " (", len(offs), ")")
}

// fresh is what ReadWholeBelow returns now.
func fresh(t *testing.T, p *engine.Partition, a readArgs) string {
	t.Helper()
	res, err := p.ReadWholeBelow(context.Background(), a.offset, a.maxBytes, a.whole, a.below)
	if err != nil {
		t.Fatal(err)
	}
	return offsets(res)
}

// A read-ahead answers the read it was started for with what that read
// returns, and a plain read when it did not go past maxBytes; it answers
// no read of another offset, limit or isolation level, whose reader reads
// afresh.
func TestReadAheadAnswersItsRead(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	p := keptPartition(t, e, "ra")
	appendEach(t, p, 100, 100, 100)

	args := readArgs{offset: 110, maxBytes: 20 * recSize, whole: 1 << 20, below: -1}
	want := fresh(t, p, args)
	if want != "110..199 (90)" {
		t.Fatalf("the read reads %s: the test wants a whole-append read", want)
	}
	res, ok := args.take(ctx, args.start(ctx, p))
	if !ok {
		t.Fatal("a read-ahead did not answer its own read")
	}
	if got := offsets(res); got != want {
		t.Fatalf("read-ahead read %s, the read %s", got, want)
	}

	// Within maxBytes (the append ends there), a whole read is also a
	// plain one; past it, it is not.
	within := readArgs{offset: 190, maxBytes: 20 * recSize, whole: 1 << 20, below: -1}
	plain := within
	plain.whole = 0
	if res, ok := plain.take(ctx, within.start(ctx, p)); !ok || offsets(res) != fresh(t, p, plain) {
		t.Error("a whole read-ahead within maxBytes did not answer the plain read")
	}
	plain = args
	plain.whole = 0
	if _, ok := plain.take(ctx, args.start(ctx, p)); ok {
		t.Error("a whole read-ahead that went past maxBytes answered a plain read")
	}

	for _, other := range []readArgs{
		{offset: 111, maxBytes: args.maxBytes, whole: args.whole, below: -1},
		{offset: 110, maxBytes: args.maxBytes + 1, whole: args.whole, below: -1},
		{offset: 110, maxBytes: args.maxBytes, whole: args.whole + 1, below: -1},
		{offset: 110, maxBytes: args.maxBytes, whole: args.whole, below: 300},
	} {
		if _, ok := other.take(ctx, args.start(ctx, p)); ok {
			t.Errorf("a read-ahead of %+v answered a read of %+v", args, other)
		}
	}

	// read_committed: below the last stable offset of its start, which
	// may only have risen since.
	committed := readArgs{offset: 110, maxBytes: 20 * recSize, whole: 1 << 20, below: 150}
	later := committed
	later.below = 300
	if res, ok := later.take(ctx, committed.start(ctx, p)); !ok || offsets(res) != "110..149 (40)" {
		t.Error("a read_committed read-ahead did not answer a read below a higher last stable offset with its records")
	}
	if _, ok := committed.take(ctx, later.start(ctx, p)); ok {
		t.Error("a read-ahead answered a read below a lower last stable offset")
	}
	if _, ok := args.take(ctx, committed.start(ctx, p)); ok {
		t.Error("a read_committed read-ahead answered a read_uncommitted read")
	}

	// Discarded, before or after its read ends, it answers nothing.
	ra := args.start(ctx, p)
	ra.Discard()
	if _, ok := args.take(ctx, ra); ok {
		t.Error("a discarded read-ahead answered")
	}
	// Nor when the reader gives up waiting.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := args.take(gone, args.start(ctx, p)); ok {
		t.Error("a read-ahead answered a reader whose context had ended before it was done")
	}
}

// A read-ahead started before records left the log (DeleteRecords, below
// or past its offset; compaction), before its segment's stream was
// dropped for the cold tier, or before its topic was deleted, answers
// nothing; reads afresh return the log as it is now.
func TestReadAheadNotTakenAfterRecordsLeave(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	e := n.e
	ctx := context.Background()

	t.Run("DeleteRecords", func(t *testing.T) {
		p := keptPartition(t, e, "del")
		appendEach(t, p, 100, 100)
		below := readArgs{offset: 100, maxBytes: 10 * recSize, whole: 0, below: -1}
		ra := below.start(ctx, p)
		if _, err := p.DeleteRecords(ctx, 50); err != nil {
			t.Fatal(err)
		}
		if _, ok := below.take(ctx, ra); ok {
			t.Error("a read-ahead from before a DeleteRecords below its offset answered")
		}
		past := readArgs{offset: 120, maxBytes: 10 * recSize, whole: 0, below: -1}
		ra = past.start(ctx, p)
		if _, err := p.DeleteRecords(ctx, 150); err != nil {
			t.Fatal(err)
		}
		if _, ok := past.take(ctx, ra); ok {
			t.Error("a read-ahead of records DeleteRecords removed answered")
		}
		if _, err := p.Read(ctx, 120, 10*recSize); !errors.Is(err, engine.ErrOffsetOutOfRange) {
			t.Errorf("read below the new log start: %v, want ErrOffsetOutOfRange", err)
		}
	})

	t.Run("compaction", func(t *testing.T) {
		tp, err := e.CreateTopic(ctx, "cmp", 1, map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "delete.retention.ms": "3600000"}, false)
		if err != nil {
			t.Fatal(err)
		}
		p := tp.Partition(0)
		var rs []record.Record
		for i := range 40 {
			rs = append(rs, kvRec(fmt.Sprint("k", i%4), fmt.Sprint("v", i)))
		}
		put(t, p, rs...)
		args := readArgs{offset: 0, maxBytes: 1 << 20, whole: 0, below: -1}
		ra := args.start(ctx, p)
		if _, ok := args.take(ctx, args.start(ctx, p)); !ok {
			t.Fatal("a read-ahead did not answer its read")
		}
		if _, err := e.CompactTopic(ctx, "cmp"); err != nil {
			t.Fatal(err)
		}
		if _, ok := args.take(ctx, ra); ok {
			t.Error("a read-ahead from before compaction answered")
		}
		if got := fresh(t, p, args); got != "36..39 (4)" {
			t.Errorf("after compaction a read returns %s, want each key's last record, 36..39", got)
		}
	})

	t.Run("topic deleted", func(t *testing.T) {
		tp, err := e.CreateTopic(ctx, "gone", 1, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		p := tp.Partition(0)
		appendEach(t, p, 50)
		args := readArgs{offset: 0, maxBytes: 10 * recSize, whole: 0, below: -1}
		ra := args.start(ctx, p)
		if err := e.DeleteTopic(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, ok := args.take(ctx, ra); ok {
			t.Error("a read-ahead of a deleted topic answered")
		}
	})
}

// A read-ahead started before its segment left Redis for the cold tier
// answers nothing, and reads afresh (read-aheads too) come from the cold
// tier with the same records.
func TestReadAheadAcrossTiers(t *testing.T) {
	r := testbed.StartRedis(t)
	wh := enginetest.LocalWarehouse(t)
	e, _ := enginetest.Open(t, r, engine.Options{Cold: enginetest.Cold(t, wh), TieringInterval: 50 * time.Millisecond})
	ctx := context.Background()
	cfg := map[string]string{"remote.storage.enable": "true", "segment.bytes": "4000", "local.retention.ms": "3600000", "retention.ms": "-1"}
	tp, err := e.CreateTopic(ctx, "tier", 1, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	want := tieredRecords(0, 200, time.Now().UnixMilli())
	appendAll(t, p, want)
	testbed.WaitFor(t, 30*time.Second, "the first segment archived", func() bool {
		return p.Segments()[0].State == engine.SegmentArchived
	})
	args := readArgs{offset: 3, maxBytes: 1000, whole: 0, below: -1}
	local := fresh(t, p, args)
	ra := args.start(ctx, p)
	// Now the stream goes: the records are read from the cold tier.
	if err := e.IncrementalAlterConfigs(ctx, "tier", []engine.ConfigOp{{Name: "local.retention.ms", Op: engine.OpSet, Value: "0"}}, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 30*time.Second, "the first segment's stream dropped", func() bool { return !p.Segments()[0].Local })
	if _, ok := args.take(ctx, ra); ok {
		t.Error("a read-ahead from before its segment's stream was dropped answered")
	}
	if got := fresh(t, p, args); got != local {
		t.Errorf("read from the cold tier %s, from Redis %s", got, local)
	}
	res, ok := args.take(ctx, args.start(ctx, p))
	if !ok {
		t.Fatal("a read-ahead of the cold tier did not answer its read")
	}
	for _, rec := range res.Records {
		if w := want[rec.Offset]; string(rec.Key) != string(w.Key) || string(rec.Value) != string(w.Value) {
			t.Fatalf("cold read-ahead: record %d is %q=%q, want %q=%q", rec.Offset, rec.Key, rec.Value, w.Key, w.Value)
		}
	}
	if got := offsets(res); got != local {
		t.Errorf("cold read-ahead read %s, want %s", got, local)
	}
}

// A read-ahead started while this broker led the partition answers
// nothing once the partition has moved to another broker.
func TestReadAheadNotTakenAfterLeadershipMoves(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 1, engine.Options{})
	tp, err := a.e.CreateTopic(ctx, "mv", 8, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	args := readArgs{offset: 0, maxBytes: 10 * recSize, whole: 1 << 20, below: -1}
	var ras []*engine.ReadAhead
	for _, p := range tp.Partitions() {
		appendEach(t, p, 30)
		ras = append(ras, args.start(ctx, p))
	}
	b := openBroker(t, r, 2, engine.Options{})
	lead := waitSettled(t, []*broker{a, b}, "mv")
	moved := 0
	for i, ra := range ras {
		res, ok := args.take(ctx, ra)
		switch {
		case lead[i] == 2 && ok:
			t.Errorf("partition %d: a read-ahead from before the partition moved answered", i)
		case lead[i] == 2:
			moved++
		case ok:
			res.Release()
		}
	}
	if moved == 0 {
		t.Fatalf("no partition moved to broker 2 (%v): the test wants one", lead)
	}
}
