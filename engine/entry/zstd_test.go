package entry

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/zstdict"
)

// sensorDoc is a ~700-byte JSON document as Python's json.dumps writes it
// (a space after ':' and ','), varying with i like a real sensor feed.
func sensorDoc(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	var b strings.Builder
	fmt.Fprintf(&b, `{"sensor_id": "sensor-%04d", "site": "greenhouse-%d", "ts": "2026-12-02T07:%02d:%02d.%06dZ", `,
		i%500, i%7, i/60%60, i%60, rng.IntN(1000000))
	fmt.Fprintf(&b, `"temperature_c": %.2f, "humidity_pct": %.1f, "pressure_hpa": %.2f, "co2_ppm": %d, `,
		15+rng.Float64()*15, 30+rng.Float64()*50, 990+rng.Float64()*40, 400+rng.IntN(800))
	fmt.Fprintf(&b, `"battery": {"voltage": %.3f, "percent": %d, "charging": %t}, `, 3+rng.Float64(), rng.IntN(101), rng.IntN(2) == 0)
	fmt.Fprintf(&b, `"location": {"lat": %.6f, "lon": %.6f, "alt_m": %.1f}, `, 52+rng.Float64(), 13+rng.Float64(), 30+rng.Float64()*20)
	fmt.Fprintf(&b, `"unit_system": "metric", "model": "SHT45-AD1B", "vendor": "Sensirion AG", "gateway": "gw-%02d.lan", `, rng.IntN(8))
	fmt.Fprintf(&b, `"firmware": "v%d.%d.%d", "tags": ["indoor", "zone-%d", "calibrated"], `, 2, rng.IntN(5), rng.IntN(20), rng.IntN(12))
	fmt.Fprintf(&b, `"readings": [%.3f, %.3f, %.3f, %.3f, %.3f, %.3f], `, rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64())
	fmt.Fprintf(&b, `"status": "%s", "uptime_s": %d, "rssi_dbm": %d, "error_count": %d, "last_maintenance": "2026-%02d-%02d", `,
		[]string{"ok", "ok", "ok", "degraded"}[rng.IntN(4)], rng.IntN(10000000), -30-rng.IntN(60), rng.IntN(5), 1+rng.IntN(12), 1+rng.IntN(28))
	fmt.Fprintf(&b, `"notes": "routine reading from the %s bed, fan %s"}`, []string{"north", "south", "east", "west"}[rng.IntN(4)], []string{"on", "off"}[rng.IntN(2)])
	return []byte(b.String())
}

// testDict trains a dictionary with ID version from sensor documents.
func testDict(t testing.TB, version uint32) []byte {
	t.Helper()
	var sample [][]byte
	for i := range 2000 {
		sample = append(sample, sensorDoc(100000+i))
	}
	d, err := dict.BuildZstdDict(sample, dict.Options{MaxDictSize: 16 << 10, HashBytes: 8, ZstdDictID: version, ZstdLevel: zstd.SpeedFastest})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testDicts is a Dicts over a fixed set of dictionaries.
func testDicts(dicts map[uint32][]byte) *DictCache {
	return NewDictCache(func(v uint32) ([]byte, error) {
		if d, ok := dicts[v]; ok {
			return d, nil
		}
		return nil, fmt.Errorf("%w: version %d", ErrNoDictionary, v)
	})
}

func newCompressor(t testing.TB, version uint32, dict []byte) *Compressor {
	t.Helper()
	c, err := NewCompressor(version, dict, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// valueField returns the name of the field holding fields' value ("" when
// none, "{" when flattened).
func valueField(fields [][]byte) string {
	for i := 0; i < len(fields); i += 2 {
		switch n := string(fields[i]); {
		case n == fieldValue || strings.HasPrefix(n, prefixZstd):
			return n
		case !strings.HasPrefix(n, "__"):
			return "{"
		}
	}
	return ""
}

// TestZstdRoundTrip: values go compressed, flattened or raw as they
// should and read back, with a trainer's dictionary (the general encoder)
// and with a tuned one (zstdict's, which reuses its tables).
func TestZstdRoundTrip(t *testing.T) {
	for _, tuned := range []bool{false, true} {
		t.Run(fmt.Sprintf("tuned=%v", tuned), func(t *testing.T) { zstdRoundTrip(t, tuned) })
	}
}

func zstdRoundTrip(t *testing.T, tuned bool) {
	d1 := testDict(t, 1)
	if tuned {
		var sample [][]byte
		for i := range 2000 {
			sample = append(sample, sensorDoc(100000+i))
		}
		var err error
		if d1, err = zstdict.Tune(d1, sample); err != nil {
			t.Fatal(err)
		}
	}
	if c := newCompressor(t, 1, d1); (c.fast != nil) != tuned {
		t.Fatalf("tuned %v: fast encoder %v", tuned, c.fast != nil)
	}
	dicts := testDicts(map[uint32][]byte{1: d1})
	rnd := make([]byte, 256)
	for i := range rnd {
		rnd[i] = byte(rand.Uint32())
	}
	doc := sensorDoc(1)
	compact := []byte(`{"a":"` + strings.Repeat("xy", 100) + `","b":1}`)
	hdrs := []record.Header{{Key: []byte("h"), Value: []byte("v")}, {Key: []byte("n")}}
	for _, c := range []struct {
		name    string
		version uint32
		value   []byte
		field   string
	}{
		{"json, no dictionary", 0, compact, "__zstd.0"},
		{"json, dictionary", 1, doc, "__zstd.1"},
		{"compact json compresses rather than flattens", 1, compact, "__zstd.1"},
		{"random binary stays raw", 1, rnd, "__value"},
		{"short value stays raw", 1, []byte("x"), "__value"},
		{"short compact json stays flattened", 0, []byte(`{"a":1}`), "{"},
		{"empty value stays raw", 1, []byte{}, "__value"},
		{"tombstone", 1, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var dict []byte
			if c.version > 0 {
				dict = d1
			}
			e := Encoder{Zstd: newCompressor(t, c.version, dict)}
			r := record.Record{Timestamp: 5, Key: []byte("k"), Value: c.value, Headers: hdrs}
			fields := encode(t, &e, &r)
			if got := valueField(fields); got != c.field {
				t.Fatalf("value in %q, want %q", got, c.field)
			}
			if c.field == "__zstd.1" {
				t.Logf("%d-byte value stored in %d bytes", len(c.value), len(fields[len(fields)-1]))
			}
			d := Decoder{Dicts: dicts}
			var back record.Record
			if err := decode(&d, fields, &back); err != nil {
				t.Fatal(err)
			}
			if err := sameRecord(&r, &back); err != nil {
				t.Fatal(err)
			}
		})
	}

	// Control records keep their value whole, readable by any client.
	e := Encoder{Zstd: newCompressor(t, 0, nil)}
	ctl := record.Record{Key: []byte{0, 0, 0, 1}, Value: bytes.Repeat([]byte{0}, 600)}
	var cw capture
	e.PrepareTxn(&ctl, AppendTxn(nil, 1, 0), true)
	e.Append(&cw)
	if got := valueField(cw.fields); got != fieldValue {
		t.Fatalf("control record value in %q", got)
	}
}

// TestZstdDecoderArena: many compressed values decoded between Resets
// keep their bytes, as flattened ones do.
func TestZstdDecoderArena(t *testing.T) {
	e := Encoder{Zstd: newCompressor(t, 0, nil)}
	d := Decoder{Dicts: testDicts(nil)}
	var recs []record.Record
	var want [][]byte
	for i := range 200 {
		v := sensorDoc(i)
		if i%3 == 0 {
			v = fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("z", 50))
		}
		want = append(want, v)
		var back record.Record
		if err := decode(&d, encode(t, &e, &record.Record{Value: v}), &back); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, back)
	}
	for i := range recs {
		if !bytes.Equal(recs[i].Value, want[i]) {
			t.Fatalf("record %d: value changed after later decodes", i)
		}
	}
}

func TestZstdDecodeErrors(t *testing.T) {
	d1 := testDict(t, 1)
	doc := sensorDoc(3)
	plain := newCompressor(t, 0, nil).enc.EncodeAll(doc, nil)
	withDict := newCompressor(t, 1, d1).enc.EncodeAll(doc, nil)
	big := newCompressor(t, 0, nil).enc.EncodeAll(make([]byte, 2<<20), nil)
	// A frame header claiming 1 TiB of content: single segment, 8-byte
	// content size, then a raw block of 3 bytes.
	huge := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0, 0x19, 0, 0, 'a', 'b', 'c'}
	lying := bytes.Clone(plain)
	lying[5]-- // content size one byte short of what the blocks hold
	noFCS := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50, 0x19, 0, 0, 'a', 'b', 'c'}

	for _, c := range []struct {
		name   string
		dicts  Dicts
		max    int
		fields [][]byte
		want   error
		msg    string
	}{
		{"junk", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), []byte("not a frame at all")}, ErrMalformed, "__zstd.0"},
		{"empty", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), {}}, ErrMalformed, "__zstd.0"},
		{"truncated", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), plain[:len(plain)/2]}, ErrMalformed, "__zstd.0"},
		{"content size over 64 MiB", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), huge}, ErrMalformed, "over the limit"},
		{"content size over MaxValue", testDicts(nil), 1 << 20, [][]byte{[]byte("__zstd.0"), big}, ErrMalformed, "over the limit"},
		{"content size lies", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), lying}, ErrMalformed, "__zstd.0"},
		{"no content size", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), noFCS}, ErrMalformed, "content size"},
		{"missing dictionary", testDicts(nil), 0, [][]byte{[]byte("__zstd.1"), withDict}, ErrNoDictionary, "version 1"},
		{"no dictionaries at all", nil, 0, [][]byte{[]byte("__zstd.0"), plain}, ErrNoDictionary, "no dictionaries"},
		{"frame of another dictionary", testDicts(map[uint32][]byte{1: d1}), 0, [][]byte{[]byte("__zstd.0"), withDict}, ErrMalformed, "dictionary 1"},
		{"bad version", testDicts(nil), 0, [][]byte{[]byte("__zstd.x"), plain}, ErrMalformed, "bad dictionary version"},
		{"leading zero", testDicts(nil), 0, [][]byte{[]byte("__zstd.01"), plain}, ErrMalformed, "bad dictionary version"},
		{"negative", testDicts(nil), 0, [][]byte{[]byte("__zstd.-1"), plain}, ErrMalformed, "bad dictionary version"},
		{"next to __value", testDicts(nil), 0, [][]byte{[]byte("__value"), []byte("x"), []byte("__zstd.0"), plain}, ErrMalformed, "next to another value"},
		{"two frames", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), plain, []byte("__zstd.0"), plain}, ErrMalformed, "next to another value"},
		{"member after", testDicts(nil), 0, [][]byte{[]byte("__zstd.0"), plain, []byte("a"), []byte("1")}, ErrMalformed, "member"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decoder{Dicts: c.dicts, MaxValue: c.max}
			fields := append([][]byte{[]byte("__ts"), []byte("1")}, c.fields...)
			var rec record.Record
			err := decode(&d, fields, &rec)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v mentioning %q", err, c.want, c.msg)
			}
			// The decoder carries on with the next entry.
			if err := decode(&d, [][]byte{[]byte("__ts"), []byte("2"), []byte("__value"), []byte("ok")}, &rec); err != nil || string(rec.Value) != "ok" {
				t.Fatalf("next entry: %q, %v", rec.Value, err)
			}
		})
	}
}

func TestIsValueField(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "__value": true, "__zstd.0": true, "__zstd.12": true,
		"__ts": false, "__key": false, "__header.x": false, "__hnull.x": false, "__txn": false, "__ctl": false,
	} {
		if got := IsValueField([]byte(name)); got != want {
			t.Errorf("IsValueField(%q) = %v", name, got)
		}
	}
}

// FuzzZstdField feeds arbitrary frames to the decoder: it must refuse or
// decode them within MaxValue, never panic or allocate beyond it.
func FuzzZstdField(f *testing.F) {
	c, _ := NewCompressor(0, nil, zstd.SpeedFastest)
	f.Add([]byte("__zstd.0"), c.enc.EncodeAll(sensorDoc(1), nil))
	f.Add([]byte("__zstd.0"), c.enc.EncodeAll([]byte("hello hello hello hello"), nil))
	f.Add([]byte("__zstd.1"), []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Add([]byte("__zstd.0"), []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 3, 0x19, 0, 0, 'a', 'b', 'c'})
	dicts := testDicts(nil)
	f.Fuzz(func(t *testing.T, name, frame []byte) {
		if !bytes.HasPrefix(name, []byte(prefixZstd)) {
			name = append([]byte(prefixZstd), name...)
		}
		d := Decoder{Dicts: dicts, MaxValue: 1 << 20}
		var rec record.Record
		if err := decode(&d, [][]byte{[]byte("__ts"), []byte("1"), name, frame}, &rec); err == nil && len(rec.Value) > 1<<20 {
			t.Fatalf("decoded %d bytes over MaxValue", len(rec.Value))
		}
	})
}

// BenchmarkEncodeZstd compares encoder levels, with and without a
// dictionary, on the 700-byte JSON documents the issue measured; it
// reports the stored size of the value as a share of the value.
func BenchmarkEncodeZstd(b *testing.B) {
	d1 := testDict(b, 1)
	docs := make([]*record.Record, 256)
	for i := range docs {
		docs[i] = &record.Record{Timestamp: 1700000000000, Key: []byte("sensor-0001"), Value: sensorDoc(i)}
	}
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		for _, withDict := range []bool{false, true} {
			name := fmt.Sprintf("%s/dict=%v", level, withDict)
			b.Run(name, func(b *testing.B) {
				var c *Compressor
				var err error
				if withDict {
					c, err = NewCompressor(1, d1, level)
				} else {
					c, err = NewCompressor(0, nil, level)
				}
				if err != nil {
					b.Fatal(err)
				}
				e := Encoder{Zstd: c}
				var w discard
				var in, out int
				b.ReportAllocs()
				b.SetBytes(int64(len(docs[0].Value)))
				i := 0
				for b.Loop() {
					r := docs[i%len(docs)]
					i++
					e.Prepare(r)
					in += len(r.Value)
					out += len(e.zbuf)
					e.Append(&w)
				}
				b.ReportMetric(float64(out)/float64(in), "stored/value")
			})
		}
	}
	b.Run("uncompressed", func(b *testing.B) {
		var e Encoder
		var w discard
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			e.Prepare(docs[i%len(docs)])
			i++
			e.Append(&w)
		}
	})
}

// BenchmarkDecodeZstd measures reading a compressed 700-byte document.
func BenchmarkDecodeZstd(b *testing.B) {
	d1 := testDict(b, 1)
	c, err := NewCompressor(1, d1, zstd.SpeedFastest)
	if err != nil {
		b.Fatal(err)
	}
	e := Encoder{Zstd: c}
	fields := encode(b, &e, &record.Record{Timestamp: 1, Value: sensorDoc(1)})
	d := Decoder{Dicts: testDicts(map[uint32][]byte{1: d1})}
	var rec record.Record
	b.ReportAllocs()
	for b.Loop() {
		d.Reset()
		if err := decode(&d, fields, &rec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUseFrame: a value compressed beforehand (by another version's
// Compressor even) is written as given, and a nil frame stores it as it
// would be without compression.
func TestUseFrame(t *testing.T) {
	d1 := testDict(t, 1)
	c0, c1 := newCompressor(t, 0, nil), newCompressor(t, 1, d1)
	doc := sensorDoc(9)
	frame, ok := c1.Compress(nil, doc)
	if !ok {
		t.Fatal("a sensor document does not compress with the dictionary")
	}
	e := Encoder{Zstd: c0}
	d := Decoder{Dicts: testDicts(map[uint32][]byte{1: d1})}
	for _, c := range []struct {
		name  string
		frame []byte
		field string
	}{{"frame", frame, "__zstd.1"}, {"not smaller", nil, "{"}} { // "{": stored as without compression, flattened with a __ws layout
		e.UseFrame(c1, c.frame)
		r := record.Record{Timestamp: 1, Value: doc}
		fields := encode(t, &e, &r)
		if got := valueField(fields); got != c.field {
			t.Fatalf("%s: value in %q, want %q", c.name, got, c.field)
		}
		var back record.Record
		if err := decode(&d, fields, &back); err != nil || !bytes.Equal(back.Value, doc) {
			t.Fatalf("%s: round trip: %v", c.name, err)
		}
	}
	// UseFrame holds for one Prepare only.
	fields := encode(t, &e, &record.Record{Timestamp: 1, Value: bytes.Repeat([]byte("abc"), 100)})
	if got := valueField(fields); got != "__zstd.0" {
		t.Fatalf("after UseFrame's record: value in %q, want __zstd.0", got)
	}
}
