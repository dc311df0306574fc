package entry

import (
	"bytes"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// TestZstdMin: values shorter than ZstdMin keep their uncompressed form;
// from ZstdMin bytes on they are compressed, and both read back.
func TestZstdMin(t *testing.T) {
	d1 := testDict(t, 1)
	dicts := testDicts(map[uint32][]byte{1: d1})
	doc := sensorDoc(3)
	line := bytes.Repeat([]byte("GET /healthz 200 "), 6) // 102 bytes that compress
	for _, c := range []struct {
		name  string
		min   int
		value []byte
		field string
	}{
		{"log line below the minimum", len(line) + 1, line, "__value"},
		{"log line at the minimum", len(line), line, "__zstd.1"},
		{"document below the minimum", len(doc) + 1, doc, "{"},
		{"document over the minimum", 128, doc, "__zstd.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := Encoder{Zstd: newCompressor(t, 1, d1), ZstdMin: c.min}
			r := record.Record{Timestamp: 1, Value: c.value}
			fields := encode(t, &e, &r)
			if got := valueField(fields); got != c.field {
				t.Fatalf("value in %q, want %q", got, c.field)
			}
			d := Decoder{Dicts: dicts}
			var back record.Record
			if err := decode(&d, fields, &back); err != nil || !bytes.Equal(back.Value, c.value) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
}

// TestZstdNoAllocs guards the produce path: compressing into a reused
// buffer, and encoding a compressed entry, allocate nothing per record.
func TestZstdNoAllocs(t *testing.T) {
	c := newCompressor(t, 1, testDict(t, 1))
	doc := sensorDoc(5)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(200, func() { buf, _ = c.Compress(buf[:0], doc) }); n != 0 {
		t.Errorf("Compressor.Compress: %.1f allocations per value, want 0", n)
	}
	e := Encoder{Zstd: c}
	var w discard
	r := record.Record{Timestamp: 1, Key: []byte("k"), Value: doc}
	e.Prepare(&r)
	e.Append(&w)
	if n := testing.AllocsPerRun(200, func() { e.Prepare(&r); e.Append(&w) }); n != 0 {
		t.Errorf("Encoder with Zstd: %.1f allocations per record, want 0", n)
	}
	frame, _ := c.Compress(nil, doc)
	if n := testing.AllocsPerRun(200, func() { e.UseFrame(c, frame); e.Prepare(&r); e.Append(&w) }); n != 0 {
		t.Errorf("Encoder with a precompressed frame: %.1f allocations per record, want 0", n)
	}
}

// TestZstdFutileValues: once a topic's values keep coming out no smaller,
// most are not tried, so a compressible value after a run of random ones
// may go uncompressed for up to futileProbe values, until a probe
// compresses it; from then on every value is tried again.
func TestZstdFutileValues(t *testing.T) {
	c := newCompressor(t, 1, testDict(t, 1))
	random := make([]byte, 256)
	seed := uint32(7)
	for i := range random {
		seed = seed*1664525 + 1013904223
		random[i] = byte(seed >> 24)
	}
	for i := range futileRun {
		if _, ok := c.Compress(nil, random); ok {
			t.Fatalf("random value %d compressed", i)
		}
	}
	doc := sensorDoc(4)
	skipped := 0
	for {
		if _, ok := c.Compress(nil, doc); ok {
			break
		}
		if skipped++; skipped > futileProbe {
			t.Fatalf("%d compressible values in a row went uncompressed after a futile run: no probe", skipped)
		}
	}
	if skipped == 0 {
		t.Fatal("after a futile run the first value was still tried: nothing is skipped")
	}
	for i := range 2 * futileProbe {
		if _, ok := c.Compress(nil, doc); !ok {
			t.Fatalf("value %d after a probe compressed: not tried", i)
		}
	}
	// A value that does not compress now and then keeps every one tried.
	for i := range 4 * futileRun {
		v := doc
		if i%8 == 0 {
			v = random
		}
		if _, ok := c.Compress(nil, v); ok == (i%8 == 0) {
			t.Fatalf("value %d of a mostly compressible run: compressed %v", i, ok)
		}
	}
}
