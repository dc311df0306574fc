package entry

import "testing"

// Encoding a record allocates nothing once the Encoder is warm (the append
// path encodes every record). AllocsPerRun counts, it does not time.
func TestEncodeAllocs(t *testing.T) {
	for name, r := range benchRecords() {
		var e Encoder
		var w discard
		got := testing.AllocsPerRun(100, func() {
			e.Prepare(r)
			e.Append(&w)
		})
		if got > 0 {
			t.Errorf("%s: %.1f allocations per encode, want 0", name, got)
		}
	}
}
