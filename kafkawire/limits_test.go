package kafkawire_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire"
)

// apiVersionsRoundTrip sends ApiVersions on c and reads the answer.
func apiVersionsRoundTrip(t *testing.T, c net.Conn, corr int32) {
	t.Helper()
	av := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(request(corr, av)); err != nil {
		t.Fatalf("write ApiVersions: %v", err)
	}
	readResponse(t, c, av)
}

// Connections beyond max_connections are closed at once; those already
// open, and new ones once others leave, are served.
func TestMaxConnections(t *testing.T) {
	const limit = 4
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true}, kafkawire.Options{MaxConnections: limit})
	var open []net.Conn
	for i := range limit {
		c := rawConn(t, b.addr)
		apiVersionsRoundTrip(t, c, int32(i)) // answered: counted as connected
		open = append(open, c)
	}
	for range 3 {
		expectClosed(t, rawConn(t, b.addr))
	}
	// The open ones still work.
	for i, c := range open {
		apiVersionsRoundTrip(t, c, int32(100+i))
	}
	// One leaves; a newcomer gets in once korvet has seen it go.
	open[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for b.srv.Connected.Load() >= limit {
		if time.Now().After(deadline) {
			t.Fatalf("still %d connections 30s after one closed", b.srv.Connected.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	apiVersionsRoundTrip(t, rawConn(t, b.addr), 200)
	for _, c := range open[1:] {
		c.Close()
	}
	// And a real client goes through.
	produceAll(t, b.client(kgo.DefaultProduceTopic("maxconn")), []*kgo.Record{{Value: []byte("ok")}})
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A client that pipelines big fetches and never reads the answers cannot
// make korvet hold more than the connection's byte budget of responses:
// korvet stops reading from it. Without the budget each of the 64
// in-flight fetches would hold the whole 8 MiB partition.
func TestUnreadFetchResponsesBounded(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	const (
		topic     = "hoard"
		recSize   = 100 << 10
		records   = 80 // 8 MiB in the partition
		fetches   = 400
		maxGrowth = 128 << 20
	)
	var recs []*kgo.Record
	for range records {
		v := make([]byte, recSize)
		rand.Read(v) // incompressible
		recs = append(recs, &kgo.Record{Topic: topic, Value: v})
	}
	cl := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(4<<20))
	for i := 0; i < len(recs); i += 8 {
		produceAll(t, cl, recs[i:i+8])
	}

	base := heapInUse()
	nc, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10) // keep what the kernel takes in small
	}
	var out bytes.Buffer
	for i := range fetches {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID = -1
		req.MaxBytes = 100 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 100 << 20
		rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		out.Write(request(int32(i), req))
	}
	if _, err := nc.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}

	// Watch the heap for a while; other clients are served meanwhile.
	other := b.client(kgo.DefaultProduceTopic("bystander"), kgo.ConsumeTopics("bystander"))
	var peak int64
	for i := 0; i < 10; i++ {
		growth := heapInUse() - base
		peak = max(peak, growth)
		if growth > maxGrowth {
			t.Fatalf("heap grew by %d MiB with a client not reading its fetch responses (bound %d MiB)", growth>>20, maxGrowth>>20)
		}
		if i == 5 {
			produceAll(t, other, []*kgo.Record{{Value: []byte("still serving")}})
			fs := other.PollFetches(ctxT(t, 30*time.Second))
			if len(fs.Records()) != 1 || len(fs.Errors()) > 0 {
				t.Fatalf("bystander consume: %d records, errors %v", len(fs.Records()), fs.Errors())
			}
		}
		time.Sleep(500 * time.Millisecond) // samples for 5s: the heap must not grow in them
	}
	t.Logf("heap growth peaked at %.1f MiB with %d unread 8 MiB fetches pipelined", float64(peak)/(1<<20), fetches)

	// The client goes away: what korvet held is freed.
	nc.Close()
	deadline := time.Now().Add(60 * time.Second)
	for heapInUse()-base > 32<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("heap still %d MiB above the start 60s after the client left", (heapInUse()-base)>>20)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A fetch asking for more than MaxFetchResponseBytes gets at most that.
func TestFetchResponseCapped(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	// Over the cap in the partition: 72 batches of 1 MiB.
	const topic = "capped"
	cl := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(2<<20))
	v := make([]byte, 1000<<10)
	for i := range 72 {
		rand.Read(v)
		produceAll(t, cl, []*kgo.Record{{Topic: topic, Key: fmt.Appendf(nil, "%d", i), Value: bytes.Clone(v)}})
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxBytes = 1 << 30
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 30
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := rawConn(t, b.addr)
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(request(1, req)); err != nil {
		t.Fatal(err)
	}
	resp := readResponse(t, c, req).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if n := len(p.RecordBatches); n > kafkawire.MaxFetchResponseBytes+(1<<20) {
		t.Fatalf("fetch returned %d MiB, want at most the %d MiB cap", n>>20, kafkawire.MaxFetchResponseBytes>>20)
	}
	if p.HighWatermark != 72 {
		t.Fatalf("high watermark %d, want 72", p.HighWatermark)
	}
	t.Logf("a fetch for 1 GiB of a %d MiB partition returned %.1f MiB", 72*1000>>10, float64(len(p.RecordBatches))/(1<<20))
}

// Metadata for a topic of 10000 partitions answers within seconds.
func TestMetadataTenThousandPartitions(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, MaxPartitionsPerTopic: 10000, MaxPartitions: 10001})
	const topic, parts = "wide", 10000
	ctx := ctxT(t, 120*time.Second)
	adm := b.admin()
	start := time.Now()
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("create %d partitions: %v", parts, err)
	}
	created := time.Since(start)

	cl := b.client()
	for i := range 2 { // the first also warms the connection up
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != parts {
			t.Fatalf("metadata: %d topics, error %d, %d partitions", len(resp.Topics), resp.Topics[0].ErrorCode, len(resp.Topics[0].Partitions))
		}
		if took > 5*time.Second {
			t.Fatalf("metadata for %d partitions took %v, want under 5s", parts, took)
		}
		if i == 1 {
			t.Logf("created %d partitions in %v; metadata answered in %v", parts, created.Round(time.Millisecond), took.Round(time.Microsecond))
		}
	}
	// All topics (no list) as well.
	start = time.Now()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) == 0 {
		t.Fatalf("metadata of all topics: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("metadata of all topics took %v, want under 5s", took)
	}
}
