package entry

import (
	"bytes"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// discard is a Writer that only counts, like a pipeline copying into a
// buffer would, without allocating.
type discard struct{ n int }

func (w *discard) Bulk(b []byte)   { w.n += len(b) }
func (w *discard) String(s string) { w.n += len(s) }

func benchRecords() map[string]*record.Record {
	doc := []byte(`{"id":123456789,"user":"alice@example.com","event":"checkout","amount":1299.95,` +
		`"currency":"EUR","country":"DE","session":"s-42","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"ok":true,"note":null}`)
	// The same document as Python's json.dumps writes it by default.
	spaced := []byte(`{"id": 123456789, "user": "alice@example.com", "event": "checkout", "amount": 1299.95, ` +
		`"currency": "EUR", "country": "DE", "session": "s-42", "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "ok": true, "note": null}`)
	hdrs := []record.Header{{Key: []byte("trace-id"), Value: []byte("4bf92f3577b34da6")}, {Key: []byte("source"), Value: nil}}
	return map[string]*record.Record{
		"binary100":  {Timestamp: 1700000000000, Key: []byte("key-00001"), Value: bytes.Repeat([]byte{0xab}, 100), Headers: hdrs},
		"json200":    {Timestamp: 1700000000000, Key: []byte("key-00001"), Value: doc, Headers: hdrs},
		"jsonspaced": {Timestamp: 1700000000000, Key: []byte("key-00001"), Value: spaced, Headers: hdrs},
	}
}

func BenchmarkEncode(b *testing.B) {
	for name, r := range benchRecords() {
		b.Run(name, func(b *testing.B) {
			var e Encoder
			var w discard
			b.ReportAllocs()
			b.SetBytes(int64(len(r.Value)))
			for b.Loop() {
				e.Prepare(r)
				e.Append(&w)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for name, r := range benchRecords() {
		b.Run(name, func(b *testing.B) {
			var e Encoder
			fields := encode(b, &e, r)
			var d Decoder
			var rec record.Record
			b.ReportAllocs()
			b.SetBytes(int64(len(r.Value)))
			for b.Loop() {
				d.Reset()
				d.Begin()
				for i := 0; i < len(fields); i += 2 {
					d.Field(fields[i], fields[i+1])
				}
				if err := d.Finish(&rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeManyMembers covers the sorted uniqueness check.
func BenchmarkEncodeManyMembers(b *testing.B) {
	v := []byte{'{'}
	for i := range 50 {
		if i > 0 {
			v = append(v, ',')
		}
		v = append(v, '"', 'k', byte('a'+i/26), byte('a'+i%26), '"', ':', '1')
	}
	v = append(v, '}')
	r := &record.Record{Value: v}
	var e Encoder
	var w discard
	if e.Prepare(r) != 51 {
		b.Fatal("not flattened")
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Prepare(r)
		e.Append(&w)
	}
}
