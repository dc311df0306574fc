package kafkawire_test

import (
	"crypto/rand"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/kafkawire"
)

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// produceReq is a produce request (v9, acks all) of the given partitions'
// record batches to topic.
func produceReq(topic string, batches map[int32][]byte, order ...int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range order {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batches[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func zstdBatch(t *testing.T, n int) []byte {
	t.Helper()
	b, err := testbed.ZstdBatch(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A panic in a handler's in-order half (where a produce decodes its
// batches) closes that connection with an Error log line; the process and
// every other connection carry on.
func TestPanicInOrderHalfClosesOnlyItsConnection(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	b := startBrokerSetup(t, engine.Options{AutoCreateTopics: true, Logger: log}, kafkawire.Options{}, func(s *kafkawire.Server) {
		kafkawire.PanicInOrder(s, 0, func(r kmsg.Request) bool {
			pr := r.(*kmsg.ProduceRequest)
			return len(pr.Topics) > 0 && pr.Topics[0].Topic == "boom"
		})
	})
	other := b.client(kgo.DefaultProduceTopic("fine"))
	produceAll(t, other, []*kgo.Record{{Value: []byte("before")}})

	c := rawConn(t, b.addr)
	if _, err := c.Write(request(1, produceReq("boom", map[int32][]byte{0: zstdBatch(t, 100)}, 0))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "handler panic") {
		t.Fatalf("no Error log line for the panic:\n%s", logs.String())
	}
	// Others are served: the open client, and new connections.
	produceAll(t, other, []*kgo.Record{{Value: []byte("after")}})
	c2 := rawConn(t, b.addr)
	apiVersionsRoundTrip(t, c2, 2)
	if got := consumeN(t, b, "fine", 2); string(got[1].Value) != "after" {
		t.Fatalf("read back %q", got[1].Value)
	}
	if tp := b.eng.Topic("boom"); tp != nil && tp.Partition(0).HighWatermark() != 0 {
		t.Fatal("the panicking request stored records")
	}
}

// A partition named twice in one produce request gets INVALID_REQUEST on
// every row, and nothing of it is stored; the request's other partitions
// are served.
func TestProduceDuplicatePartitionRefused(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 20*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, "dup"); err != nil {
		t.Fatal(err)
	}
	batch := zstdBatch(t, 100)
	req := produceReq("dup", map[int32][]byte{0: batch, 1: batch}, 0, 1, 0)
	// The same partition again in a second entry for the topic.
	req.Topics = append(req.Topics, produceReq("dup", map[int32][]byte{1: batch}, 1).Topics[0])
	c := rawConn(t, b.addr)
	if _, err := c.Write(request(1, req)); err != nil {
		t.Fatal(err)
	}
	resp := readResponse(t, c, req).(*kmsg.ProduceResponse)
	n := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			n++
			if rp.ErrorCode != kerr.InvalidRequest.Code || rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "more than once") {
				t.Errorf("partition %d: error %d %v, want INVALID_REQUEST saying it is listed more than once", rp.Partition, rp.ErrorCode, rp.ErrorMessage)
			}
		}
	}
	if n != 4 {
		t.Fatalf("%d partition rows answered, want 4", n)
	}
	for p := range int32(2) {
		if hw := b.eng.Topic("dup").Partition(p).HighWatermark(); hw != 0 {
			t.Errorf("partition %d holds %d records after a refused request", p, hw)
		}
	}
	// Named once each, the same partitions are served.
	ok := produceReq("dup", map[int32][]byte{0: batch, 1: batch}, 0, 1)
	if _, err := c.Write(request(2, ok)); err != nil {
		t.Fatal(err)
	}
	for _, rp := range readResponse(t, c, ok).(*kmsg.ProduceResponse).Topics[0].Partitions {
		if rp.ErrorCode != 0 {
			t.Errorf("partition %d: error %d", rp.Partition, rp.ErrorCode)
		}
	}
}

// What one produce request's batches decompress to is bounded across its
// partitions: once the budget is spent the next partition gets
// MESSAGE_TOO_LARGE naming the key, and nothing of it is stored. The
// budget is per request.
func TestProduceDecompressedBudget(t *testing.T) {
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true}, kafkawire.Options{MaxProduceDecompressedBytes: 1 << 20})
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 3, 1, nil, "budget"); err != nil {
		t.Fatal(err)
	}
	seven := zstdBatch(t, 700<<10) // 700 KiB inflated
	bomb := zstdBatch(t, 64<<20)   // 64 MiB inflated
	t.Logf("batches: %d bytes for 700 KiB, %d bytes for 64 MiB", len(seven), len(bomb))
	c := rawConn(t, b.addr)
	req := produceReq("budget", map[int32][]byte{0: seven, 1: seven, 2: bomb}, 0, 1, 2)
	if _, err := c.Write(request(1, req)); err != nil {
		t.Fatal(err)
	}
	parts := readResponse(t, c, req).(*kmsg.ProduceResponse).Topics[0].Partitions
	if parts[0].ErrorCode != 0 {
		t.Fatalf("first partition: error %d %v", parts[0].ErrorCode, parts[0].ErrorMessage)
	}
	for _, rp := range parts[1:] {
		if rp.ErrorCode != kerr.MessageTooLarge.Code || rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "kafka.max_produce_decompressed_bytes") {
			t.Errorf("partition %d: error %d %v, want MESSAGE_TOO_LARGE naming the key", rp.Partition, rp.ErrorCode, rp.ErrorMessage)
		}
	}
	tp := b.eng.Topic("budget")
	for p, want := range []int64{1, 0, 0} {
		if hw := tp.Partition(int32(p)).HighWatermark(); hw != want {
			t.Errorf("partition %d: %d records stored, want %d", p, hw, want)
		}
	}
	t.Logf("partition 1: %s", *parts[1].ErrorMessage)
	// The next request has its own budget.
	again := produceReq("budget", map[int32][]byte{1: seven}, 1)
	if _, err := c.Write(request(2, again)); err != nil {
		t.Fatal(err)
	}
	if rp := readResponse(t, c, again).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; rp.ErrorCode != 0 {
		t.Fatalf("a lone 700 KiB batch: error %d %v", rp.ErrorCode, rp.ErrorMessage)
	}
}

// A client pipelining big produces while Redis is slow to commit them
// cannot make korvet hold more than the connection's byte budget of
// them: korvet stops reading from it until earlier ones are committed.
// Without the budget all 20 requests (80 MiB) would sit in korvet.
func TestPipelinedProducesBounded(t *testing.T) {
	const (
		budget    = 8 << 20
		size      = 4 << 20
		requests  = 20
		maxGrowth = 40 << 20
	)
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true}, kafkawire.Options{MaxInFlightBytes: budget})
	ctx := ctxT(t, 60*time.Second)
	mmb := "10000000"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &mmb}, "slow"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, size)
	rand.Read(value)
	cl := b.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8<<20))
	produceAll(t, cl, []*kgo.Record{{Topic: "slow", Value: value}}) // a batch to copy
	frames := make([][]byte, requests)
	{
		fr := kmsg.NewPtrFetchRequest()
		fr.Version = 11
		fr.ReplicaID, fr.MaxBytes, fr.SessionEpoch = -1, 8<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "slow"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 8<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
		c := rawConn(t, b.addr)
		batch := readResponse(t, c, writeReq(t, c, fr)).(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
		for i := range frames {
			frames[i] = request(int32(i), produceReq("slow", map[int32][]byte{0: batch}, 0))
		}
	}

	// Redis holds writes back: commits wait, and so do the requests.
	if r, err := b.rc.Do(ctx, "CLIENT", "PAUSE", "4000", "WRITE"); err != nil || r.Err() != nil {
		t.Fatalf("CLIENT PAUSE: %v %v", err, r.Err())
	}
	base := heapInUse()
	c := rawConn(t, b.addr)
	_ = c.SetDeadline(time.Now().Add(50 * time.Second))
	wrote := make(chan error, 1)
	go func() {
		for _, f := range frames {
			if _, err := c.Write(f); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	var peak int64
	for range 6 {
		growth := heapInUse() - base
		peak = max(peak, growth)
		if growth > maxGrowth {
			t.Fatalf("heap grew by %d MiB with %d produces of %d MiB pipelined against a paused Redis (bound %d MiB)", growth>>20, requests, size>>20, maxGrowth>>20)
		}
		time.Sleep(400 * time.Millisecond) // samples through the 4s pause: the heap must not grow in it
	}
	t.Logf("heap growth peaked at %.1f MiB with %d produces of %d MiB pipelined and Redis paused", float64(peak)/(1<<20), requests, size>>20)
	// Redis resumes: every request is answered and stored.
	for i := range requests {
		pr := readResponse(t, c, produceReq("slow", nil)).(*kmsg.ProduceResponse)
		if rp := pr.Topics[0].Partitions[0]; rp.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d %v", i, rp.ErrorCode, rp.ErrorMessage)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if hw := b.eng.Topic("slow").Partition(0).HighWatermark(); hw != 1+requests {
		t.Fatalf("%d records stored, want %d", hw, 1+requests)
	}
}

// writeReq sends req on c and returns it, for readResponse.
func writeReq(t *testing.T, c net.Conn, req kmsg.Request) kmsg.Request {
	t.Helper()
	if _, err := c.Write(request(0, req)); err != nil {
		t.Fatal(err)
	}
	return req
}
