package txntest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// TestTransactionsAcrossTiers: a partition holding committed and aborted
// transactions between plain records is archived to the cold tier and
// dropped from Redis. read_committed and read_uncommitted consumers read
// the same records, at the same offsets, byte for byte, before and after.
func TestTransactionsAcrossTiers(t *testing.T) {
	b := startBroker(t, "cold.archive_interval = \"200ms\"\n")
	const topic = "tiered"
	b.createTopic(t, topic, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("4000"),
		"local.retention.ms": kadm.StringPtr("-1"), "retention.ms": kadm.StringPtr("-1"),
	})
	seeds := []string{b.KafkaAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	txn, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tiered-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	for n := range 24 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 6 {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "t%d-%d", n, i), Value: fmt.Appendf(nil, "txn %d/%d %s", n, i, strings.Repeat("v", 150))})
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		// Plain records land inside the open transaction's range.
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "p%d", n), Value: []byte(strings.Repeat("p", 120))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(n%3 != 0)); err != nil {
			t.Fatalf("end transaction %d: %v", n, err)
		}
	}
	type seen struct {
		Offset     int64
		Key, Value string
	}
	read := func(committed bool) []seen {
		var out []seen
		for _, r := range readAll(t, seeds, b.adm, topic, committed, time.Minute) {
			out = append(out, seen{r.Offset, string(r.Key), string(r.Value)})
		}
		return out
	}
	committedBefore, allBefore := read(true), read(false)
	aborted := 0
	for _, r := range allBefore {
		var n, i int
		if _, err := fmt.Sscanf(r.Key, "t%d-%d", &n, &i); err == nil && n%3 == 0 {
			aborted++
			if slices.Contains(committedBefore, r) {
				t.Fatalf("read_committed saw %s of an aborted transaction", r.Key)
			}
		}
	}
	if len(committedBefore) != 16*6+24 {
		got := map[string]bool{}
		for _, r := range committedBefore {
			got[r.Key] = true
		}
		for _, r := range allBefore {
			var n, i int
			if _, err := fmt.Sscanf(r.Key, "t%d-%d", &n, &i); (err != nil || n%3 != 0) && !got[r.Key] {
				t.Errorf("read_committed misses %s at offset %d", r.Key, r.Offset)
			}
		}
	}
	if aborted != 8*6 || len(committedBefore) != 16*6+24 {
		t.Fatalf("before archiving: %d committed-visible records, %d aborted in all; want %d and %d", len(committedBefore), aborted, 16*6+24, 8*6)
	}

	// Drop the local copies: reads now come from the cold tier.
	if _, err := b.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "local.retention.ms", Value: kadm.StringPtr("0")}}, topic); err != nil {
		t.Fatal(err)
	}
	rc, err := resp.New(b.redis.URL, resp.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	testbed.WaitFor(t, time.Minute, "every sealed segment archived and dropped from Redis", func() bool {
		r, err := rc.Do(ctx, "KEYS", "korvet:storage:local:"+topic+":0:*")
		return err == nil && len(r.Elems(nil)) == 1
	})
	committedAfter, allAfter := read(true), read(false)
	if !slices.Equal(committedBefore, committedAfter) {
		t.Errorf("read_committed differs after archiving: %d records before, %d after", len(committedBefore), len(committedAfter))
	}
	if !slices.Equal(allBefore, allAfter) {
		t.Errorf("read_uncommitted differs after archiving: %d records before, %d after", len(allBefore), len(allAfter))
	}
	t.Logf("%d records (%d visible to read_committed) read the same from Redis and from the cold tier", len(allAfter), len(committedAfter))
}
