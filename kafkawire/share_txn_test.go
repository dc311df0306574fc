package kafkawire_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

// TestShareGroupTransactions: a share group reading a partition with
// committed and aborted transactions gets every data record once (share
// groups read uncommitted, Kafka's default share.isolation.level), byte
// for byte, and never a commit or abort marker as a record: markers go
// out as control batches, which clients skip.
func TestShareGroupTransactions(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 90*time.Second)
	const topic = "shtx"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	txn := b.client(kgo.DefaultProduceTopic(topic), kgo.TransactionalID("share-txn"))
	for _, tr := range []struct {
		keys   []string
		commit bool
	}{{[]string{"a0", "a1", "a2"}, true}, {[]string{"b0", "b1", "b2"}, false}, {[]string{"c0", "c1"}, true}} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, k := range tr.keys {
			if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte("value-" + k)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(tr.commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceAll(t, b.client(), []*kgo.Record{{Topic: topic, Key: []byte("p0"), Value: []byte("value-p0")}})
	adm := b.admin()
	testbed.WaitFor(t, 30*time.Second, "no open transaction (last stable offset = end)", func() bool {
		end, err1 := adm.ListEndOffsets(ctx, topic)
		stable, err2 := adm.ListCommittedOffsets(ctx, topic)
		e, _ := end.Lookup(topic, 0)
		s, _ := stable.Lookup(topic, 0)
		return err1 == nil && err2 == nil && e.Offset == s.Offset
	})
	setGroupConfig(t, b, "sg", "share.auto.offset.reset", "earliest")
	cl := b.client(kgo.ShareGroup("sg"), kgo.ConsumeTopics(topic))
	var got []string
	for !slices.Contains(got, "p0") {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("share consumer got %v, never p0", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() || string(r.Value) != "value-"+string(r.Key) {
				t.Fatalf("share consumer got %q=%q at %d (control %v)", r.Key, r.Value, r.Offset, r.Attrs.IsControl())
			}
			got = append(got, string(r.Key))
		})
	}
	slices.Sort(got)
	if want := []string{"a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "p0"}; !slices.Equal(got, want) {
		t.Fatalf("share consumer got %v, want %v", got, want)
	}
}
