package txn

import (
	"testing"
	"time"
)

// BenchmarkTransaction is the coordinator's cost of one transaction on
// real Redis: AddPartitions (the first produce's), EndTxn, and the
// completion to CompleteCommit, with markers and offsets faked. A
// producer's next transaction waits for that completion
// (CONCURRENT_TRANSACTIONS), so this is the per-transaction overhead
// added to the produce time.
func BenchmarkTransaction(b *testing.B) {
	bed := newBed(b)
	c := bed.open(Options{})
	pid, epoch, err := c.InitProducerID(ctx, InitRequest{ID: "bench", TimeoutMs: 60000, ProducerID: -1, Epoch: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := c.AddPartitions(ctx, "bench", pid, epoch, []TopicPartition{tp0}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.EndTxn(ctx, "bench", pid, epoch, true, false); err != nil {
			b.Fatal(err)
		}
		for {
			e := c.txns["bench"]
			e.mu.Lock()
			done := e.rec.State == CompleteCommit
			e.mu.Unlock()
			if done {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
}
