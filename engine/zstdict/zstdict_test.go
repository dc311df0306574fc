package zstdict

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

// reading is a JSON document of about 700 bytes, as Python's json.dumps
// writes a weather station's reading: fixed names, varying figures.
func reading(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 11))
	var b strings.Builder
	fmt.Fprintf(&b, `{"station": "ws-%03d", "time": "2026-12-07T%02d:%02d:%02dZ", "temp_c": %.2f, "dew_c": %.2f, `,
		i%300, i/3600%24, i/60%60, i%60, -5+rng.Float64()*30, -8+rng.Float64()*20)
	fmt.Fprintf(&b, `"wind": {"speed_ms": %.1f, "gust_ms": %.1f, "dir_deg": %d}, "rain_mm": %.1f, `,
		rng.Float64()*20, rng.Float64()*30, rng.IntN(360), rng.Float64()*4)
	fmt.Fprintf(&b, `"pressure_hpa": %.1f, "uv_index": %d, "solar_wm2": %d, "battery_v": %.3f, `,
		980+rng.Float64()*50, rng.IntN(11), rng.IntN(1000), 3.3+rng.Float64())
	fmt.Fprintf(&b, `"firmware": "2.%d.%d", "sensors": ["bme280", "as3935", "veml6075"], "quality": "%s", `,
		rng.IntN(4), rng.IntN(30), []string{"good", "good", "fair", "poor"}[rng.IntN(4)])
	fmt.Fprintf(&b, `"location": {"name": "allotment %d", "lat": %.5f, "lon": %.5f, "elevation_m": %d}, `,
		i%40, 48+rng.Float64(), 11+rng.Float64(), 400+rng.IntN(300))
	fmt.Fprintf(&b, `"samples": [%d, %d, %d, %d, %d, %d, %d, %d], "uptime_s": %d, "errors": %d}`,
		rng.IntN(4096), rng.IntN(4096), rng.IntN(4096), rng.IntN(4096), rng.IntN(4096), rng.IntN(4096), rng.IntN(4096), rng.IntN(4096),
		rng.IntN(1<<24), rng.IntN(3))
	return []byte(b.String())
}

// readings returns n readings from the ith on.
func readings(i, n int) [][]byte { return docs(reading, i, n) }

// docs returns n documents of doc from the ith on.
func docs(doc func(int) []byte, i, n int) [][]byte {
	out := make([][]byte, n)
	for j := range out {
		out[j] = doc(i + j)
	}
	return out
}

// train builds a dictionary as korvet's topics do: 64 KiB from the
// trainer at its fastest level, tables tuned.
func train(t testing.TB, sample [][]byte, id uint32) (raw, tuned []byte) {
	t.Helper()
	raw, err := dict.BuildZstdDict(sample, dict.Options{MaxDictSize: 64 << 10, HashBytes: 8, ZstdDictID: id, ZstdLevel: zstd.SpeedFastest})
	if err != nil {
		t.Fatal(err)
	}
	if tuned, err = Tune(raw, sample); err != nil {
		t.Fatal(err)
	}
	return raw, tuned
}

var trained = sync.OnceValues(func() ([]byte, error) {
	sample := readings(1_000_000, 2000)
	raw, err := dict.BuildZstdDict(sample, dict.Options{MaxDictSize: 64 << 10, HashBytes: 8, ZstdDictID: 7, ZstdLevel: zstd.SpeedFastest})
	if err != nil {
		return nil, err
	}
	return Tune(raw, sample)
})

func setup(t testing.TB) (*Dict, *zstd.Decoder, []byte) {
	t.Helper()
	raw, err := trained()
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(raw)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDicts(raw), zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.Close)
	return d, dec, raw
}

// roundTrip encodes v, checks the frame's header and that the reference
// decoder gives v back byte for byte, and returns the frame's size.
func roundTrip(t testing.TB, d *Dict, dec *zstd.Decoder, v []byte) int {
	t.Helper()
	frame, ok := d.Encode([]byte("prefix"), v)
	if !ok {
		t.Fatalf("%d bytes refused", len(v))
	}
	if string(frame[:6]) != "prefix" {
		t.Fatalf("Encode changed what dst held: %q", frame[:6])
	}
	frame = frame[6:]
	var h zstd.Header
	if err := h.Decode(frame); err != nil {
		t.Fatalf("%d bytes: frame header: %v", len(v), err)
	}
	if !h.HasFCS || h.FrameContentSize != uint64(len(v)) || h.DictionaryID != d.ID() || !h.SingleSegment || h.HasCheckSum {
		t.Fatalf("%d bytes: header %+v", len(v), h)
	}
	got, err := dec.DecodeAll(frame, nil)
	if err != nil {
		t.Fatalf("%d bytes in a %d-byte frame: %v", len(v), len(frame), err)
	}
	if !bytes.Equal(got, v) {
		t.Fatalf("%d bytes came back as %d, first difference at %d", len(v), len(got), firstDiff(got, v))
	}
	return len(frame)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Values like the dictionary's samples, values nothing like them and the
// edge sizes all come back byte for byte from the reference decoder.
func TestRoundTrip(t *testing.T) {
	d, dec, _ := setup(t)
	rng := rand.New(rand.NewPCG(1, 2))
	values := [][]byte{nil, {}, []byte("a"), []byte("abcdefg"), []byte("abcdefgh"), bytes.Repeat([]byte("x"), 100),
		bytes.Repeat([]byte(`"temp_c": `), 500), make([]byte, MaxValue)}
	for i := range 300 {
		values = append(values, reading(i))
	}
	for _, n := range []int{9, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 16383, 16384, 70000, MaxValue} {
		random := make([]byte, n)
		for i := range random {
			random[i] = byte(rng.Uint32())
		}
		values = append(values, random)
		text := make([]byte, 0, n)
		for len(text) < n {
			text = append(text, reading(len(text))...)
		}
		values = append(values, text[:n])
		// Mostly JSON with bytes the dictionary's literals table has no
		// code for: the literals go raw.
		mixed := bytes.Clone(text[:n])
		for i := 0; i < n; i += 97 {
			mixed[i] = 0x80 | byte(i)
		}
		values = append(values, mixed)
	}
	for _, v := range values {
		roundTrip(t, d, dec, v)
	}
	if _, ok := d.Encode(nil, make([]byte, MaxValue+1)); ok {
		t.Fatal("a value over MaxValue was taken")
	}
}

// A stream whose codes the dictionary's table cannot express takes the
// predefined table: forced here for all three by a Dict that believes its
// tables hold no symbols.
func TestPredefinedTables(t *testing.T) {
	d, dec, _ := setup(t)
	for _, which := range []string{"ll", "ml", "of", "all"} {
		none := Dict{id: d.id, content: d.content, reps: d.reps, huffDesc: d.huffDesc, ll: d.ll, ml: d.ml, of: d.of, match: d.match, matchBase: d.matchBase}
		for _, tab := range []struct {
			name string
			t    **fseTable
		}{{"ll", &none.ll}, {"ml", &none.ml}, {"of", &none.of}} {
			if which == tab.name || which == "all" {
				c := **tab.t
				c.has = 0
				*tab.t = &c
			}
		}
		for i := range 50 {
			v := reading(i)
			if n := roundTrip(t, &none, dec, v); n >= len(v) {
				t.Fatalf("%s predefined: %d bytes into %d", which, len(v), n)
			}
		}
		long := bytes.Repeat(reading(1), 40)
		roundTrip(t, &none, dec, long)
	}
}

// On values like its samples the encoder stores no more than the general
// encoder with the same dictionary (within 5%), and finds the repeats a
// value has within itself as well as those it shares with the dictionary.
func TestRatio(t *testing.T) {
	d, dec, raw := setup(t)
	ref, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDict(raw),
		zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var in, ours, theirs int
	for i := range 1000 {
		v := reading(i)
		in += len(v)
		ours += roundTrip(t, d, dec, v)
		theirs += len(ref.EncodeAll(v, nil))
	}
	t.Logf("%d bytes of readings: %d here (%.3f), %d by the general encoder (%.3f)", in, ours, float64(ours)/float64(in), theirs, float64(theirs)/float64(in))
	if float64(ours) > 1.05*float64(theirs) {
		t.Errorf("%d bytes here, %d by the general encoder", ours, theirs)
	}
	// Eight copies of one random kilobyte: the copies are matches within
	// the value, whatever the dictionary holds.
	rng := rand.New(rand.NewPCG(3, 4))
	kb := make([]byte, 1024)
	for i := range kb {
		kb[i] = byte(rng.Uint32())
	}
	if n := roundTrip(t, d, dec, bytes.Repeat(kb, 8)); n > 1100 {
		t.Errorf("eight copies of a random kilobyte in %d bytes", n)
	}
}

// Tables read from a dictionary are the ones its decoder uses: a
// description written by the reference encoder reads back to counts that
// sum to the table size, and the bytes it took end where the next begins.
func TestDictionaryParse(t *testing.T) {
	d, _, raw := setup(t)
	for name, tab := range map[string]*fseTable{"ll": d.ll, "ml": d.ml, "of": d.of} {
		if tab.has == 0 || len(tab.states) != 1<<tab.log {
			t.Errorf("%s: log %d, %d states, symbols %b", name, tab.log, len(tab.states), tab.has)
		}
	}
	if !bytes.HasSuffix(raw, d.content) || len(d.content) < 32<<10 {
		t.Errorf("content %d bytes of a %d-byte dictionary", len(d.content), len(raw))
	}
	for _, bad := range [][]byte{nil, raw[:8], raw[:40], append([]byte{1, 2, 3, 4}, raw[4:]...)} {
		if _, err := New(bad); err == nil {
			t.Errorf("a %d-byte non-dictionary parsed", len(bad))
		}
	}
	for n := 8; n < 200; n++ {
		if _, err := New(raw[:n]); err == nil {
			t.Errorf("a dictionary cut to %d bytes parsed", n)
		}
	}
}

// Any bytes at all round-trip.
func FuzzEncode(f *testing.F) {
	d, dec, _ := setup(f)
	f.Add(reading(1))
	f.Add([]byte("{}"))
	f.Add(bytes.Repeat([]byte("ab"), 300))
	f.Fuzz(func(t *testing.T, v []byte) {
		roundTrip(t, d, dec, v)
	})
}

// series is a compact JSON document of about 1 KiB that is mostly an
// array of random readings (scripts/bench-memory.sh's workload (a)): some
// 130 short matches against the dictionary each, the costly case.
func series(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 13))
	b := fmt.Appendf(nil, `{"device_id":"sensor-%04d","ts":%d,"room":"attic","readings":[`, rng.IntN(200), 1764660000000+int64(i)*1000)
	for len(b) < 1010 {
		b = fmt.Appendf(b, "%.2f,", float64(rng.IntN(4000))/100+10)
	}
	return append(b[:len(b)-1], "]}"...)
}

// BenchmarkEncode compares this encoder with the general one at its
// fastest level, both with a dictionary trained (and tuned) on the same
// kind of documents: 700-byte JSON readings, and 1 KiB series of random
// numbers.
func BenchmarkEncode(b *testing.B) {
	for _, kind := range []struct {
		name string
		doc  func(int) []byte
	}{{"reading", reading}, {"series", series}} {
		_, raw := train(b, docs(kind.doc, 1_000_000, 2000), 7)
		d, err := New(raw)
		if err != nil {
			b.Fatal(err)
		}
		values := docs(kind.doc, 0, 256)
		ref, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDict(raw),
			zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true), zstd.WithLowerEncoderMem(true))
		if err != nil {
			b.Fatal(err)
		}
		for _, enc := range []string{"zstdict", "general"} {
			b.Run(kind.name+"/"+enc, func(b *testing.B) {
				var buf []byte
				var in, out int
				b.SetBytes(int64(len(values[0])))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					v := values[i%len(values)]
					i++
					if enc == "zstdict" {
						buf, _ = d.Encode(buf[:0], v)
					} else {
						buf = ref.EncodeAll(v, buf[:0])
					}
					in += len(v)
					out += len(buf)
				}
				b.ReportMetric(float64(out)/float64(in), "stored/value")
			})
		}
		ref.Close()
	}
}

// Every literal and match length a sequence can have (under MaxValue: a
// match follows its literals) maps to the code whose baseline and extra
// bits cover it.
func TestLengthCodes(t *testing.T) {
	for n := uint32(0); n < MaxValue; n++ {
		if c := llCode(n); llBase[c] > n || n-llBase[c] >= 1<<llBits[c] {
			t.Fatalf("literal length %d: code %d covers %d+%d bits", n, c, llBase[c], llBits[c])
		}
		if c := mlCode(n); mlBase[c] > n || n-mlBase[c] >= 1<<mlBits[c] {
			t.Fatalf("match length %d (less 3): code %d covers %d+%d bits", n, c, mlBase[c], mlBits[c])
		}
	}
}

// A Dict compresses on many goroutines at once (its encoders are
// pooled); run under -race this also checks that nothing is shared.
func TestConcurrentEncode(t *testing.T) {
	d, dec, _ := setup(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var frame []byte
			for i := range 200 {
				v := reading(g*1000 + i)
				frame, _ = d.Encode(frame[:0], v)
				got, err := dec.DecodeAll(frame, nil)
				if err != nil || !bytes.Equal(got, v) {
					t.Errorf("goroutine %d, value %d: %d bytes back, %v", g, i, len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
}
