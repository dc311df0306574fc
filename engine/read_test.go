package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

// sizedRecs returns n records of Size() recSize for offsets first on:
// keys "k%06d" (the offset), values of x.
func sizedRecs(n, first int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		v := make([]byte, recSize-8-7)
		for j := range v {
			v[j] = 'x'
		}
		out[i] = record.Record{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "k%06d", first+i), Value: v}
	}
	return out
}

// recSize is what each record of sizedRecs counts (Record.Size).
const recSize = 113

// appendEach makes one append of each size, in order.
func appendEach(t *testing.T, p *engine.Partition, sizes ...int) {
	t.Helper()
	off := int(p.HighWatermark())
	for _, n := range sizes {
		if _, _, err := p.Append(sizedRecs(n, off)).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		off += n
	}
}

// span is the first and last offset of a read, each record checked to
// be the one written at its offset.
func span(t *testing.T, res *engine.ReadResult) string {
	t.Helper()
	if len(res.Records) == 0 {
		return "nothing"
	}
	for i, r := range res.Records {
		if want := fmt.Sprintf("k%06d", r.Offset); string(r.Key) != want {
			t.Fatalf("record at offset %d has key %q, want %q", r.Offset, r.Key, want)
		}
		if i > 0 && r.Offset <= res.Records[i-1].Offset {
			t.Fatalf("offset %d after %d", r.Offset, res.Records[i-1].Offset)
		}
	}
	return fmt.Sprint(res.Records[0].Offset, "..", res.Records[len(res.Records)-1].Offset)
}

// ReadWhole returns the rest of the append holding the first record when
// maxBytes cuts it (reading on from where the first XRANGE stopped),
// bounded by wholeMax and the read's limit, and nothing past that
// append's end beyond maxBytes; when compaction emptied the fetch offset,
// the append is the one holding the first record there is.
func TestReadWholeReadsOnThroughTheFirstAppend(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	p := keptPartition(t, e, "whole")
	// Appends 0..49, 50..549, 550..599 and 600..25599 (one XRANGE reads
	// at most 10000 entries).
	appendEach(t, p, 50, 500, 50, 25000)

	for _, tc := range []struct {
		name            string
		offset          int64
		maxBytes, whole int
		below           int64
		want            string
	}{
		{"first append whole", 0, 1, 1 << 20, -1, "0..49"},
		{"from mid-append to its end", 60, 10 * recSize, 1 << 20, -1, "60..549"},
		{"bounded by wholeMax", 60, 10 * recSize, 100 * recSize, -1, "60..159"},
		{"wholeMax a little above maxBytes", 60, 10 * recSize, 10*recSize + 12, -1, "60..69"},
		{"append ends within maxBytes", 40, 20 * recSize, 1 << 20, -1, "40..59"},
		{"below the LSO", 60, 10 * recSize, 1 << 20, 300, "60..299"},
		{"several XRANGEs into a large append", 600, 10 * recSize, 24000 * recSize, -1, "600..24599"},
		{"past the limit only the first record", 550, 1, 1, -1, "550..550"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.ReadWholeBelow(ctx, tc.offset, tc.maxBytes, tc.whole, tc.below)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			if got := span(t, res); got != tc.want {
				t.Errorf("ReadWholeBelow(%d, %d, %d, %d) read %s, want %s", tc.offset, tc.maxBytes, tc.whole, tc.below, got, tc.want)
			}
		})
	}
	// A plain Read stops at maxBytes.
	res, err := p.Read(ctx, 60, 10*recSize)
	if err != nil {
		t.Fatal(err)
	}
	if got := span(t, res); got != "60..69" {
		t.Errorf("Read(60, 10 records) read %s", got)
	}
	res.Release()

	// Compaction empties offsets 0..59: the read's first record is 60, in
	// the second append, which it returns to its end.
	var pl resp.Pipeline
	for off := range 60 {
		pl.Cmd("XDEL", p.StreamKey(), strconv.Itoa(off)+"-1")
	}
	rs, err := rc.Exec(ctx, &pl)
	if err != nil {
		t.Fatal(err)
	}
	rs.Release()
	res, err = p.ReadWhole(ctx, 0, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := span(t, res); got != "60..549" {
		t.Errorf("ReadWhole(0) over a compacted first append read %s, want 60..549", got)
	}
	res.Release()
}
