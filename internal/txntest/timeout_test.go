package txntest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// TestTransactionTimeout: a producer begins a transaction, writes, and
// vanishes. korvet aborts it after its timeout: the last stable offset
// moves past it, read_committed consumers never see its records, and the
// producer, should it come back, is fenced.
func TestTransactionTimeout(t *testing.T) {
	b := startBroker(t, "")
	const topic = "vanish"
	b.createTopic(t, topic, 2, nil)
	seeds := []string{b.KafkaAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A committed record first, so read_committed has something to see.
	produceInput(t, seeds, topic, 4)

	zombie, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("vanishing"), kgo.TransactionTimeout(2*time.Second),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "z%d", i), Value: []byte("never-committed")})
	}
	if err := zombie.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	started := time.Now()
	// While the transaction is open the last stable offset stays below
	// the end on the partitions it wrote.
	stable := func() (open bool, lso, end map[int32]int64) {
		l, err1 := b.adm.ListCommittedOffsets(ctx, topic)
		e, err2 := b.adm.ListEndOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			t.Fatalf("list offsets: %v %v", err1, err2)
		}
		lso, end = map[int32]int64{}, map[int32]int64{}
		l.Each(func(o kadm.ListedOffset) { lso[o.Partition] = o.Offset })
		e.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
		for p := range end {
			if lso[p] < end[p] {
				open = true
			}
		}
		return open, lso, end
	}
	if open, lso, end := stable(); !open {
		t.Fatalf("an open transaction, yet last stable offsets %v equal the ends %v", lso, end)
	}
	testbed.WaitFor(t, time.Minute, "the timed-out transaction to be aborted (LSO = end)", func() bool {
		open, _, _ := stable()
		return !open
	})
	t.Logf("aborted %v after the transaction began (timeout 2s)", time.Since(started).Round(100*time.Millisecond))

	for _, r := range readAll(t, seeds, b.adm, topic, true, time.Minute) {
		if string(r.Value) == "never-committed" {
			t.Fatalf("read_committed saw %s of the aborted transaction", r.Key)
		}
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the timed-out producer committed its transaction")
	} else {
		t.Logf("the timed-out producer's commit: %v", err)
	}
	for _, r := range readAll(t, seeds, b.adm, topic, true, time.Minute) {
		if string(r.Value) == "never-committed" {
			t.Fatalf("after the zombie's commit, read_committed saw %s", r.Key)
		}
	}
}
