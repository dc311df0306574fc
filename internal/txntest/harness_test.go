package txntest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbed.RemoveKorvetBuild()
	os.Exit(code)
}

// broker is one korvet on its own redis-server, and an admin client.
type broker struct {
	*testbed.Korvet
	redis *testbed.Redis
	adm   *kadm.Client
}

func startBroker(t *testing.T, extra string) *broker {
	t.Helper()
	if testing.Short() {
		t.Skip("runs korvet")
	}
	r := testbed.StartRedis(t)
	k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL, NodeID: 1, Extra: extra})
	return &broker{Korvet: k, redis: r, adm: kafkaload.Admin(t, []string{k.KafkaAddr})}
}

func (b *broker) createTopic(t *testing.T, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	kafkaload.CreateTopic(t, b.adm, topic, partitions, configs, 20*time.Second)
}

// produceInput writes n records key "i", value "in-i" with an idempotent
// producer and waits for every acknowledgement.
func produceInput(t *testing.T, seeds []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "%d", i), Value: fmt.Appendf(nil, "in-%d", i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce input: %v", err)
	}
}

// readAll waits until no transaction is open on topic, reads it from the
// start to its end offsets (read_committed when committed) and returns
// its records, control records left out: they are kept in the fetch only so that a partition
// ending in a marker is seen to its end.
func readAll(t *testing.T, seeds []string, adm *kadm.Client, topic string, committed bool, within time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	// A transaction's end is answered once decided; its markers follow.
	// Read once no transaction is open, so that the last stable offsets
	// are the ends and every committed record is there to see.
	var ends kadm.ListedOffsets
	testbed.WaitFor(t, within, "no open transaction on "+topic+" (last stable offsets = ends)", func() bool {
		var err1, err2 error
		var stable kadm.ListedOffsets
		ends, err1 = adm.ListEndOffsets(ctx, topic)
		stable, err2 = adm.ListCommittedOffsets(ctx, topic)
		if err1 != nil || err2 != nil || ends.Error() != nil || stable.Error() != nil {
			return false
		}
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			if s, ok := stable.Lookup(topic, o.Partition); !ok || s.Offset != o.Offset {
				same = false
			}
		})
		return same
	})
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s (committed %v): still waiting for partitions to reach %v", topic, committed, want)
		}
		for _, e := range fs.Errors() {
			t.Logf("read %s: %v", topic, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}
