package cold

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/engine/record"
)

// BenchmarkSegmentWriterTyped measures writing records with typed columns
// (decoding excluded: Decode hands out one decoded value) next to the same
// records without them, per record.
func BenchmarkSegmentWriterTyped(b *testing.B) {
	typed := testTyped(false)
	var v any
	{
		d := json.NewDecoder(strings.NewReader(typedValues[0]))
		d.UseNumber()
		var x any
		if err := d.Decode(&x); err != nil {
			b.Fatal(err)
		}
		v = fromJSON(x, typed.Shape)
	}
	typed.Decode = func([]byte) (any, bool) { return v, true }
	id := 100
	ft, err := icebergTypeOf(typed.Shape, func() int { id++; return id }, 0)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := newTypedPlan(typed, iceberg.NestedField{ID: 99, Name: valueFieldsName, Type: ft})
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(i), Timestamp: int64(i), Key: []byte("key"), Value: []byte(typedValues[0])}
	}
	codec := &zstd.Codec{Level: zstd.SpeedFastest}
	for _, c := range []struct {
		name string
		p    *typedPlan
	}{{"raw", nil}, {"typed", plan}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sc, cols, tw := segmentSchema(), fileColumns{}, (*typedWriter)(nil)
				if c.p != nil {
					sc, cols, tw = c.p.schema, c.p.cols, c.p.writer
				}
				if c.p == nil {
					cols, _ = columnsOf(sc)
				}
				sw := newSegmentWriter(io.Discard, sc, cols, tw, codec, SegmentRef{Topic: "t"}, 256<<10, 8<<10)
				for i := 0; i < len(recs); i += 100 {
					if err := sw.write(recs[i:i+100], nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := sw.close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
		})
	}
}
