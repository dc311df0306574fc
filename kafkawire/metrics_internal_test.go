package kafkawire

import (
	"testing"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/kafkawire/batch"
)

func TestBatchRecords(t *testing.T) {
	var b []byte
	for i, n := range []int{1, 7, 300} {
		recs := make([]record.Record, n)
		for j := range recs {
			recs[j] = record.Record{Offset: int64(1000*i + j), Value: []byte("v")}
		}
		var err error
		if b, err = batch.AppendBatch(b, recs, batch.BuildOptions{Compression: batch.Compression(i % 2)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := batchRecords(b); got != 308 {
		t.Errorf("three batches: %d records, want 308", got)
	}
	// A fetch response may end in a partial batch; it counts as none.
	if got := batchRecords(b[:len(b)-5]); got != 8 {
		t.Errorf("truncated last batch: %d records, want 8", got)
	}
	if got := batchRecords(nil); got != 0 {
		t.Errorf("no batches: %d", got)
	}
	legacy := append([]byte{}, b...)
	legacy[16] = 1 // a magic v1 message set is not walked
	if got := batchRecords(legacy); got != 0 {
		t.Errorf("magic 1: %d records, want 0", got)
	}
}
