package kafkawire_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/kafkawire/batch"
)

// TestMetrics produces and consumes through a server with metrics and
// checks the counts against what the clients saw.
func TestMetrics(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	eng, _ := enginetest.Open(t, testbed.StartRedis(t), engine.Options{AutoCreateTopics: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	m := kafkawire.NewMetrics(reg)
	srv := kafkawire.NewServer(eng, kafkawire.Options{AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port), Metrics: m, Logger: testbed.Logger()})
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, 5*time.Second) }()
	defer func() { stop(); <-done }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("metered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 250
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "metered", Value: []byte("some value")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		got += len(fs.Records())
	}
	// A produce to a partition that does not exist is not counted.
	recBatch, err := batch.AppendBatch(nil, []record.Record{{Value: []byte("x")}}, batch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "metered"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 5, recBatch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	pr, err := req.RequestWith(ctx, cl)
	if err != nil || pr.Topics[0].Partitions[0].ErrorCode == 0 {
		t.Fatalf("produce to a missing partition: %v, %+v; want an error code", err, pr)
	}

	// The fetch that returned the last records is counted once it is
	// written; a following long poll may still be in flight.
	deadline := time.Now().Add(5 * time.Second)
	for m.Totals().FetchedRecords < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	tot := m.Totals()
	if tot.ProducedRecords != n || tot.FetchedRecords != n || tot.Requests < 4 || tot.BytesIn <= 0 || tot.BytesOut <= 0 {
		t.Errorf("totals %+v, want %d produced and fetched", tot, n)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	series := map[string]*dto.Metric{}
	for _, f := range fams {
		for _, mt := range f.Metric {
			key := f.GetName()
			for _, l := range mt.Label {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			series[key] = mt
		}
	}
	if v := series["korvet_kafka_produced_records_total"].GetCounter().GetValue(); v != n {
		t.Errorf("korvet_kafka_produced_records_total = %v, want %d", v, n)
	}
	if v := series["korvet_kafka_requests_total,api=Produce"].GetCounter().GetValue(); v < 1 {
		t.Errorf("Produce requests = %v", v)
	}
	if h := series["korvet_kafka_request_duration_seconds,api=Fetch"].GetHistogram(); h.GetSampleCount() < 1 || h.GetSampleSum() <= 0 {
		t.Errorf("Fetch latency histogram = %v", h)
	}
	if v := series["korvet_kafka_received_bytes_total,api=Produce"].GetCounter().GetValue(); v <= 0 {
		t.Errorf("Produce bytes in = %v", v)
	}
	if _, ok := series["korvet_kafka_requests_total,api=DeleteTopics"]; !ok {
		t.Error("APIs not yet called are not exported at zero")
	}
}
