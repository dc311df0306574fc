package kafkawire_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
)

// BenchmarkShareConsume measures one franz-go share consumer accepting
// 20000 records of a 4-partition topic (each iteration a new share
// group): records/s through acquisition (XREADGROUP in a script),
// delivery and acknowledgement (XACK).
func BenchmarkShareConsume(b *testing.B) {
	const n = 20000
	br := startBroker(b, engine.Options{AutoCreateTopics: true})
	if _, err := br.admin().CreateTopic(ctxT(b, 10*time.Second), 4, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "bench", Value: []byte("record-" + strconv.Itoa(i))})
	}
	produceAll(b, br.client(), recs)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		group := "bench-" + strconv.Itoa(i)
		if err := br.eng.IncrementalAlterGroupConfigs(context.Background(), group, []engine.ConfigOp{{Name: "share.auto.offset.reset", Value: "earliest"}}, false); err != nil {
			b.Fatal(err)
		}
		cl := br.client(kgo.ShareGroup(group), kgo.ConsumeTopics("bench"), kgo.ShareMaxRecords(1000))
		ctx := ctxT(b, time.Minute)
		got := 0
		for got < n && ctx.Err() == nil {
			got += cl.PollFetches(ctx).NumRecords()
		}
		if err := cl.FlushAcks(ctx); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		if got < n {
			b.Fatalf("consumed %d of %d", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
