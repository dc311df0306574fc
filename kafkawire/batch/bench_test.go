package batch

import "testing"

// BenchmarkDecode decodes a batch of 1000 records of 100 byte values.
func BenchmarkDecode(b *testing.B) {
	recs := manyRecords(1000, 100, 0)
	for _, c := range []Compression{None, Zstd, LZ4, Snappy, Gzip} {
		b.Run(c.String(), func(b *testing.B) {
			in, err := AppendBatch(nil, recs, BuildOptions{Compression: c})
			if err != nil {
				b.Fatal(err)
			}
			var d Decoder
			var batches []Batch
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if batches, err = d.Decode(in, batches[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendBatch builds a batch of 1000 records of 100 byte values.
func BenchmarkAppendBatch(b *testing.B) {
	recs := manyRecords(1000, 100, 0)
	for _, c := range []Compression{None, Zstd, LZ4, Snappy, Gzip} {
		b.Run(c.String(), func(b *testing.B) {
			var e Encoder
			var out []byte
			var err error
			b.ReportAllocs()
			for b.Loop() {
				if out, err = e.AppendBatch(out[:0], recs, BuildOptions{Compression: c}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(out)))
		})
	}
	// The package function, creating its codec state each call.
	for _, c := range []Compression{None, Zstd} {
		b.Run(c.String()+"-fresh", func(b *testing.B) {
			var out []byte
			var err error
			b.ReportAllocs()
			for b.Loop() {
				if out, err = AppendBatch(out[:0], recs, BuildOptions{Compression: c}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
