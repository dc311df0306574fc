package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/record"
)

// rawBatch wraps hand-written record bytes in a valid batch header.
func rawBatch(recs []byte, n int32, attrs int16) []byte {
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(recs))
	binary.BigEndian.PutUint32(b[offLength:], uint32(minBatchLength+len(recs)))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offNumRecords:], uint32(n))
	return fixCRC(append(b, recs...))
}

// rec hand-encodes one record from its fields, each already encoded.
func rec(fields ...[]byte) []byte {
	body := bytes.Join(fields, nil)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

func vi(v int64) []byte { return binary.AppendVarint(nil, v) }

func TestCorruptBatches(t *testing.T) {
	good := rec([]byte{0}, vi(0), vi(0), vi(1), []byte("k"), vi(1), []byte("v"), vi(0))
	mustDecode := func(b []byte) {
		t.Helper()
		var d Decoder
		if _, err := d.Decode(b, nil); err != nil {
			t.Fatalf("control case: %v", err)
		}
	}
	mustDecode(rawBatch(good, 1, 0))

	valid, _ := AppendBatch(nil, sampleRecords(), BuildOptions{})
	flip := func(i int) []byte { b := bytes.Clone(valid); b[i] ^= 1; return b }
	withHeader := func(off int, v uint32, size int) []byte {
		b := bytes.Clone(valid)
		if size == 4 {
			binary.BigEndian.PutUint32(b[off:], v)
		} else {
			b[off] = byte(v)
		}
		return fixCRC(b)
	}
	overflow := bytes.Repeat([]byte{0xff}, 10)
	overflow = append(overflow, 0x01)

	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"crc field flipped", flip(offCRC + 2), ErrCorrupt},
		{"attributes flipped", flip(offAttributes + 1), ErrCorrupt},
		{"record byte flipped", flip(len(valid) - 3), ErrCorrupt},
		{"magic 0", withHeader(offMagic, 0, 1), ErrUnsupported},
		{"magic 1", withHeader(offMagic, 1, 1), ErrUnsupported},
		{"magic 3", withHeader(offMagic, 3, 1), ErrCorrupt},
		{"length too small", withHeader(offLength, 48, 4), ErrCorrupt},
		{"length negative", withHeader(offLength, math.MaxUint32, 4), ErrCorrupt},
		{"length overruns", withHeader(offLength, uint32(len(valid)-11), 4), ErrCorrupt},
		{"count negative", withHeader(offNumRecords, math.MaxUint32, 4), ErrCorrupt},
		{"count huge", withHeader(offNumRecords, math.MaxInt32, 4), ErrCorrupt},
		{"count one more", rawBatch(good, 2, 0), ErrCorrupt},
		{"count one fewer", rawBatch(append(bytes.Clone(good), good...), 1, 0), ErrCorrupt},
		{"records overrun batch", rawBatch(good[:len(good)-1], 1, 0), ErrCorrupt},
		{"codec 5", rawBatch(good, 1, 5), ErrUnsupported},
		{"codec 7", rawBatch(good, 1, 7), ErrUnsupported},
		{"key length -2", rawBatch(rec([]byte{0}, vi(0), vi(0), vi(-2), vi(0), vi(0)), 1, 0), ErrCorrupt},
		{"value length overruns", rawBatch(rec([]byte{0}, vi(0), vi(0), vi(-1), vi(50), vi(0)), 1, 0), ErrCorrupt},
		{"header count -1", rawBatch(rec([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(-1)), 1, 0), ErrCorrupt},
		{"header count huge", rawBatch(rec([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(math.MaxInt32)), 1, 0), ErrCorrupt},
		{"header key null", rawBatch(rec([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(-1), vi(-1)), 1, 0), ErrCorrupt},
		{"header value -3", rawBatch(rec([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(0), vi(-3)), 1, 0), ErrCorrupt},
		{"timestamp varint overflow", rawBatch(rec([]byte{0}, overflow, vi(0), vi(-1), vi(-1), vi(0)), 1, 0), ErrCorrupt},
		{"offset delta beyond int32", rawBatch(rec([]byte{0}, vi(0), vi(1<<40), vi(-1), vi(-1), vi(0)), 1, 0), ErrCorrupt},
		{"record length negative", rawBatch(append(vi(-5), make([]byte, 10)...), 1, 0), ErrCorrupt},
		{"record length overruns", rawBatch(append(vi(100), good[1:]...), 1, 0), ErrCorrupt},
		{"fields overrun record", rawBatch(append(vi(int64(len(good)-2)), good[1:]...), 1, 0), ErrCorrupt},
		{"bytes after fields", rawBatch(append(append(vi(int64(len(good))), good[1:]...), 0), 1, 0), ErrCorrupt},
		{"empty record", rawBatch(append(vi(0), make([]byte, 6)...), 1, 0), ErrCorrupt},
		{"truncated header", valid[:20], ErrCorrupt},
	}
	for _, c := range cases {
		var d Decoder
		dst := []Batch{{BaseOffset: 77}}
		got, err := d.Decode(c.b, dst)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
			continue
		}
		if len(got) != 1 || got[0].BaseOffset != 77 {
			t.Errorf("%s: dst not returned as given", c.name)
		}
		t.Logf("%s: %v", c.name, err)
	}
}

func TestCorruptCompressedPayloads(t *testing.T) {
	raw := rec([]byte{0}, vi(0), vi(0), vi(1), []byte("k"), vi(1), []byte("v"), vi(0))
	for _, cc := range codecCases {
		if cc.codec == None {
			continue
		}
		body := compressWith(t, raw, cc)
		var d Decoder
		if _, err := d.Decode(rawBatch(body, 1, int16(cc.codec)), nil); err != nil {
			t.Fatalf("%s: control case: %v", cc.name, err)
		}
		bad := map[string][]byte{
			"empty":    nil,
			"garbage":  []byte("this is not compressed at all, not in any codec"),
			"trailing": append(bytes.Clone(body), "junk"...),
		}
		for i := 1; i < len(body); i++ {
			if _, err := d.Decode(rawBatch(body[:i], 1, int16(cc.codec)), nil); err == nil {
				t.Errorf("%s: payload truncated to %d bytes decoded", cc.name, i)
			}
		}
		for name, b := range bad {
			_, err := d.Decode(rawBatch(b, 1, int16(cc.codec)), nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s %s: %v", cc.name, name, err)
			}
		}
	}
}

// TestTruncated cuts valid input at every byte: never a panic, always an
// error.
func TestTruncated(t *testing.T) {
	recs := sampleRecords()[:7] // small: every byte position
	for _, cc := range codecCases {
		one := kmsgBatch(t, recs, cc, -1, -1, -1)
		two := append(bytes.Clone(one), one...)
		var d Decoder
		for i := 1; i < len(two); i++ {
			if i == len(one) {
				continue // a whole batch
			}
			if _, err := d.Decode(two[:i], nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: truncated to %d of %d bytes: %v", cc.name, i, len(two), err)
			}
		}
	}
}

// TestDecompressionBombs decompresses 100 MB of zeros under a 1 MB bound:
// ErrTooLarge, without allocating anywhere near the 100 MB.
func TestDecompressionBombs(t *testing.T) {
	const total, chunk = 100 << 20, 1 << 20
	zeros := make([]byte, chunk)
	stream := func(w interface {
		Write([]byte) (int, error)
		Close() error
	}) {
		for range total / chunk {
			must(t, write(w, zeros))
		}
		must(t, w.Close())
	}
	type bomb struct {
		codec Compression
		body  []byte
	}
	bombs := map[string]bomb{}
	{
		var buf bytes.Buffer
		stream(gzip.NewWriter(&buf))
		bombs["gzip"] = bomb{Gzip, buf.Bytes()}
	}
	{
		var buf bytes.Buffer
		stream(lz4.NewWriter(&buf))
		bombs["lz4"] = bomb{LZ4, buf.Bytes()}
	}
	for _, withSize := range []bool{false, true} {
		var buf bytes.Buffer
		w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		must(t, err)
		name := "zstd-streamed"
		if withSize {
			w.ResetContentSize(&buf, total)
			name = "zstd-sized"
		} else {
			w.Reset(&buf)
		}
		stream(w)
		bombs[name] = bomb{Zstd, buf.Bytes()}
	}
	{
		// A raw block claiming 100 MB, and xerial blocks of 32 KB adding
		// up to 100 MB.
		claim := binary.AppendUvarint(nil, total)
		bombs["snappy"] = bomb{Snappy, append(claim, s2.EncodeSnappy(nil, zeros[:1000])[2:]...)}
		block := s2.EncodeSnappy(nil, zeros[:xerialBlockSize])
		x := []byte(xerialHeader)
		for range total / xerialBlockSize {
			x = binary.BigEndian.AppendUint32(x, uint32(len(block)))
			x = append(x, block...)
		}
		bombs["snappy-xerial"] = bomb{Snappy, x}
	}
	for name, bomb := range bombs {
		b := rawBatch(bomb.body, 1, int16(bomb.codec))
		d := Decoder{MaxDecompressed: 1 << 20}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := d.Decode(b, nil)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s (%d bytes): %v", name, len(bomb.body), err)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		if alloc > 16<<20 {
			t.Errorf("%s: allocated %d MB", name, alloc>>20)
		}
		t.Logf("%s: %d byte payload, %d KB allocated: %v", name, len(bomb.body), alloc>>10, err)
	}
}

// TestBoundCoversTheCall: the bound is on everything one call
// decompresses, not per batch.
func TestBoundCoversTheCall(t *testing.T) {
	recs := manyRecords(600, 1000, 0) // ~600 KB decompressed
	for _, cc := range codecCases {
		if cc.codec == None {
			continue
		}
		one := kmsgBatch(t, recs, cc, -1, -1, -1)
		d := Decoder{MaxDecompressed: 1 << 20}
		if _, err := d.Decode(one, nil); err != nil {
			t.Fatalf("%s: one batch: %v", cc.name, err)
		}
		// Decompressed tells what the call took of the bound: the
		// records' bytes, which are at least their keys and values.
		if n := d.Decompressed(); n < 600*1000 || n > 1<<20 {
			t.Fatalf("%s: Decompressed() = %d after ~600 KB of records", cc.name, n)
		}
		if _, err := d.Decode(append(bytes.Clone(one), one...), nil); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: two batches: %v", cc.name, err)
		}
		// And the Decoder recovers.
		got, err := d.Decode(one, nil)
		if err != nil {
			t.Fatalf("%s: after the error: %v", cc.name, err)
		}
		if err := diffRecords(got[0].Records, recs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestZstdWindowNotBounded: a frame declaring a window larger than the
// bound but decoding within it is fine (Java producers declare windows of
// 2 MB and up for small batches).
func TestZstdWindowNotBounded(t *testing.T) {
	raw := rec([]byte{0}, vi(0), vi(0), vi(1), []byte("k"), vi(1), []byte("v"), vi(0))
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	must(t, err)
	must(t, write(w, raw))
	must(t, w.Close())
	frame := buf.Bytes()
	var h zstd.Header
	must(t, h.Decode(frame))
	if h.SingleSegment || h.HasFCS || h.DictionaryID != 0 {
		t.Fatalf("want a streamed frame, got %+v", h)
	}
	frame[5] = (23 - 10) << 3 // window descriptor: 8 MB
	must(t, h.Decode(frame))
	if h.WindowSize != 8<<20 {
		t.Fatalf("window %d", h.WindowSize)
	}
	d := Decoder{MaxDecompressed: 64 << 10}
	got, err := d.Decode(rawBatch(frame, 1, int16(Zstd)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[0].Records[0].Value) != "v" {
		t.Fatal("wrong value")
	}
}

// TestSnappyFalseClaim: a raw snappy block claiming more than snappy can
// encode in its size is corrupt, and sizes no buffer.
func TestSnappyFalseClaim(t *testing.T) {
	body := append(binary.AppendUvarint(nil, 10<<20), make([]byte, 30)...)
	var d Decoder
	if _, err := d.Decode(rawBatch(body, 1, int16(Snappy)), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	if cap(d.buf) != 0 {
		t.Fatalf("buffer grew to %d", cap(d.buf))
	}
}

// TestBuffersShrink: after an outsized call, a Decoder does not keep its
// buffers.
func TestBuffersShrink(t *testing.T) {
	var d Decoder
	big, _ := AppendBatch(nil, manyRecords(50_000, 100, 0), BuildOptions{Compression: Zstd})
	small, _ := AppendBatch(nil, manyRecords(10, 100, 0), BuildOptions{Compression: Zstd})
	if _, err := d.Decode(big, nil); err != nil {
		t.Fatal(err)
	}
	bigCap := cap(d.buf)
	for range 2 {
		if _, err := d.Decode(small, nil); err != nil {
			t.Fatal(err)
		}
	}
	if cap(d.buf) >= bigCap || cap(d.recs) >= 50_000 {
		t.Fatalf("buffers kept: %d bytes (was %d), %d records", cap(d.buf), bigCap, cap(d.recs))
	}
}

// TestBombAfterBombReusesTheBuffer: a bomb fills the buffer up to the
// bound and fails; the next one reuses that buffer instead of allocating
// the bound again, so a stream of them costs korvet the bound once.
func TestBombAfterBombReusesTheBuffer(t *testing.T) {
	const bound = 4 << 20
	var raw bytes.Buffer
	w, err := zstd.NewWriter(&raw, zstd.WithEncoderConcurrency(1))
	must(t, err)
	must(t, write(w, make([]byte, 64<<20)))
	must(t, w.Close())
	b := rawBatch(raw.Bytes(), 1, int16(Zstd))
	d := Decoder{MaxDecompressed: bound}
	if _, err := d.Decode(b, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("first bomb: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := d.Decode(b, nil); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("bomb: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("10 more bombs of %d bytes under a %d MiB bound: %d KB allocated", len(b), bound>>20, alloc>>10)
	if alloc > bound {
		t.Fatalf("10 more bombs allocated %d MiB: the buffer is not reused", alloc>>20)
	}
	// A small call after them lets the big buffer go, as before.
	small := kmsgBatch(t, manyRecords(10, 100, 0), codecCase{name: "zstd", codec: Zstd}, -1, -1, -1)
	if _, err := d.Decode(small, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(small, nil); err != nil || cap(d.buf) >= bound {
		t.Fatalf("after small calls: %v, buffer of %d bytes kept", err, cap(d.buf))
	}
}

// TestZstdCappedButFits: frames that could inflate past the bound (their
// blocks' sizes say so) but do not are counted, then decoded exactly.
func TestZstdCappedButFits(t *testing.T) {
	recs := manyRecords(40, 200, 0) // ~10 KB
	for i := range recs {
		recs[i].Timestamp = int64(i) // rawBatch's batch starts at 0
	}
	var raw []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.Timestamp - recs[0].Timestamp, OffsetDelta: int32(r.Offset), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	// Forty streamed frames (no content size), one compressed block each:
	// up to 40 x 128 KiB as far as the headers tell, 10 KB in fact.
	var body bytes.Buffer
	w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	must(t, err)
	per := len(raw) / 40
	for i := range 40 {
		end := (i + 1) * per
		if i == 39 {
			end = len(raw)
		}
		w.Reset(&body)
		must(t, write(w, raw[i*per:end]))
		must(t, w.Close())
	}
	most, err := zstdSize(body.Bytes(), 1<<20)
	if err != nil || most <= 1<<20 {
		t.Fatalf("zstdSize = %d, %v; the test needs more than the 1 MiB bound", most, err)
	}
	b := fixCRC(rawBatch(body.Bytes(), int32(len(recs)), int16(Zstd)))
	d := Decoder{MaxDecompressed: 1 << 20}
	got, err := d.Decode(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffRecords(got[0].Records, recs); err != nil {
		t.Fatal(err)
	}
	if d.Decompressed() != len(raw) {
		t.Fatalf("Decompressed() = %d, want %d", d.Decompressed(), len(raw))
	}
}

// TestStreamingCodecsUnderALargeBound: under a 64 MiB bound, a gzip or
// lz4 payload inflating far beyond its size is counted rather than kept
// once past eagerRatio times its size: a bomb costs little, and highly
// compressible data that fits is decoded right (a second time).
func TestStreamingCodecsUnderALargeBound(t *testing.T) {
	const bound = 64 << 20
	fits := manyRecords(2, 4<<20, 0) // 8 MiB of a repeating pattern
	for _, cc := range []codecCase{{name: "gzip", codec: Gzip}, {name: "lz4", codec: LZ4}} {
		d := Decoder{MaxDecompressed: bound}
		b := kmsgBatch(t, fits, cc, -1, -1, -1)
		got, err := d.Decode(b, nil)
		if err != nil {
			t.Fatalf("%s: %d bytes inflating to 8 MiB: %v", cc.name, len(b), err)
		}
		if err := diffRecords(got[0].Records, fits); err != nil {
			t.Fatalf("%s: %v", cc.name, err)
		}
		raw := make([]byte, 100<<20)
		bomb := kmsgBatch(t, []record.Record{{Value: raw}}, cc, -1, -1, -1)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err = d.Decode(bomb, nil)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s bomb: %v", cc.name, err)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes inflating to 8 MiB decoded; a %d byte bomb of 100 MiB refused with %d KB allocated", cc.name, len(b), len(bomb), alloc>>10)
		// What is kept is at most eagerRatio times what was sent, plus
		// the codec's own buffers (lz4 reads 4 MB blocks).
		if limit := uint64(eagerRatio*len(bomb) + 8<<20); alloc > limit {
			t.Errorf("%s bomb under a %d MiB bound allocated %d MiB, more than %d MiB", cc.name, bound>>20, alloc>>20, limit>>20)
		}
	}
}
