package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// BenchmarkTxnAppend compares an idempotent producer's appends with a
// transactional one's, one transaction per 1,000 and per 100 records
// (each ended with a commit marker after its batches are in), in one run:
// batches of 10 records of 100 bytes, up to 5 in flight as a client keeps
// them. Reported: records/s; compare the sub-benchmarks' ratio.
func BenchmarkTxnAppend(b *testing.B) {
	r := testbed.StartRedis(b)
	e, _ := enginetest.Open(b, r, engine.Options{})
	ctx := context.Background()
	const perBatch, inFlight = 10, 5
	value := make([]byte, 100)
	topics := 0
	for _, c := range []struct {
		name  string
		txn   bool
		perTx int // records per transaction
	}{{"idempotent", false, 0}, {"txn-per-1000", true, 1000}, {"txn-per-100", true, 100}} {
		b.Run(c.name, func(b *testing.B) {
			topics++
			tp, err := e.CreateTopic(ctx, fmt.Sprintf("bench-%s-%d", c.name, topics), 1, map[string]string{"retention.ms": "-1"}, false)
			if err != nil {
				b.Fatal(err)
			}
			p := tp.Partition(0)
			pid, _ := e.NewProducerID(ctx)
			prod := engine.Producer{ID: pid, Transactional: c.txn, TransactionalID: "bench"}
			var pend []*engine.Pending
			drain := func() {
				for _, pd := range pend {
					if _, _, err := pd.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				pend = pend[:0]
			}
			inTx := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				recs := make([]record.Record, perBatch)
				for j := range recs {
					recs[j] = record.Record{Timestamp: 1, Value: value}
				}
				pend = append(pend, p.AppendFrom(prod, recs))
				prod.FirstSeq += perBatch
				inTx += perBatch
				if len(pend) == inFlight {
					drain()
				}
				if c.txn && inTx >= c.perTx {
					drain() // the client flushes, then ends the transaction
					if _, err := p.WriteMarker(ctx, engine.Marker{ProducerID: pid, Commit: true}); err != nil {
						b.Fatal(err)
					}
					inTx = 0
				}
			}
			drain()
			b.StopTimer()
			b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
