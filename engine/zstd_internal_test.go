package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/dict"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func zstdBatch(n, size int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		v := fmt.Appendf(nil, `{"device":"sensor-%04d","seq":%d,"room":"kitchen","temperature_c":%d.%02d,"readings":[`, i%200, i, 15+i%15, i%100)
		for len(v) < size-8 {
			v = fmt.Appendf(v, "%d.%d,", 10+i%40, i%10)
		}
		recs[i].Value = append(v[:len(v)-1], "]}"...)
	}
	return recs
}

// TestPendingCompress: a batch's values compress into one arena with a
// fixed number of allocations, short ones are left alone, and the bytes
// are counted for the ratio sampling.
func TestPendingCompress(t *testing.T) {
	c, err := entry.NewCompressor(0, nil, zstdLevel)
	if err != nil {
		t.Fatal(err)
	}
	recs := zstdBatch(100, 1024)
	pd := &Pending{recs: recs}
	pd.compress(c, 128)
	if len(pd.frames) != len(recs) || pd.zc != c {
		t.Fatalf("%d frames for %d records", len(pd.frames), len(recs))
	}
	in, out := c.Observed()
	if in == 0 || out == 0 || out >= in {
		t.Fatalf("observed %d value bytes stored in %d", in, out)
	}
	if n := testing.AllocsPerRun(20, func() { pd.compress(c, 128) }); n > 3 {
		t.Errorf("%.0f allocations for a batch of %d values, want at most 3 (arena, ends, frames)", n, len(recs))
	}

	short := zstdBatch(100, 100)
	pd = &Pending{recs: short}
	pd.compress(c, 128)
	if pd.frames != nil || pd.zc != c {
		t.Fatalf("values under the minimum: frames %v", pd.frames != nil)
	}
	if n := testing.AllocsPerRun(20, func() { pd.compress(c, 128) }); n != 0 {
		t.Errorf("%.0f allocations for a batch of values under the minimum, want 0", n)
	}
}

func TestZstdMinBytesConfig(t *testing.T) {
	d, ok := LookupConfig("korvet.storage.compression.min.bytes")
	if !ok || d.Default != "32" {
		t.Fatalf("korvet.storage.compression.min.bytes: %v %+v", ok, d)
	}
	for v, valid := range map[string]bool{"0": true, "128": true, "1073741824": true, "-1": false, "x": false, "1073741825": false} {
		if err := d.check(v); (err == nil) != valid {
			t.Errorf("min.bytes=%q: %v", v, err)
		}
	}
}

// BenchmarkPendingCompress: the produce-path cost of compressing a batch
// of 100 values (per batch; allocs/op is per batch too), with and
// without a trained dictionary, and for values under the minimum.
func BenchmarkPendingCompress(b *testing.B) {
	var sample [][]byte
	for _, r := range zstdBatch(2000, 1024) {
		sample = append(sample, r.Value)
	}
	dict, err := buildDict(sample, 1)
	if err != nil {
		b.Fatal(err)
	}
	plain, _ := entry.NewCompressor(0, nil, zstdLevel)
	withDict, err := entry.NewCompressor(1, dict, zstdLevel)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		c    *entry.Compressor
		size int
		min  int
	}{{"1KiB/dict", withDict, 1024, 128}, {"1KiB/nodict", plain, 1024, 128}, {"100B/dict", withDict, 100, 0}, {"100B/under-min", withDict, 100, 128}} {
		b.Run(c.name, func(b *testing.B) {
			pd := &Pending{recs: zstdBatch(100, c.size)}
			b.ReportAllocs()
			for b.Loop() {
				pd.compress(c.c, c.min)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pd.recs)), "ns/record")
		})
	}
}

// zstdTopic starts a Redis and an engine with one zstd topic of one
// partition that the engine leads.
func zstdTopic(t *testing.T, name string) (context.Context, *Engine, *resp.Client, *Topic) {
	t.Helper()
	r := testbed.StartRedis(t)
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e, err := Open(ctx, rc, Options{Logger: testbed.Logger(), GroupInitialRebalanceDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	tp, err := e.CreateTopic(ctx, name, 1, map[string]string{"korvet.storage.compression": "zstd"}, false)
	if err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 10*time.Second, "the broker leads "+name+"/0", tp.Partition(0).IsLeader)
	return ctx, e, rc, tp
}

// TestZstdRetrainNoGain: retraining on values the current dictionary
// already fits stores no new version (errNoGain), so a drift that a new
// dictionary cannot fix does not pile up versions in Redis.
func TestZstdRetrainNoGain(t *testing.T) {
	ctx, e, rc, tp := zstdTopic(t, "nogain")
	if _, _, err := tp.Partition(0).Append(zstdBatch(1500, 1024)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := e.TrainZstdDict(ctx, "nogain"); err != nil || v != 1 {
		t.Fatalf("train: version %d, %v", v, err)
	}
	if _, err := tp.trainDict(ctx, 8, tp.z.cur.Load(), zstdRetrainGain); !errors.Is(err, errNoGain) {
		t.Fatalf("retraining on the same values: %v, want errNoGain", err)
	}
	if v, err := tp.currentDict(ctx); err != nil || v != 1 || tp.ZstdDictVersion() != 1 {
		t.Fatalf("after a retraining without gain: current %d (%v), in use %d; want 1", v, err, tp.ZstdDictVersion())
	}
	if n, err := rc.Do(ctx, "HEXISTS", e.k.ZstdDicts("nogain"), 2); err != nil || n.IsNil() {
		t.Fatal(err)
	} else if x, _ := n.Int(); x != 0 {
		t.Fatal("version 2 stored although it compresses no better")
	}
}

// TestReadsBack: a dictionary whose frames a reader would decode to other
// bytes is refused before it is stored. Here the frames are written with
// one dictionary and read with another of the same version.
func TestReadsBack(t *testing.T) {
	sample := func(seed int) [][]byte {
		var out [][]byte
		for _, r := range zstdBatch(1500, 700+seed) {
			out = append(out, r.Value)
		}
		return out
	}
	a, err := buildDict(sample(0), 4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildDict(sample(300), 4)
	if err != nil {
		t.Fatal(err)
	}
	c, err := entry.NewCompressor(4, a, zstdLevel)
	if err != nil {
		t.Fatal(err)
	}
	if err := readsBack(4, a, c, sample(0)); err != nil {
		t.Fatalf("its own dictionary: %v", err)
	}
	if err := readsBack(4, b, c, sample(0)); err == nil {
		t.Fatal("frames read with another dictionary passed")
	}
}

// TestZstdRetuneOldDictionary: a current dictionary an older korvet
// trained (the trainer's own tables) is replaced once by a tuned one, so
// that values take the fast encoder; the old version stays, and what was
// written with it reads back.
func TestZstdRetuneOldDictionary(t *testing.T) {
	ctx, e, rc, tp := zstdTopic(t, "old")
	p := tp.Partition(0)
	recs := zstdBatch(1500, 1024)
	var sample [][]byte
	for _, r := range recs {
		sample = append(sample, r.Value)
	}
	old, err := dict.BuildZstdDict(sample, dict.Options{MaxDictSize: zstdDictBytes, HashBytes: 8, ZstdDictID: 1, ZstdLevel: zstdLevel})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := entry.NewCompressor(1, old, zstdLevel); err != nil || c.Tuned() {
		t.Fatalf("the trainer's dictionary: tuned %v, %v", err == nil && c.Tuned(), err)
	}
	if _, err := rc.Do(ctx, "HSET", e.k.ZstdDicts("old"), 1, old, "current", 1); err != nil {
		t.Fatal(err)
	}
	if err := tp.useDict(1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Append(recs).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tp.refreshDict(ctx); err != nil {
		t.Fatal(err)
	}
	c := tp.z.cur.Load()
	if c.Version() != 2 || !c.Tuned() {
		t.Fatalf("after a pass: version %d, tuned %v; want 2, tuned", c.Version(), c.Tuned())
	}
	if n, err := rc.Do(ctx, "HEXISTS", e.k.ZstdDicts("old"), 1); err != nil {
		t.Fatal(err)
	} else if x, _ := n.Int(); x != 1 {
		t.Fatal("version 1 is gone")
	}
	// A retraining that waited while another replaced its version
	// trains nothing.
	c1, err := entry.NewCompressor(1, old, zstdLevel)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tp.trainDict(ctx, 8, c1, 1); !errors.Is(err, errSuperseded) || v != 2 {
		t.Fatalf("retraining version 1 while 2 is current: version %d, %v", v, err)
	}
	// Once per version: a second pass trains nothing more.
	if err := tp.refreshDict(ctx); err != nil || tp.ZstdDictVersion() != 2 {
		t.Fatalf("second pass: version %d, %v", tp.ZstdDictVersion(), err)
	}
	if _, _, err := p.Append(recs[:100]).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p.Read(ctx, 0, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if len(res.Records) != len(recs)+100 {
		t.Fatalf("%d records read back, want %d", len(res.Records), len(recs)+100)
	}
	for i, got := range res.Records {
		if want := recs[i%len(recs)].Value; !bytes.Equal(got.Value, want) {
			t.Fatalf("record %d: %d bytes back, want %d", i, len(got.Value), len(want))
		}
	}
	forms := map[string]int{}
	rr, err := rc.Do(ctx, "XRANGE", p.streamKey(0), "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range rr.Elems(nil) {
		f := ent.Elems(nil)[1].Elems(nil)
		for j := 0; j < len(f); j += 2 {
			if name := string(f[j].Bytes()); strings.HasPrefix(name, "__zstd.") {
				forms[name]++
			}
		}
	}
	if forms["__zstd.1"] != len(recs) || forms["__zstd.2"] != 100 {
		t.Fatalf("value forms %v: want %d with version 1, 100 with version 2", forms, len(recs))
	}
}
