package kafkawire_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/kafkawire/batch"
)

// apiCounts reads korvet_kafka_requests_total per API from reg: what
// reached the broker, whatever the client thinks it sent.
func apiCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "korvet_kafka_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "api" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// readCommitted polls topic from the start under read_committed until
// it holds want records (or the deadline), and returns their values.
func readCommitted(t *testing.T, b *broker, ctx context.Context, topic string, want int) []string {
	t.Helper()
	cl := b.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	testbed.Eventually(t, 20*time.Second, fmt.Sprintf("%d committed records in %s", want, topic), func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		return len(got) >= want, fmt.Sprintf("%d: %q", len(got), got)
	})
	return got
}

// TestTxnKgoV2: with transaction.version 2 advertised, franz-go runs the
// KIP-890 flow: no AddPartitionsToTxn nor AddOffsetsToTxn reaches the
// broker (produce and TxnOffsetCommit v5 add implicitly), every EndTxn
// bumps the epoch, and read_committed sees the committed transactions
// only. A GroupTransactSession copies a topic exactly once with its
// offsets committed in the transactions.
func TestTxnKgoV2(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startBrokerWith(t, engine.Options{AutoCreateTopics: true}, kafkawire.Options{Metrics: kafkawire.NewMetrics(reg)})
	ctx := ctxT(t, 90*time.Second)
	for _, tp := range []string{"v2-out", "v2-in", "v2-copy"} {
		if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	p := b.client(kgo.TransactionalID("v2-app"), kgo.TransactionTimeout(20*time.Second), kgo.DefaultProduceTopic("v2-out"))
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "t%d-%d", i, j)}).FirstErr(); err != nil {
				t.Fatalf("transaction %d: %v", i, err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
		// KIP-890: the EndTxn answer carries the next epoch.
		pid2, epoch2, err := p.ProducerID(ctx)
		if err != nil || pid2 != pid || epoch2 != epoch+1 {
			t.Fatalf("after transaction %d: producer %d/%d %v, want %d/%d", i, pid2, epoch2, err, pid, epoch+1)
		}
		epoch = epoch2
	}
	got := readCommitted(t, b, ctx, "v2-out", 6)
	if want := "[t0-0 t0-1 t0-2 t2-0 t2-1 t2-2]"; fmt.Sprint(got) != want {
		t.Fatalf("read_committed: %v, want %s", got, want)
	}

	// The exactly-once copy, offsets committed by TxnOffsetCommit v5.
	seed := b.client(kgo.DefaultProduceTopic("v2-in"))
	for i := range 20 {
		if err := seed.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "in-%02d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.addr), kgo.TransactionalID("v2-copier"),
		kgo.ConsumerGroup("v2-group"), kgo.ConsumeTopics("v2-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic("v2-copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	copied := 0
	testbed.Eventually(t, 30*time.Second, "the session copied the input", func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := s.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 {
			return copied >= 20, fmt.Sprintf("%d copied", copied)
		}
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Value: append([]byte("copy-"), r.Value...)}, nil)
		})
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("session end: committed %v, %v", committed, err)
		}
		copied += fs.NumRecords()
		return copied >= 20, fmt.Sprintf("%d copied", copied)
	})
	if got := readCommitted(t, b, ctx, "v2-copy", 20); len(got) != 20 || got[0] != "copy-in-00" || got[19] != "copy-in-19" {
		t.Fatalf("copied: %v", got)
	}
	offs, err := b.admin().FetchOffsets(ctx, "v2-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("v2-in", 0); !ok || o.At != 20 {
		t.Fatalf("the group's committed offset: %+v %v, want 20", o, ok)
	}
	n := apiCounts(t, reg)
	if n["AddPartitionsToTxn"] != 0 || n["AddOffsetsToTxn"] != 0 {
		t.Fatalf("the v1 flow was used: AddPartitionsToTxn %v, AddOffsetsToTxn %v", n["AddPartitionsToTxn"], n["AddOffsetsToTxn"])
	}
	if n["EndTxn"] < 4 || n["TxnOffsetCommit"] < 1 {
		t.Fatalf("EndTxn %v, TxnOffsetCommit %v: the transactions did not run", n["EndTxn"], n["TxnOffsetCommit"])
	}
}

// TestTxnKgoV2Fencing: a second producer of the same transactional id
// fences the first, whose next transaction's first produce (the implicit
// add) is refused with INVALID_PRODUCER_EPOCH, as Kafka's produce path
// answers a fenced producer; nothing of it reaches read_committed.
func TestTxnKgoV2Fencing(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 60*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, "v2-fence"); err != nil {
		t.Fatal(err)
	}
	first := b.client(kgo.TransactionalID("v2-fenced"), kgo.DefaultProduceTopic("v2-fence"), kgo.RecordRetries(3))
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Value: []byte("kept")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := first.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	second := b.client(kgo.TransactionalID("v2-fenced"), kgo.DefaultProduceTopic("v2-fence"))
	if _, _, err := second.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err := first.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr()
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the fenced producer's record: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, &kgo.Record{Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readCommitted(t, b, ctx, "v2-fence", 2); fmt.Sprint(got) != "[kept second]" {
		t.Fatalf("read_committed: %v", got)
	}
}

// produceTxnAt sends one transactional batch at a Produce version on a
// raw connection and returns the partition's error code.
func produceTxnAt(t *testing.T, c net.Conn, corr *int32, version int16, topic, txnID string, pid int64, epoch int16, seq int32, value string) int16 {
	t.Helper()
	raw, err := batch.AppendBatch(nil, []record.Record{txnRec("k", value, "")},
		batch.BuildOptions{HasProducer: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Attributes: batch.AttrTransactional})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return txnCall(t, c, corr, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func txnOffsetCommitAt(t *testing.T, c net.Conn, corr *int32, version int16, txnID string, pid int64, epoch int16, group, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return txnCall(t, c, corr, req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// TestTxnImplicitAddVersions: only the KIP-890 versions add implicitly.
// Produce v11 and TxnOffsetCommit v4 (the v1 flow) are refused
// INVALID_TXN_STATE for a partition or group never added; Produce v12 and
// TxnOffsetCommit v5 add them, beginning the transaction; after EndTxn v5
// the old epoch is fenced and the new one begins the next transaction.
func TestTxnImplicitAddVersions(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, "imp"); err != nil {
		t.Fatal(err)
	}
	c := rawConn(t, b.addr)
	var corr int32
	ir := initTxn(t, c, &corr, "imp-app", 30000)
	pid, e0 := ir.ProducerID, ir.ProducerEpoch
	if code := produceTxnAt(t, c, &corr, 11, "imp", "imp-app", pid, e0, 0, "v1"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce v11, partition not added: %s", codeName(code))
	}
	if code := txnOffsetCommitAt(t, c, &corr, 4, "imp-app", pid, e0, "imp-g", "imp"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit v4, group not added: %s", codeName(code))
	}
	if st := txnState(t, c, &corr, "imp-app"); st.State != "Empty" {
		t.Fatalf("after the refusals: %s", st.State)
	}
	if code := produceTxnAt(t, c, &corr, 12, "imp", "imp-app", pid, e0, 0, "v2"); code != 0 {
		t.Fatalf("produce v12: %s", codeName(code))
	}
	if code := txnOffsetCommitAt(t, c, &corr, 5, "imp-app", pid, e0, "imp-g", "imp"); code != 0 {
		t.Fatalf("TxnOffsetCommit v5: %s", codeName(code))
	}
	st := txnState(t, c, &corr, "imp-app")
	if st.State != "Ongoing" || len(st.Topics) != 1 || fmt.Sprint(st.Topics[0].Partitions) != "[0]" {
		t.Fatalf("after the implicit adds: %+v", st)
	}
	r := endTxn(t, c, &corr, 5, "imp-app", pid, e0, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != e0+1 {
		t.Fatalf("EndTxn v5: %s %d/%d", codeName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	}
	// The next transaction, right away: its first batch waits for the
	// last one's marker, which carries the bumped epoch.
	if code := produceTxnAt(t, c, &corr, 12, "imp", "imp-app", pid, e0+1, 0, "next"); code != 0 {
		t.Fatalf("produce v12 at the new epoch: %s", codeName(code))
	}
	// Before the marker a late batch of the old epoch would still join
	// the old transaction, as in Kafka (clients flush before EndTxn);
	// after it, the old epoch is fenced.
	if code := produceTxnAt(t, c, &corr, 12, "imp", "imp-app", pid, e0, 1, "zombie"); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("produce with the old epoch: %s", codeName(code))
	}
	if st := txnState(t, c, &corr, "imp-app"); st.State != "Ongoing" || st.ProducerEpoch != e0+1 {
		t.Fatalf("the next transaction: %+v", st)
	}
	sp, bs := fetchTxn(t, b, b.client(), "imp", 0, 1)
	if sp.LastStableOffset != 2 || len(bs) != 2 || !bs[1].Control() || bs[1].ProducerEpoch != e0+1 {
		t.Fatalf("read_committed: LSO %d, batches %+v", sp.LastStableOffset, bs)
	}
}
