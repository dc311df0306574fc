package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// DeleteRecords moves the log start up (never down), drops the segments
// wholly below it and trims the one holding it; -1 means the high
// watermark, an offset past it is refused, and the log start survives a
// restart.
func TestDeleteRecords(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "del", 1, map[string]string{"segment.bytes": "1000", "retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	for range 20 {
		if _, _, err := p.Append(recs(3, time.Now().UnixMilli(), "d")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	segsBefore := len(p.Segments())
	if segsBefore < 3 {
		t.Fatalf("%d segments: the test wants several", segsBefore)
	}

	if start, err := p.DeleteRecords(ctx, 61); !errors.Is(err, engine.ErrOffsetOutOfRange) || start != -1 {
		t.Fatalf("delete past the high watermark: %d %v", start, err)
	}
	if start, err := p.DeleteRecords(ctx, -2); !errors.Is(err, engine.ErrOffsetOutOfRange) || start != -1 {
		t.Fatalf("delete to -2: %d %v", start, err)
	}
	if start, err := p.DeleteRecords(ctx, 40); err != nil || start != 40 || p.LogStart() != 40 {
		t.Fatalf("delete to 40: %d %v, log start %d", start, err, p.LogStart())
	}
	if start, err := p.DeleteRecords(ctx, 10); err != nil || start != 40 {
		t.Fatalf("delete to below the log start: %d %v, want 40 unchanged", start, err)
	}
	if _, err := p.Read(ctx, 39, 1<<20); !errors.Is(err, engine.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	got := readAll(t, p)
	if len(got) != 20 || got[0].Offset != 40 || got[19].Offset != 59 {
		t.Fatalf("after delete to 40: %d records from offset %d", len(got), got[0].Offset)
	}
	segs := p.Segments()
	if len(segs) >= segsBefore || segs[0].Base > 40 || (len(segs) > 1 && segs[1].Base <= 40) {
		t.Fatalf("segments after delete to 40: %+v (%d before)", segs, segsBefore)
	}
	keys, err := rc.Do(ctx, "KEYS", "korvet:storage:local:del:*")
	if err != nil || keys.Len() != len(segs) {
		t.Fatalf("%d streams in Redis, %d segments in the registry (%v)", keys.Len(), len(segs), err)
	}

	if start, err := p.DeleteRecords(ctx, -1); err != nil || start != 60 {
		t.Fatalf("delete to the high watermark: %d %v", start, err)
	}
	if res, err := p.Read(ctx, 60, 1<<20); err != nil || len(res.Records) != 0 {
		t.Fatalf("read of an emptied log: %v", err)
	} else {
		res.Release()
	}
	if b, _, err := p.Append(recs(1, time.Now().UnixMilli(), "after")).Wait(ctx); err != nil || b != 60 {
		t.Fatalf("append after deleting everything: %d %v", b, err)
	}

	e.Close()
	e2, _ := enginetest.Open(t, r, engine.Options{})
	p2 := e2.Topic("del").Partition(0)
	if p2.LogStart() != 60 || p2.HighWatermark() != 61 {
		t.Fatalf("after restart: log start %d, high watermark %d; want 60 and 61", p2.LogStart(), p2.HighWatermark())
	}
}
