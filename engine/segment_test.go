package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// Segments roll at segment.bytes in the transaction that crosses it, each
// segment is its own stream, reads run across them, and the registry
// survives a restart.
func TestSegmentsRollAndReadAcross(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "seg", 1, map[string]string{"segment.bytes": "2000", "retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	for i := 0; i < 40; i++ {
		if _, _, err := p.Append(recs(5, time.Now().UnixMilli(), fmt.Sprint(i))).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	segs := p.Segments()
	if len(segs) < 5 {
		t.Fatalf("%d segments after 200 records with segment.bytes 2000", len(segs))
	}
	var total int64
	for i, sg := range segs {
		n, err := rc.Do(ctx, "XLEN", fmt.Sprintf("korvet:storage:local:seg:0:%d", sg.ID))
		if err != nil {
			t.Fatal(err)
		}
		l, _ := n.Int()
		total += l
		if i < len(segs)-1 {
			if sg.State != engine.SegmentSealed || sg.Last != segs[i+1].Base-1 || l != sg.Last-sg.Base+1 {
				t.Fatalf("segment %+v holds %d entries; next base %d", sg, l, segs[i+1].Base)
			}
			// No segment grows past segment.bytes by more than one append.
			if sg.Bytes > 2000+5*60 {
				t.Fatalf("segment %d is %d bytes", sg.ID, sg.Bytes)
			}
		}
	}
	if total != 200 {
		t.Fatalf("streams hold %d entries, want 200", total)
	}
	if got := readAll(t, p); len(got) != 200 || got[199].Offset != 199 {
		t.Fatalf("read %d records across segments", len(got))
	}
	e.Close()
	e2, _ := enginetest.Open(t, r, engine.Options{})
	p2 := e2.Topic("seg").Partition(0)
	if s2 := p2.Segments(); len(s2) != len(segs) || s2[len(s2)-1].Base != segs[len(segs)-1].Base {
		t.Fatalf("registry after restart: %d segments, want %d", len(s2), len(segs))
	}
	base, _, err := p2.Append(recs(1, time.Now().UnixMilli(), "after")).Wait(ctx)
	if err != nil || base != 200 {
		t.Fatalf("append after restart: %d %v", base, err)
	}
	if got := readAll(t, p2); len(got) != 201 {
		t.Fatalf("read %d records after restart", len(got))
	}
}

// Retention drops whole segments (their streams leave Redis) and trims
// the one holding the new log start.
func TestRetentionDropsWholeSegments(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{RetentionInterval: 50 * time.Millisecond})
	ctx := context.Background()
	tp, _ := e.CreateTopic(ctx, "segret", 1, map[string]string{"segment.bytes": "1000", "retention.ms": "3600000"}, false)
	p := tp.Partition(0)
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := 0; i < 20; i++ {
		if _, _, err := p.Append(recs(3, old, fmt.Sprint(i))).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := p.Append(recs(3, time.Now().UnixMilli(), "new")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.LogStart() != 60 {
		if time.Now().After(deadline) {
			t.Fatalf("log start %d, want 60", p.LogStart())
		}
		time.Sleep(20 * time.Millisecond)
	}
	keys, _ := rc.Do(ctx, "KEYS", "korvet:storage:local:segret:*")
	segs := p.Segments()
	if keys.Len() != len(segs) {
		t.Fatalf("%d streams in Redis, %d segments in the registry", keys.Len(), len(segs))
	}
	if got := readAll(t, p); len(got) != 3 || got[0].Offset != 60 {
		t.Fatalf("after retention: %d records from %v", len(got), got)
	}
}
