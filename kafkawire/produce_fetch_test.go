package kafkawire_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/kafkawire"
)

// testRecords covers what must survive byte-for-byte: JSON that can be
// flattened and JSON that cannot, binary, empty and null keys and values,
// duplicate and null-valued headers, odd timestamps.
func testRecords(topic string, partitions int32) []*kgo.Record {
	// Recent timestamps: older ones would fall to the default 7-day
	// retention.ms, as in Kafka.
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	vals := [][]byte{
		[]byte(`{"user":"u-1","amount":12.50,"tags":["a", "b"],"nested":{"x": null}}`),
		[]byte(`{ "spaced": true }`),
		[]byte(`[1,2,3]`),
		{0x00, 0xff, '\r', '\n', 0x01},
		{},
		nil,
		[]byte(`{"__reserved":1}`),
		[]byte(`{"a":1,"a":2}`),
		bytes.Repeat([]byte("v"), 100_000),
	}
	keys := [][]byte{[]byte("k"), nil, {}, {0x00, 0x01}, []byte("ü/ñ key")}
	var out []*kgo.Record
	for i := 0; i < 120; i++ {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i) % partitions,
			Key:       keys[i%len(keys)],
			Value:     vals[i%len(vals)],
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		}
		switch i % 4 {
		case 1:
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}}
		case 2:
			r.Headers = []kgo.RecordHeader{{Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}, {Key: "", Value: []byte("nameless")}}
		case 3:
			r.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}
		}
		out = append(out, r)
	}
	return out
}

func produceAll(t testing.TB, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	res := cl.ProduceSync(ctxT(t, 30*time.Second), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeN reads n records of topic from the start.
func consumeN(t testing.TB, b *broker, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := b.client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxT(t, 30*time.Second)
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	return got
}

func sameRecord(a, b *kgo.Record) error {
	eq := func(x, y []byte) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) }
	if !eq(a.Key, b.Key) {
		return fmt.Errorf("key %q (nil %v) != %q (nil %v)", a.Key, a.Key == nil, b.Key, b.Key == nil)
	}
	if !eq(a.Value, b.Value) {
		return fmt.Errorf("value %.60q (nil %v) != %.60q (nil %v)", a.Value, a.Value == nil, b.Value, b.Value == nil)
	}
	if !a.Timestamp.Equal(b.Timestamp) {
		return fmt.Errorf("timestamp %v != %v", a.Timestamp, b.Timestamp)
	}
	if len(a.Headers) != len(b.Headers) {
		return fmt.Errorf("%d headers != %d", len(a.Headers), len(b.Headers))
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !eq(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Errorf("header %d: %q=%q != %q=%q", i, a.Headers[i].Key, a.Headers[i].Value, b.Headers[i].Key, b.Headers[i].Value)
		}
	}
	return nil
}

// checkConsumed matches consumed records to produced ones by partition and
// offset, byte for byte, and checks offsets are dense from 0.
func checkConsumed(t testing.TB, produced, got []*kgo.Record) {
	t.Helper()
	type po struct {
		p int32
		o int64
	}
	want := map[po]*kgo.Record{}
	for _, r := range produced {
		want[po{r.Partition, r.Offset}] = r
	}
	next := map[int32]int64{}
	for _, g := range got {
		if g.Offset != next[g.Partition] {
			t.Fatalf("partition %d: offset %d, want %d (dense, in order)", g.Partition, g.Offset, next[g.Partition])
		}
		next[g.Partition]++
		w, ok := want[po{g.Partition, g.Offset}]
		if !ok {
			t.Fatalf("consumed %d/%d which was never produced", g.Partition, g.Offset)
		}
		if err := sameRecord(w, g); err != nil {
			t.Fatalf("record %d/%d: %v", g.Partition, g.Offset, err)
		}
	}
}

func TestRoundTripByteExactAcrossRestart(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	adm := b.admin()
	if _, err := adm.CreateTopic(ctxT(t, 10*time.Second), 4, 1, nil, "rt"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := testRecords("rt", 4)
	produceAll(t, cl, recs)
	checkConsumed(t, recs, consumeN(t, b, "rt", len(recs)))

	b.restart()
	checkConsumed(t, recs, consumeN(t, b, "rt", len(recs)))
	// Appends continue densely after the restart.
	more := testRecords("rt", 4)[:8]
	produceAll(t, b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), more)
	checkConsumed(t, append(recs, more...), consumeN(t, b, "rt", len(recs)+len(more)))
}

func TestEveryCompressionCodec(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			cl := b.client(kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			recs := testRecords(topic, 1)
			produceAll(t, cl, recs)
			checkConsumed(t, recs, consumeN(t, b, topic, len(recs)))
			// Fetches hand records back compressed as they were produced.
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxBytes, req.MaxWaitMillis = 12, 1<<20, 10
			rt := kmsg.NewFetchRequestTopic()
			// kgo sends the newest version korvet offers, which names
			// topics by id.
			rt.Topic, rt.TopicID = topic, b.eng.Topic(topic).ID()
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
			if err != nil {
				t.Fatal(err)
			}
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(resp.Topics[0].Partitions[0].RecordBatches); err != nil {
				t.Fatal(err)
			}
			want := map[string]int16{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[name]
			if got := batch.Attributes & 7; got != want {
				t.Fatalf("fetched batch compression %d, want %d", got, want)
			}
		})
	}
}

func TestAcksModes(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	for _, acks := range []struct {
		name string
		a    kgo.Acks
	}{{"all", kgo.AllISRAcks()}, {"leader", kgo.LeaderAck()}, {"none", kgo.NoAck()}} {
		t.Run(acks.name, func(t *testing.T) {
			topic := "acks-" + acks.name
			opts := []kgo.Opt{kgo.RequiredAcks(acks.a), kgo.DefaultProduceTopic(topic)}
			if acks.name != "all" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl := b.client(opts...)
			var recs []*kgo.Record
			for i := 0; i < 500; i++ {
				recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i))})
			}
			produceAll(t, cl, recs)
			got := consumeN(t, b, topic, len(recs))
			for i, g := range got {
				if string(g.Value) != fmt.Sprintf("v%d", i) || g.Offset != int64(i) {
					t.Fatalf("record %d: offset %d value %q", i, g.Offset, g.Value)
				}
			}
		})
	}
}

func TestFetchWakesOnProduce(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true}, kafkawire.Options{Metrics: kafkawire.NewMetrics(reg)})
	adm := b.admin()
	ctx := ctxT(t, 30*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "wake"); err != nil {
		t.Fatal(err)
	}
	producer := b.client(kgo.DefaultProduceTopic("wake"))
	cons := b.client(kgo.ConsumeTopics("wake"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Second))
	polled := make(chan kgo.Fetches, 1)
	go func() { polled <- cons.PollFetches(ctx) }()
	// The consumer looks up where to start, then its fetch waits at the
	// end of the empty log.
	testbed.WaitFor(t, 10*time.Second, "a waiting fetch", func() bool {
		return gathered(t, reg, "korvet_kafka_requests_total", "ListOffsets") >= 1 && gathered(t, reg, "korvet_kafka_requests_in_flight", "") >= 1
	})
	start := time.Now()
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := <-polled
	if n := len(fs.Records()); n != 1 {
		t.Fatalf("got %d records, errors %v", n, fs.Errors())
	}
	// The fetch waits up to 10 s; it must return as soon as the record lands.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("fetch returned %v after the produce: it did not wake on it", d)
	}
}

// gathered is the value of a counter or gauge in reg, of the series with
// label api (any series when api is "").
func gathered(t *testing.T, reg prometheus.Gatherer, name, api string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	ofAPI := func(m *dto.Metric) bool {
		for _, l := range m.Label {
			if l.GetName() == "api" {
				return api == "" || l.GetValue() == api
			}
		}
		return true
	}
	for _, f := range fams {
		for _, m := range f.Metric {
			if f.GetName() == name && ofAPI(m) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func TestListOffsets(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	cl := b.client(kgo.DefaultProduceTopic("lo"))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	// Several produce calls make several appends in the batch index.
	for i := 0; i < 100; i += 10 {
		produceAll(t, cl, recs[i:i+10])
	}
	adm := b.admin()
	ctx := ctxT(t, 10*time.Second)
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("lo", 0); o.Offset != 0 {
		t.Fatalf("start offset %d", o.Offset)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 100 {
		t.Fatalf("end offset %d", o.Offset)
	}
	for _, i := range []int{0, 1, 37, 99} {
		at, err := adm.ListOffsetsAfterMilli(ctx, base.Add(time.Duration(i)*time.Second).UnixMilli(), "lo")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := at.Lookup("lo", 0); o.Offset != int64(i) || o.Timestamp != base.Add(time.Duration(i)*time.Second).UnixMilli() {
			t.Fatalf("offset after %ds: %+v, want offset %d", i, o, i)
		}
	}
	// Between records: the next one.
	at, _ := adm.ListOffsetsAfterMilli(ctx, base.Add(41500*time.Millisecond).UnixMilli(), "lo")
	if o, _ := at.Lookup("lo", 0); o.Offset != 42 {
		t.Fatalf("offset after 41.5s: %d, want 42", o.Offset)
	}
	// After every record: Kafka answers the end offset (franz-go maps -1 so).
	at, _ = adm.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), "lo")
	if o, _ := at.Lookup("lo", 0); o.Offset != 100 && o.Offset != -1 {
		t.Fatalf("offset after the end: %d", o.Offset)
	}
}

func TestCreateDeleteTopics(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: false})
	adm := b.admin()
	ctx := ctxT(t, 20*time.Second)
	ret := "3600000"
	r, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": &ret}, "made")
	if err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "made"); err == nil {
		t.Fatal("creating an existing topic succeeded")
	}
	bad := "soon"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &bad}, "badcfg"); err == nil {
		t.Fatal("bad config accepted")
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": &ret}, "badcfg"); err == nil {
		t.Fatal("unknown config accepted")
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); err == nil {
		t.Fatal("replication factor 3 accepted")
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bad/name"); err == nil {
		t.Fatal("bad name accepted")
	}
	vo, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "validate-only")
	if err != nil || vo.Error() != nil {
		t.Fatalf("validate only: %v %v", err, vo.Error())
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !md.Topics.Has("made") || md.Topics.Has("validate-only") || len(md.Topics["made"].Partitions) != 3 {
		t.Fatalf("metadata after create: %v", md.Topics.Names())
	}
	// Auto-create is off: producing to an unknown topic fails.
	cl := b.client(kgo.DefaultProduceTopic("nope"), kgo.RecordRetries(1), kgo.ProduceRequestTimeout(2*time.Second))
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("produce to an unknown topic succeeded with auto-create off")
	}
	cancel()

	produceAll(t, b.client(kgo.DefaultProduceTopic("made")), []*kgo.Record{{Value: []byte("x")}})
	dr, err := adm.DeleteTopics(ctx, "made")
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete: %v %v", err, dr.Error())
	}
	keys, err := b.rc.Do(ctx, "KEYS", "korvet:*made*")
	if err != nil {
		t.Fatal(err)
	}
	if keys.Len() != 0 {
		t.Fatalf("%d keys left in Redis after delete", keys.Len())
	}
	b.restart()
	md, err = b.admin().Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Topics.Has("made") {
		t.Fatal("deleted topic is back after a restart")
	}
}

func TestAutoCreateOnMetadataAndProduce(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, DefaultPartitions: 3})
	produceAll(t, b.client(kgo.DefaultProduceTopic("auto")), []*kgo.Record{{Value: []byte("x")}})
	md, err := b.admin().Metadata(ctxT(t, 10*time.Second), "auto")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics["auto"].Partitions) != 3 || md.Topics["auto"].ID == (kadm.TopicID{}) {
		t.Fatalf("auto-created topic: %+v", md.Topics["auto"])
	}
}

func TestRetentionBytesAdvancesLogStart(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, RetentionInterval: 100 * time.Millisecond})
	adm := b.admin()
	ctx := ctxT(t, 30*time.Second)
	rb := "20000"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.bytes": &rb}, "ret"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.DefaultProduceTopic("ret"))
	for i := 0; i < 50; i++ {
		produceAll(t, cl, []*kgo.Record{{Value: bytes.Repeat([]byte{'x'}, 1000)}})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		so, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := so.Lookup("ret", 0)
		if o.Offset > 0 {
			// Size retention keeps at least retention.bytes.
			if o.Offset > 32 {
				t.Fatalf("log start %d: kept less than retention.bytes", o.Offset)
			}
			n, err := b.rc.Do(ctx, "XLEN", "korvet:storage:local:ret:0:0")
			if err != nil {
				t.Fatal(err)
			}
			if l, _ := n.Int(); l != 50-o.Offset {
				t.Fatalf("stream holds %d entries, want %d", l, 50-o.Offset)
			}
			// Fetching below the start is out of range; from it works.
			got := consumeN(t, b, "ret", int(50-o.Offset))
			if got[0].Offset != o.Offset {
				t.Fatalf("first consumed offset %d, want %d", got[0].Offset, o.Offset)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("retention.bytes never advanced the log start")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
