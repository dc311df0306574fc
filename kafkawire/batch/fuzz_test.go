package batch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// FuzzDecode decodes arbitrary input, as given and with its CRCs fixed so
// that mutations reach the codecs and the record parser. Decoding must
// never panic and only fail with the package's errors; what decodes must
// build again into batches that decode to the same records.
//
// The seed corpus, testdata/fuzz/FuzzDecode, is written by
// TestWriteFuzzCorpus.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		d := Decoder{MaxDecompressed: 4 << 20}
		for _, in := range [][]byte{data, fixCRC(bytes.Clone(data))} {
			batches, err := d.Decode(in, nil)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("unexpected error: %v", err)
				}
				continue
			}
			for i := range batches {
				if err := checkReencode(&batches[i]); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
		}
	})
}

// checkReencode builds bt's records into a batch of the same options and
// decodes that.
func checkReencode(bt *Batch) error {
	recs := bt.Records
	if len(recs) != int(bt.NumRecords) {
		return fmt.Errorf("%d records, batch says %d", len(recs), bt.NumRecords)
	}
	if len(recs) == 0 {
		return nil
	}
	opts := BuildOptions{
		Compression: bt.Compression(), HasProducer: true,
		ProducerID: bt.ProducerID, ProducerEpoch: bt.ProducerEpoch, BaseSequence: bt.BaseSequence,
		Attributes: bt.Attributes &^ AttrCompressionMask, PartitionLeaderEpoch: bt.PartitionLeaderEpoch,
	}
	b, err := AppendBatch(nil, recs, opts)
	if err != nil {
		// Only a producer's offsets can stop a rebuild: AppendBatch needs
		// them ascending and within an int32 of the first.
		for i := 1; i < len(recs); i++ {
			if d := recs[i].Offset - recs[0].Offset; recs[i].Offset <= recs[i-1].Offset || d < 0 || d > 1<<31-1 {
				return nil
			}
		}
		return fmt.Errorf("rebuilding: %v", err)
	}
	var d Decoder
	got, err := d.Decode(b, nil)
	if err != nil {
		return fmt.Errorf("decoding the rebuilt batch: %v", err)
	}
	if len(got) != 1 {
		return fmt.Errorf("rebuilt into %d batches", len(got))
	}
	g := got[0]
	maxTS := recs[0].Timestamp
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
	}
	want := *bt
	want.BaseOffset, want.FirstTimestamp, want.MaxTimestamp = recs[0].Offset, recs[0].Timestamp, maxTS
	want.LastOffsetDelta = int32(recs[len(recs)-1].Offset - recs[0].Offset)
	want.Records, g.Records = nil, nil
	if !reflect.DeepEqual(g, want) {
		return fmt.Errorf("rebuilt batch\n got %+v\nwant %+v", g, want)
	}
	return diffRecords(got[0].Records, recs)
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzDecode, a valid batch
// per codec, when RECORDS_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("RECORDS_WRITE_CORPUS") == "" {
		t.Skip("set RECORDS_WRITE_CORPUS=1 to regenerate the fuzz corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	must(t, os.MkdirAll(dir, 0o755))
	recs := sampleRecords()[:7]
	for _, cc := range codecCases {
		b := kmsgBatch(t, recs, cc, 1, 2, 3)
		if cc.name == "zstd" { // and one of two batches
			b = append(b, kmsgBatch(t, []record.Record{{Offset: 5, Value: []byte("x")}}, codecCases[0], -1, -1, -1)...)
		}
		must(t, os.WriteFile(filepath.Join(dir, cc.name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644))
	}
}
