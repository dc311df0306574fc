package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/record"
)

// codecCase is a codec as a client may send it: snappy comes raw or xerial
// framed, zstd in one frame stating its size or streamed in several that
// do not.
type codecCase struct {
	name    string
	codec   Compression
	variant bool // xerial snappy; zstd as a skippable frame and two streamed ones
}

var codecCases = []codecCase{
	{"none", None, false},
	{"gzip", Gzip, false},
	{"snappy", Snappy, false},
	{"snappy-xerial", Snappy, true},
	{"lz4", LZ4, false},
	{"zstd", Zstd, false},
	{"zstd-streamed", Zstd, true},
}

// sampleRecords covers the shapes that must survive a round trip: null and
// empty keys and values, duplicate headers, null and empty header values,
// negative and large timestamps, and gaps in offsets.
func sampleRecords() []record.Record {
	return []record.Record{
		{Offset: 100, Timestamp: 1_700_000_000_000, Key: []byte("k0"), Value: []byte("v0")},
		{Offset: 101, Timestamp: 1_700_000_000_001, Key: nil, Value: []byte("null key")},
		{Offset: 102, Timestamp: 1_700_000_000_002, Key: []byte{}, Value: []byte("empty key")},
		{Offset: 103, Timestamp: 1_700_000_000_003, Key: []byte("tombstone"), Value: nil},
		{Offset: 104, Timestamp: 1_700_000_000_004, Key: []byte("empty value"), Value: []byte{}},
		{Offset: 110, Timestamp: -5, Key: nil, Value: nil}, // gap, negative timestamp
		{Offset: 111, Timestamp: math.MaxInt64 / 2, Value: []byte("large ts"), Headers: []record.Header{
			{Key: []byte("dup"), Value: []byte("1")},
			{Key: []byte("dup"), Value: []byte("2")},
			{Key: []byte("null"), Value: nil},
			{Key: []byte("empty"), Value: []byte{}},
			{Key: []byte{}, Value: []byte("empty key")},
		}},
		{Offset: 1 << 20, Timestamp: math.MinInt64 / 2, Value: bytes.Repeat([]byte("big value "), 1000), Headers: []record.Header{
			{Key: []byte("h"), Value: []byte("x")},
		}},
	}
}

// manyRecords returns n records of about size bytes of value each,
// compressible like real payloads are.
func manyRecords(n, size int, base int64) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i+j*7)%36]
		}
		recs[i] = record.Record{
			Offset:    base + int64(i),
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     v,
		}
		if i%10 == 0 {
			recs[i].Headers = []record.Header{{Key: []byte("trace"), Value: fmt.Appendf(nil, "%d", i)}}
		}
	}
	return recs
}

// kmsgBatch builds a batch of recs with franz-go's kmsg types and the
// codec libraries directly, independently of this package's encoder.
func kmsgBatch(t testing.TB, recs []record.Record, cc codecCase, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	base, first := recs[0].Offset, recs[0].Timestamp
	maxTS := first
	var raw []byte
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
		kr := kmsg.Record{
			TimestampDelta64: r.Timestamp - first,
			OffsetDelta:      int32(r.Offset - base),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		// Length is the size of what follows it: encoded with Length 0
		// (one byte), the rest is that size.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	body := compressWith(t, raw, cc)
	kb := kmsg.RecordBatch{
		FirstOffset:          base,
		Length:               int32(49 + len(body)),
		PartitionLeaderEpoch: 7,
		Magic:                2,
		Attributes:           int16(cc.codec),
		LastOffsetDelta:      int32(recs[len(recs)-1].Offset - base),
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	b := kb.AppendTo(nil)
	return fixCRC(b)
}

// fixCRC recomputes the CRC of every whole batch in b, in place.
func fixCRC(b []byte) []byte {
	for off := 0; off+BatchHeaderSize <= len(b); {
		length := int64(int32(binary.BigEndian.Uint32(b[off+offLength:])))
		end := int64(off) + offLeaderEp + length
		if length < minBatchLength || end > int64(len(b)) {
			break
		}
		binary.BigEndian.PutUint32(b[off+offCRC:], crc32.Checksum(b[off+offAttributes:end], castagnoli))
		off = int(end)
	}
	return b
}

// compressWith compresses raw with the codec libraries, not our encoder.
func compressWith(t testing.TB, raw []byte, cc codecCase) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch cc.codec {
	case None:
		return raw
	case Gzip:
		w := gzip.NewWriter(&buf)
		must(t, write(w, raw))
		must(t, w.Close())
	case Snappy:
		if !cc.variant {
			return s2.EncodeSnappy(nil, raw)
		}
		buf.WriteString(xerialHeader)
		for src := raw; len(src) > 0; {
			n := min(len(src), 1000) // small blocks, to have several
			block := s2.EncodeSnappy(nil, src[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			src = src[n:]
		}
	case LZ4:
		w := lz4.NewWriter(&buf)
		must(t, write(w, raw))
		must(t, w.Close())
	case Zstd:
		w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		must(t, err)
		defer w.Close()
		if !cc.variant {
			return w.EncodeAll(raw, nil)
		}
		buf.Write([]byte{0x5a, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'}) // skippable
		half := len(raw) / 2
		for _, part := range [][]byte{raw[:half], raw[half:]} {
			w.Reset(&buf)
			must(t, write(w, part))
			must(t, w.Close())
		}
	}
	return buf.Bytes()
}

func write(w interface{ Write([]byte) (int, error) }, b []byte) error {
	_, err := w.Write(b)
	return err
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// kmsgRead parses one batch the way franz-go's consumer does: kmsg for
// the batch, the CRC over the attributes on, kgo's decompressor, and kmsg
// for each record. It returns the records with absolute offsets and
// timestamps.
func kmsgRead(t testing.TB, b []byte) (kmsg.RecordBatch, []record.Record, int) {
	t.Helper()
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg read: %v", err)
	}
	end := 12 + int(kb.Length)
	if crc := int32(crc32.Checksum(b[21:end], crc32.MakeTable(crc32.Castagnoli))); crc != kb.CRC {
		t.Fatalf("crc %#x, computed %#x", kb.CRC, crc)
	}
	if kb.Magic != 2 {
		t.Fatalf("magic %d", kb.Magic)
	}
	raw, err := kgo.DefaultDecompressor().Decompress(kb.Records, kgo.CompressionCodecType(kb.Attributes&7))
	if err != nil {
		t.Fatalf("kgo decompress: %v", err)
	}
	var recs []record.Record
	for len(raw) > 0 {
		l, n := binary.Varint(raw)
		if n <= 0 || int(l) > len(raw)-n {
			t.Fatalf("bad record length")
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(raw[:n+int(l)]); err != nil {
			t.Fatalf("kmsg record: %v", err)
		}
		raw = raw[n+int(l):]
		r := record.Record{
			Offset:    kb.FirstOffset + int64(kr.OffsetDelta),
			Timestamp: kb.FirstTimestamp + kr.TimestampDelta64,
			Key:       kr.Key,
			Value:     kr.Value,
		}
		for _, h := range kr.Headers {
			r.Headers = append(r.Headers, record.Header{Key: []byte(h.Key), Value: h.Value})
		}
		recs = append(recs, r)
	}
	if len(recs) != int(kb.NumRecords) {
		t.Fatalf("%d records, batch says %d", len(recs), kb.NumRecords)
	}
	return kb, recs, end
}

// sameBytes compares byte slices, nil (null) apart from empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func diffRecords(got, want []record.Record) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		switch {
		case g.Offset != w.Offset:
			return fmt.Errorf("record %d: offset %d, want %d", i, g.Offset, w.Offset)
		case g.Timestamp != w.Timestamp:
			return fmt.Errorf("record %d: timestamp %d, want %d", i, g.Timestamp, w.Timestamp)
		case !sameBytes(g.Key, w.Key):
			return fmt.Errorf("record %d: key %q (nil %v), want %q (nil %v)", i, g.Key, g.Key == nil, w.Key, w.Key == nil)
		case !sameBytes(g.Value, w.Value):
			return fmt.Errorf("record %d: value %.40q (nil %v), want %.40q (nil %v)", i, g.Value, g.Value == nil, w.Value, w.Value == nil)
		case len(g.Headers) != len(w.Headers):
			return fmt.Errorf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range g.Headers {
			gh, wh := g.Headers[j], w.Headers[j]
			if !bytes.Equal(gh.Key, wh.Key) || gh.Key == nil || !sameBytes(gh.Value, wh.Value) {
				return fmt.Errorf("record %d header %d: %q=%q (nil %v), want %q=%q (nil %v)",
					i, j, gh.Key, gh.Value, gh.Value == nil, wh.Key, wh.Value, wh.Value == nil)
			}
		}
	}
	return nil
}
