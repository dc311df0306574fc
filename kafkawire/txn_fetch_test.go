package kafkawire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/kafkawire/batch"
)

// produceTxnBatch sends one transactional batch by hand (the coordinator
// is not needed for the log side) and returns the partition's error code.
func produceTxnBatch(t *testing.T, b *broker, cl *kgo.Client, topic string, txnID *string, pid int64, epoch int16, seq int32, recs []record.Record) int16 {
	t.Helper()
	for i := range recs {
		recs[i].Offset = int64(i)
	}
	raw, err := batch.AppendBatch(nil, recs, batch.BuildOptions{HasProducer: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Attributes: batch.AttrTransactional})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = txnID, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, b.eng.Topic(topic).ID()
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchTxn fetches partition 0 from offset with an isolation level and
// returns the partition's answer and its batches decoded.
func fetchTxn(t *testing.T, b *broker, cl *kgo.Client, topic string, offset int64, isolation int8) (kmsg.FetchResponseTopicPartition, []batch.Batch) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis, req.IsolationLevel = 1<<20, 0, 0, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, b.eng.Topic(topic).ID()
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch: error %d", sp.ErrorCode)
	}
	var dec batch.Decoder
	bs, err := dec.Decode(sp.RecordBatches, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sp, bs
}

func txnRec(key, value string, hdr string) record.Record {
	r := record.Record{Timestamp: 1700000000000, Key: []byte(key), Value: []byte(value)}
	if hdr != "" {
		r.Headers = []record.Header{{Key: []byte(hdr), Value: []byte("\x00\xff" + hdr)}}
	}
	return r
}

// TestTxnFetchReadCommitted: transactional batches produced by hand and
// ended with markers read back as Kafka clients expect. While open, a
// read_committed fetch stops at the LSO (ListOffsets and DescribeProducers
// agree); after a commit and an abort, kgo's read_committed consumer sees
// the plain and committed records byte for byte and never the aborted
// ones, read_uncommitted sees them all, and so does kcat under each
// isolation level; markers come as control batches.
func TestTxnFetchReadCommitted(t *testing.T) {
	// The batches are produced without a transaction coordinator's
	// say-so (no InitProducerId or AddPartitionsToTxn): what is tested
	// is the log and the fetch side.
	accept := func(context.Context, string, int64, int16, string, int32) error { return nil }
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true, TxnResolveInterval: time.Hour}, kafkawire.Options{VerifyTxn: accept})
	ctx := ctxT(t, 90*time.Second)
	const topic = "txw"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	produceAll(t, cl, []*kgo.Record{{Key: []byte("p0"), Value: []byte("plain 0")}}) // 0
	pidA, err := b.eng.NewProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pidB, _ := b.eng.NewProducerID(ctx)
	ta, tb := "txn-a", "txn-b"
	if code := produceTxnBatch(t, b, cl, topic, &ta, pidA, 0, 0, []record.Record{txnRec("a0", `{"x":1}`, "h"), txnRec("a1", "committed \x00 bytes", "")}); code != 0 { // 1-2
		t.Fatalf("produce A: %v", kerr.ErrorForCode(code))
	}
	if code := produceTxnBatch(t, b, cl, topic, &tb, pidB, 0, 0, []record.Record{txnRec("b0", "aborted", "h")}); code != 0 { // 3
		t.Fatalf("produce B: %v", kerr.ErrorForCode(code))
	}
	produceAll(t, cl, []*kgo.Record{{Key: []byte("p1"), Value: []byte("plain 1")}}) // 4

	// Refused: no transactional id; a client's control batch.
	if code := produceTxnBatch(t, b, cl, topic, nil, pidA, 0, 1, []record.Record{txnRec("x", "x", "")}); code != kerr.InvalidRecord.Code {
		t.Fatalf("transactional batch without a transactional id: %v", kerr.ErrorForCode(code))
	}

	// Open: read_committed stops at the first open transaction.
	sp, bs := fetchTxn(t, b, cl, topic, 0, 1)
	if sp.LastStableOffset != 1 || sp.HighWatermark != 5 || len(bs) != 1 || bs[0].NumRecords != 1 || len(sp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed while open: LSO %d HW %d, %d batches", sp.LastStableOffset, sp.HighWatermark, len(bs))
	}
	if sp, _ := fetchTxn(t, b, cl, topic, 0, 0); sp.LastStableOffset != 1 {
		t.Fatalf("read_uncommitted reports LSO %d, want 1", sp.LastStableOffset)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.IsolationLevel = 1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr, err := lo.RequestWith(ctx, cl)
	if err != nil || lr.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("ListOffsets read_committed latest: %v %+v", err, lr)
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dt)
	dr, err := dp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]int64{}
	for _, ap := range dr.Topics[0].Partitions[0].ActiveProducers {
		starts[ap.ProducerID] = ap.CurrentTxnStartOffset
	}
	if starts[pidA] != 1 || starts[pidB] != 3 {
		t.Fatalf("DescribeProducers txn starts %v, want %d:1 %d:3", starts, pidA, pidB)
	}

	p := b.eng.Topic(topic).Partition(0)
	if off, err := p.WriteMarker(ctx, engine.Marker{ProducerID: pidA, Epoch: 0, Commit: true, CoordinatorEpoch: 5}); err != nil || off != 5 {
		t.Fatalf("commit: %d %v", off, err)
	}
	if off, err := p.WriteMarker(ctx, engine.Marker{ProducerID: pidB, Epoch: 0}); err != nil || off != 6 {
		t.Fatalf("abort: %d %v", off, err)
	}

	// The batches as fetched: per transaction, markers as control batches.
	sp, bs = fetchTxn(t, b, cl, topic, 0, 1)
	if ab := sp.AbortedTransactions; sp.LastStableOffset != 7 || len(ab) != 1 || ab[0].ProducerID != pidB || ab[0].FirstOffset != 3 {
		t.Fatalf("read_committed: LSO %d aborted %+v", sp.LastStableOffset, sp.AbortedTransactions)
	}
	type shape struct {
		base   int64
		n      int32
		pid    int64
		txn    bool
		ctl    bool
		ctlKey string
	}
	var got []shape
	for _, bt := range bs {
		s := shape{bt.BaseOffset, bt.NumRecords, bt.ProducerID, bt.Transactional(), bt.Control(), ""}
		if bt.Control() {
			s.ctlKey = fmt.Sprintf("%x/%x", bt.Records[0].Key, bt.Records[0].Value)
			if bt.BaseSequence != -1 || bt.ProducerEpoch != 0 {
				t.Fatalf("control batch sequence %d epoch %d", bt.BaseSequence, bt.ProducerEpoch)
			}
		}
		got = append(got, s)
	}
	want := []shape{{0, 1, -1, false, false, ""}, {1, 2, pidA, true, false, ""}, {3, 1, pidB, true, false, ""}, {4, 1, -1, false, false, ""},
		{5, 1, pidA, true, true, "00000001/000000000005"}, {6, 1, pidB, true, true, "00000000/000000000000"}}
	if !slices.Equal(got, want) {
		t.Fatalf("batches\n%+v\nwant\n%+v", got, want)
	}

	all := []string{"p0=plain 0", `a0={"x":1}`, "a1=committed \x00 bytes", "b0=aborted", "p1=plain 1"}
	committed := []string{all[0], all[1], all[2], all[4]}
	read := func(level kgo.IsolationLevel, n int) []string {
		recs := consumeN(t, b, topic, n, kgo.FetchIsolationLevel(level))
		var out []string
		for _, r := range recs {
			out = append(out, string(r.Key)+"="+string(r.Value))
			if string(r.Key) == "a0" && (len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != "\x00\xffh") {
				t.Fatalf("a0 headers %+v", r.Headers)
			}
		}
		return out
	}
	if got := read(kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("kgo read_committed: %q, want %q", got, committed)
	}
	if got := read(kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		t.Fatalf("kgo read_uncommitted: %q, want %q", got, all)
	}
	// A read_committed consumer that polls on finds nothing more (the
	// aborted record and the markers stay hidden).
	rc := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var seen []string
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	for pctx.Err() == nil {
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Key)+"="+string(r.Value)) })
	}
	cancel()
	if !slices.Equal(seen, committed) {
		t.Fatalf("kgo read_committed polling on: %q", seen)
	}

	kcat := kcatPath(t)
	for _, c := range []struct {
		level string
		want  []string
	}{{"read_committed", committed}, {"read_uncommitted", all}} {
		kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(kctx, kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n",
			"-X", "isolation.level="+c.level)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", c.level, err, errb.String())
		}
		if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !slices.Equal(got, c.want) {
			t.Fatalf("kcat %s: %q, want %q", c.level, got, c.want)
		}
	}
}

// TestTxnProduceVerifyHook: the VerifyTxn hook sees the first batch of a
// transaction in a partition (not the next ones) and its error is the
// answer; a zombie epoch is fenced.
func TestTxnProduceVerifyHook(t *testing.T) {
	var calls []string
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true, TxnResolveInterval: time.Hour}, kafkawire.Options{
		VerifyTxn: func(_ context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error {
			calls = append(calls, fmt.Sprintf("%s/%d/%d/%s/%d", txnID, pid, epoch, topic, partition))
			if txnID == "bad" {
				return fmt.Errorf("partition not in the transaction: %w", engine.ErrInvalidTxnState)
			}
			return nil
		},
	})
	ctx := ctxT(t, 30*time.Second)
	const topic = "txv"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := b.client()
	good, bad := "good", "bad"
	if code := produceTxnBatch(t, b, cl, topic, &bad, 9, 0, 0, []record.Record{txnRec("k", "v", "")}); code != kerr.InvalidTxnState.Code {
		t.Fatalf("refused by the hook: %v", kerr.ErrorForCode(code))
	}
	for seq := int32(0); seq < 2; seq++ {
		if code := produceTxnBatch(t, b, cl, topic, &good, 10, 1, seq, []record.Record{txnRec("k", "v", "")}); code != 0 {
			t.Fatalf("batch %d: %v", seq, kerr.ErrorForCode(code))
		}
	}
	if want := []string{"bad/9/0/txv/0", "good/10/1/txv/0"}; !slices.Equal(calls, want) {
		t.Fatalf("hook calls %q, want %q", calls, want)
	}
	if code := produceTxnBatch(t, b, cl, topic, &good, 10, 0, 0, []record.Record{txnRec("k", "zombie", "")}); !errors.Is(kerr.ErrorForCode(code), kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie: %v", kerr.ErrorForCode(code))
	}
}
