package cold

import (
	"testing"

	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/korvet/korvet/engine/record"
)

// segmentWriterAllocs bounds the allocations of writing a segment file,
// per record: what parquet-go allocates per page and per row group, and
// nothing per record (0.09 now, for 100-byte values in 32 KiB pages).
const segmentWriterAllocs = 0.125

// TestSegmentWriterAllocs guards the archiving hot loop: records become
// column values without allocating.
func TestSegmentWriterAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	sc := segmentSchema()
	cols, err := columnsOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	codec := &zstd.Codec{Level: zstd.SpeedFastest}
	recs := randomRecords(0, 20000)
	for i := range recs {
		recs[i].Value = recs[i].Value[:100]
		if i%10 == 0 {
			recs[i].Headers = []record.Header{{Key: []byte("h"), Value: recs[i].Key}}
		}
	}
	txns := make([]record.Txn, len(recs))
	for i := range txns {
		txns[i] = record.Txn{ProducerID: int64(i % 3), Epoch: 1, Control: i%100 == 0}
	}
	var out countingWriter
	got := testing.AllocsPerRun(3, func() {
		sw := newSegmentWriter(&out, sc, cols, nil, codec, SegmentRef{Topic: "t"}, 256<<10, 32<<10)
		for i := 0; i < len(recs); i += 1000 {
			if err := sw.write(recs[i:i+1000], txns[i:i+1000]); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.close(); err != nil {
			t.Fatal(err)
		}
	}) / float64(len(recs))
	if got > segmentWriterAllocs {
		t.Errorf("%.3f allocations per record written, want at most %.3f", got, segmentWriterAllocs)
	}
	t.Logf("%.3f allocations per record", got)
}
