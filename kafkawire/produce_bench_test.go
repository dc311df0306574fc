package kafkawire_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
)

// BenchmarkProduce is korvet's produce path with franz-go in one process:
// 100-byte records (a 4-byte key and a 96-byte value, as
// scripts/bench-produce.sh sends) to one partition, 20,000 per op. Its
// allocs/op count the client's allocations too; the figures to watch are
// records/s and, with -memprofile, what korvet's own functions allocate.
//
//	go test ./kafkawire -run '^$' -bench 'Produce$' -benchtime 20x -memprofile mem.out
func BenchmarkProduce(b *testing.B) {
	br := startBroker(b, engine.Options{})
	if _, err := br.admin().CreateTopic(ctxT(b, 10*time.Second), 1, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	cl := br.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	value := make([]byte, 96)
	const perOp = 20000
	recs := make([]kgo.Record, perOp)
	n := 0
	start := time.Now()
	for b.Loop() {
		var failed atomic.Value
		for i := range recs {
			recs[i] = kgo.Record{Topic: "bench", Key: []byte("k001"), Value: value}
			cl.Produce(context.Background(), &recs[i], func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Store(err)
				}
			})
		}
		if err := cl.Flush(ctxT(b, time.Minute)); err != nil {
			b.Fatal(err)
		}
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		n += perOp
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
}
