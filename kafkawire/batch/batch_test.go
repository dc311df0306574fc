package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/korvet/korvet/engine/record"
)

func TestDecodeKmsgBatches(t *testing.T) {
	for _, cc := range codecCases {
		t.Run(cc.name, func(t *testing.T) {
			for _, recs := range [][]record.Record{sampleRecords(), manyRecords(10_000, 50, 5_000_000)} {
				b := kmsgBatch(t, recs, cc, 42, 3, 17)
				var d Decoder
				batches, err := d.Decode(b, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(batches) != 1 {
					t.Fatalf("%d batches", len(batches))
				}
				bt := batches[0]
				maxTS := recs[0].Timestamp
				for _, r := range recs {
					maxTS = max(maxTS, r.Timestamp)
				}
				want := Batch{
					BaseOffset: recs[0].Offset, PartitionLeaderEpoch: 7, Attributes: int16(cc.codec),
					LastOffsetDelta: int32(recs[len(recs)-1].Offset - recs[0].Offset),
					FirstTimestamp:  recs[0].Timestamp, MaxTimestamp: maxTS,
					ProducerID: 42, ProducerEpoch: 3, BaseSequence: 17, NumRecords: int32(len(recs)),
				}
				got := bt
				got.Records = nil
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("batch\n got %+v\nwant %+v", got, want)
				}
				if bt.Compression() != cc.codec || bt.Transactional() || bt.Control() || bt.LogAppendTime() {
					t.Fatalf("attribute accessors wrong for %#x", bt.Attributes)
				}
				if err := diffRecords(bt.Records, recs); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestAppendBatchReadByKmsg(t *testing.T) {
	for _, cc := range codecCases {
		if cc.variant {
			continue // AppendBatch has one way per codec
		}
		t.Run(cc.name, func(t *testing.T) {
			for _, recs := range [][]record.Record{sampleRecords(), manyRecords(10_000, 50, 0)} {
				opts := BuildOptions{
					Compression: cc.codec, HasProducer: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 1234,
					Attributes: AttrTransactional, PartitionLeaderEpoch: 5,
				}
				prefix := []byte("prefix")
				b, err := AppendBatch(prefix, recs, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b[:len(prefix)], prefix) {
					t.Fatal("prefix clobbered")
				}
				kb, got, end := kmsgRead(t, b[len(prefix):])
				if end != len(b)-len(prefix) {
					t.Fatalf("batch length covers %d of %d bytes", end, len(b)-len(prefix))
				}
				maxTS := recs[0].Timestamp
				for _, r := range recs {
					maxTS = max(maxTS, r.Timestamp)
				}
				if kb.FirstOffset != recs[0].Offset || kb.PartitionLeaderEpoch != 5 ||
					kb.Attributes != int16(cc.codec)|AttrTransactional ||
					kb.LastOffsetDelta != int32(recs[len(recs)-1].Offset-recs[0].Offset) ||
					kb.FirstTimestamp != recs[0].Timestamp || kb.MaxTimestamp != maxTS ||
					kb.ProducerID != 9 || kb.ProducerEpoch != 2 || kb.FirstSequence != 1234 ||
					kb.NumRecords != int32(len(recs)) {
					t.Fatalf("batch header %+v", kb)
				}
				if err := diffRecords(got, recs); err != nil {
					t.Fatal(err)
				}
				if cc.codec == Snappy && !bytes.HasPrefix(kb.Records, []byte(xerialHeader)) {
					t.Fatal("snappy not xerial framed")
				}
			}
		})
	}
}

// TestAppendBatchMatchesKmsg: uncompressed, our batch is byte for byte the
// one kmsg builds.
func TestAppendBatchMatchesKmsg(t *testing.T) {
	for _, recs := range [][]record.Record{sampleRecords(), manyRecords(1000, 20, 77)} {
		want := kmsgBatch(t, recs, codecCases[0], 42, 3, 17)
		got, err := AppendBatch(nil, recs, BuildOptions{HasProducer: true, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 17, PartitionLeaderEpoch: 7})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("batches differ:\n got %x\nwant %x", got[:min(len(got), 100)], want[:min(len(want), 100)])
		}
	}
}

func TestAppendBatchDefaults(t *testing.T) {
	recs := sampleRecords()
	b, err := AppendBatch(nil, recs, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// -1s without the flag, as callers may spell "no producer", are fine.
	b2, err := AppendBatch(nil, recs, BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("explicit -1s: %v", err)
	}
	kb, _, _ := kmsgRead(t, b)
	if kb.ProducerID != -1 || kb.ProducerEpoch != -1 || kb.FirstSequence != -1 || kb.Attributes != 0 || kb.PartitionLeaderEpoch != 0 {
		t.Fatalf("defaults: %+v", kb)
	}
	// The size helper sizes an uncompressed batch exactly.
	n := BatchHeaderSize
	for i := range recs {
		n += RecordEncodedSize(&recs[i], int32(recs[i].Offset-recs[0].Offset), recs[i].Timestamp-recs[0].Timestamp)
	}
	if n != len(b) {
		t.Fatalf("sizes add to %d, batch is %d", n, len(b))
	}
}

func TestAppendBatchErrors(t *testing.T) {
	ok := []record.Record{{Offset: 1}, {Offset: 2}}
	cases := []struct {
		name string
		recs []record.Record
		opts BuildOptions
	}{
		{"empty", nil, BuildOptions{}},
		{"descending", []record.Record{{Offset: 2}, {Offset: 1}}, BuildOptions{}},
		{"duplicate", []record.Record{{Offset: 2}, {Offset: 2}}, BuildOptions{}},
		{"delta overflow", []record.Record{{Offset: 0}, {Offset: math.MaxInt32 + 1}}, BuildOptions{}},
		{"int64 overflow", []record.Record{{Offset: math.MinInt64}, {Offset: math.MaxInt64}}, BuildOptions{}},
		{"codec", ok, BuildOptions{Compression: 5}},
		{"codec bits", ok, BuildOptions{Attributes: 1}},
		{"producer without flag", ok, BuildOptions{ProducerID: 5}},
		{"sequence without flag", ok, BuildOptions{BaseSequence: 9}},
	}
	for _, c := range cases {
		dst := []byte("keep")
		got, err := AppendBatch(dst, c.recs, c.opts)
		if err == nil {
			t.Errorf("%s: no error", c.name)
		}
		if string(got) != "keep" {
			t.Errorf("%s: dst changed to %q", c.name, got)
		}
	}
}

// TestRoundTrip builds with AppendBatch and decodes with Decode: every
// codec, concatenated batches, a reused Decoder.
func TestRoundTrip(t *testing.T) {
	var e Encoder
	var d Decoder
	var all []byte
	var want [][]record.Record
	for i, cc := range codecCases {
		if cc.variant {
			continue
		}
		for _, recs := range [][]record.Record{sampleRecords(), manyRecords(10_000, 100, int64(i)*1_000_000)} {
			var err error
			one, err := e.AppendBatch(nil, recs, BuildOptions{Compression: cc.codec})
			if err != nil {
				t.Fatal(err)
			}
			batches, err := d.Decode(one, nil)
			if err != nil {
				t.Fatalf("%s: %v", cc.name, err)
			}
			if len(batches) != 1 || batches[0].Compression() != cc.codec {
				t.Fatalf("%s: %d batches", cc.name, len(batches))
			}
			if err := diffRecords(batches[0].Records, recs); err != nil {
				t.Fatalf("%s: %v", cc.name, err)
			}
			all = append(all, one...)
			want = append(want, recs)
		}
	}
	batches, err := d.Decode(all, make([]Batch, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != len(want) {
		t.Fatalf("%d batches, want %d", len(batches), len(want))
	}
	for i := range batches {
		if err := diffRecords(batches[i].Records, want[i]); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
}

// TestZeroCopy checks that decoded slices point into the input and are
// capped, so that appending to one cannot overwrite the next.
func TestZeroCopy(t *testing.T) {
	recs := sampleRecords()
	b, err := AppendBatch(nil, recs, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inside := func(s []byte) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(unsafe.Pointer(&b[0]))
		return p >= lo && p <= lo+uintptr(len(b))
	}
	var d Decoder
	batches, err := d.Decode(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := batches[0].Records
	if cap(rs) != len(rs) {
		t.Fatal("records not capped")
	}
	for i, r := range rs {
		for _, s := range [][]byte{r.Key, r.Value} {
			if s != nil && (!inside(s) || cap(s) != len(s)) {
				t.Fatalf("record %d: slice not in the input or not capped", i)
			}
		}
		if cap(r.Headers) != len(r.Headers) {
			t.Fatalf("record %d: headers not capped", i)
		}
		for _, h := range r.Headers {
			if !inside(h.Key) || (h.Value != nil && !inside(h.Value)) {
				t.Fatalf("record %d: header not in the input", i)
			}
		}
	}
	// An empty value at the very end of the input is still non-nil.
	last := []record.Record{{Offset: 0, Key: nil, Value: []byte{}}}
	b, _ = AppendBatch(nil, last, BuildOptions{})
	b = b[:len(b):len(b)]
	batches, err = d.Decode(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := batches[0].Records[0].Value; v == nil || len(v) != 0 {
		t.Fatalf("value %v (nil %v)", v, v == nil)
	}
}

func TestEmptyInput(t *testing.T) {
	var d Decoder
	batches, err := d.Decode(nil, nil)
	if err != nil || len(batches) != 0 {
		t.Fatalf("%v, %d batches", err, len(batches))
	}
}

func TestAttributes(t *testing.T) {
	b, err := AppendBatch(nil, sampleRecords(), BuildOptions{Attributes: AttrTransactional | AttrControl | AttrLogAppendTime})
	if err != nil {
		t.Fatal(err)
	}
	var d Decoder
	batches, err := d.Decode(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	bt := &batches[0]
	if !bt.Transactional() || !bt.Control() || !bt.LogAppendTime() || bt.Compression() != None {
		t.Fatalf("attributes %#x", bt.Attributes)
	}
}

// TestEmptyBatch: Kafka's compaction can leave a batch of no records.
func TestEmptyBatch(t *testing.T) {
	b := make([]byte, BatchHeaderSize)
	binary.BigEndian.PutUint32(b[offLength:], minBatchLength)
	b[offMagic] = 2
	fixCRC(b)
	var d Decoder
	batches, err := d.Decode(b, nil)
	if err != nil || len(batches) != 1 || len(batches[0].Records) != 0 {
		t.Fatalf("%v %+v", err, batches)
	}
	// But not with bytes after its no records.
	b2 := append(bytes.Clone(b), 0)
	binary.BigEndian.PutUint32(b2[offLength:], minBatchLength+1)
	fixCRC(b2)
	if _, err := d.Decode(b2, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestDecoderReuse(t *testing.T) {
	var d Decoder
	b1, _ := AppendBatch(nil, manyRecords(100, 10, 0), BuildOptions{Compression: Zstd})
	b2, _ := AppendBatch(nil, manyRecords(50, 10, 500), BuildOptions{Compression: Gzip})
	for range 3 {
		got, err := d.Decode(append(bytes.Clone(b1), b2...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := diffRecords(got[0].Records, manyRecords(100, 10, 0)); err != nil {
			t.Fatal(err)
		}
		if err := diffRecords(got[1].Records, manyRecords(50, 10, 500)); err != nil {
			t.Fatal(err)
		}
	}
}
