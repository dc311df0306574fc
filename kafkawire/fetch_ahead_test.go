package kafkawire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/kafkawire"
)

// aheadBroker is a broker with metrics, to count read-aheads.
func aheadBroker(t *testing.T, opts engine.Options, kopts kafkawire.Options) (*broker, *kafkawire.Metrics) {
	t.Helper()
	kopts.Metrics = kafkawire.NewMetrics(prometheus.NewRegistry())
	return startBrokerWith(t, opts, kopts), kopts.Metrics
}

// fetched is one partition's answer to a raw fetch.
type fetched struct {
	code int16
	offs []int64
	vals [][]byte
}

// fetchOne sends one Fetch of partition 0 of topic at offset on cl (each
// on the client's fetch connection, one after the other).
func fetchOne(t *testing.T, b *broker, cl *kgo.Client, topic string, offset int64, partMax, max int32) fetched {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = max, 1, 100
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, b.eng.Topic(topic).ID()
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	out := fetched{code: sp.ErrorCode}
	for raw := sp.RecordBatches; len(raw) >= 12; {
		n := 12 + int(binary.BigEndian.Uint32(raw[8:12]))
		var rb kmsg.RecordBatch
		if n > len(raw) || rb.ReadFrom(raw[:n]) != nil {
			t.Fatalf("fetch at %d: bad batch", offset)
		}
		recs, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rb.NumRecords) {
			var r kmsg.Record
			n, err := recordAt(recs, &r)
			if err != nil {
				t.Fatalf("fetch at %d: record %d: %v", offset, i, err)
			}
			recs = recs[n:]
			out.offs = append(out.offs, rb.FirstOffset+int64(r.OffsetDelta))
			out.vals = append(out.vals, r.Value)
		}
		raw = raw[n:]
	}
	return out
}

// recordAt decodes the record at the start of b (a varint length, then
// the record) and returns its size.
func recordAt(b []byte, r *kmsg.Record) (int, error) {
	l, n := binary.Varint(b)
	if n <= 0 || int(l) > len(b)-n {
		return 0, fmt.Errorf("bad record length")
	}
	return n + int(l), r.ReadFrom(b[:n+int(l)])
}

// produceValues produces values to partition 0 of topic, in order, ten
// to a batch: a fetch returns the batch of its first record whole, and no
// more when that is past its limits.
func produceValues(t *testing.T, ctx context.Context, b *broker, topic string, vals []string, key func(int) []byte, opts ...kgo.Opt) {
	t.Helper()
	prod := b.client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	for i := 0; i < len(vals); i += 10 {
		var rs []*kgo.Record
		for j := i; j < min(i+10, len(vals)); j++ {
			rs = append(rs, &kgo.Record{Partition: 0, Key: key(j), Value: []byte(vals[j])})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// franz-go and kcat consuming a partition in many small fetches get every
// record once, in order, byte-exact, the fetches after the first answered
// by the read-ahead the one before started; with compressed batches, whose
// fetches read on for the compression ratio, too.
func TestFetchReadAheadConsume(t *testing.T) {
	b, m := aheadBroker(t, engine.Options{}, kafkawire.Options{})
	ctx := ctxT(t, 60*time.Second)
	const n = 3000
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("value %05d %s", i, bytes.Repeat([]byte{'v'}, i%50))
	}
	for ci, tc := range []struct {
		codec   kgo.CompressionCodec
		minUsed int64 // compressed fetches read on, so fewer are needed
	}{{kgo.NoCompression(), 20}, {kgo.ZstdCompression(), 4}} {
		codec := tc.codec
		topic := fmt.Sprint("ahead-", ci)
		if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		produceValues(t, ctx, b, topic, vals, func(int) []byte { return nil }, kgo.ProducerBatchCompression(codec))
		before := m.Totals()
		cons := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxPartitionBytes(4<<10), kgo.FetchMaxBytes(4<<10))
		for i := 0; i < n; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: consumed %d of %d", topic, i, n)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != int64(i) || string(r.Value) != vals[i] {
					t.Fatalf("%s: record %d: offset %d, value %q, want %q", topic, i, r.Offset, r.Value, vals[i])
				}
				i++
			})
		}
		tot := m.Totals()
		if used := tot.ReadAheadUsed - before.ReadAheadUsed; used < tc.minUsed {
			t.Errorf("%s: %d read-aheads used (%d unused) over %d records in 4 KiB fetches", topic, used, tot.ReadAheadUnused-before.ReadAheadUnused, n)
		}

		out := testbed.RunCmd(t, 60*time.Second, nil, kcatPath(t), "-C", "-b", b.addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o %s\n",
			"-X", "fetch.max.bytes=4000", "-X", "max.partition.fetch.bytes=4000", "-X", "message.max.bytes=4000")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("%s: kcat read %d records, want %d", topic, len(lines), n)
		}
		for i, l := range lines {
			if want := fmt.Sprint(i, " ", vals[i]); l != want {
				t.Fatalf("%s: kcat record %d: %q, want %q", topic, i, l, want)
			}
		}
		if used := m.Totals().ReadAheadUsed - tot.ReadAheadUsed; used < tc.minUsed {
			t.Errorf("%s: kcat: %d read-aheads used", topic, used)
		}
	}
}

// A read-ahead taken before DeleteRecords or compaction removed records
// does not answer the next fetch: it gets OFFSET_OUT_OF_RANGE, or the
// records compaction left, as it would without read-ahead.
func TestFetchReadAheadAfterRecordsLeave(t *testing.T) {
	b, m := aheadBroker(t, engine.Options{Index: engine.IndexOptions{Dir: t.TempDir()}}, kafkawire.Options{FetchReadAheadIdle: time.Hour})
	ctx := ctxT(t, 60*time.Second)
	cl := b.client()
	adm := b.admin()
	vals := make([]string, 200)
	for i := range vals {
		vals[i] = fmt.Sprintf("value %05d %s", i, bytes.Repeat([]byte{'v'}, 80))
	}

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "del"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, b, "del", vals, func(int) []byte { return nil })
	first := fetchOne(t, b, cl, "del", 0, 1000, 1000)
	if first.code != 0 || len(first.offs) == 0 || len(first.offs) > 100 {
		t.Fatalf("first fetch: code %d, %d records", first.code, len(first.offs))
	}
	next := first.offs[len(first.offs)-1] + 1
	unused := m.Totals().ReadAheadUnused
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "del", Partition: 0, At: next + 5})
	if dr, err := adm.DeleteRecords(ctx, os); err != nil || dr.Error() != nil {
		t.Fatalf("delete records: %v %v", err, dr.Error())
	}
	if got := fetchOne(t, b, cl, "del", next, 1000, 1000); got.code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at %d after DeleteRecords to %d: code %d, %d records, want OFFSET_OUT_OF_RANGE", next, next+5, got.code, len(got.offs))
	}
	if m.Totals().ReadAheadUnused != unused+1 {
		t.Errorf("read-aheads unused %d → %d: the fetch did not meet the read-ahead", unused, m.Totals().ReadAheadUnused)
	}

	// Compaction: 4 keys, every key's last record stays.
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact"), "min.compaction.lag.ms": kmsg.StringPtr("0")}, "cmp"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, b, "cmp", vals, func(i int) []byte { return fmt.Appendf(nil, "k%d", i%4) })
	first = fetchOne(t, b, cl, "cmp", 0, 1000, 1000)
	if first.code != 0 || len(first.offs) == 0 || len(first.offs) > 100 {
		t.Fatalf("first fetch: code %d, %d records", first.code, len(first.offs))
	}
	next = first.offs[len(first.offs)-1] + 1
	unused = m.Totals().ReadAheadUnused
	if _, err := b.eng.CompactTopic(ctx, "cmp"); err != nil {
		t.Fatal(err)
	}
	got := fetchOne(t, b, cl, "cmp", next, 1000, 1000)
	if got.code != 0 || fmt.Sprint(got.offs) != "[196 197 198 199]" {
		t.Fatalf("fetch at %d after compaction: code %d, offsets %v, want the last record of each key", next, got.code, got.offs)
	}
	for i, off := range got.offs {
		if string(got.vals[i]) != vals[off] {
			t.Fatalf("offset %d: value %q, want %q", off, got.vals[i], vals[off])
		}
	}
	if m.Totals().ReadAheadUnused != unused+1 {
		t.Errorf("read-aheads unused %d → %d: the fetch did not meet the read-ahead", unused, m.Totals().ReadAheadUnused)
	}
}

// A read-ahead gives its share of the connection's byte budget up to a
// fetch that needs it (the read-ahead would otherwise hold it until it
// idles out, an hour here), and one no fetch takes is dropped once idle.
func TestFetchReadAheadBudgetAndIdle(t *testing.T) {
	b, m := aheadBroker(t, engine.Options{}, kafkawire.Options{FetchReadAheadIdle: time.Hour, MaxInFlightBytes: 256 << 10})
	ctx := ctxT(t, 60*time.Second)
	cl := b.client()
	vals := make([]string, 2000)
	for i := range vals {
		vals[i] = fmt.Sprintf("value %05d %s", i, bytes.Repeat([]byte{'v'}, 80))
	}
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "budget"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, b, "budget", vals, func(int) []byte { return nil })
	if got := fetchOne(t, b, cl, "budget", 0, 4000, 4000); got.code != 0 || len(got.offs) == 0 {
		t.Fatalf("first fetch: code %d, %d records", got.code, len(got.offs))
	}
	// Larger than the whole budget: it runs only once nothing else holds
	// any of it.
	if got := fetchOne(t, b, cl, "budget", 1000, 1<<20, 1<<20); got.code != 0 || len(got.offs) != 1000 {
		t.Fatalf("fetch larger than the budget: code %d, %d records", got.code, len(got.offs))
	}
	if tot := m.Totals(); tot.ReadAheadUnused == 0 {
		t.Errorf("read-aheads %+v: the first fetch started none, or the second took it", tot)
	}

	b2, m2 := aheadBroker(t, engine.Options{}, kafkawire.Options{FetchReadAheadIdle: 20 * time.Millisecond})
	cl2 := b2.client()
	if _, err := b2.admin().CreateTopic(ctx, 1, 1, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, b2, "idle", vals, func(int) []byte { return nil })
	if got := fetchOne(t, b2, cl2, "idle", 0, 4000, 4000); got.code != 0 || len(got.offs) == 0 {
		t.Fatalf("first fetch: code %d, %d records", got.code, len(got.offs))
	}
	testbed.WaitFor(t, 10*time.Second, "the idle read-ahead dropped", func() bool { return m2.Totals().ReadAheadUnused == 1 })
}
