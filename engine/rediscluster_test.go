package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// The engine on a Redis Cluster: the cluster key layout, and leadership
// moves, which there take a compare-and-set across shards.

func openClusterBroker(t *testing.T, c *testbed.RedisCluster, node int32) *broker {
	t.Helper()
	rc, err := resp.New(c.URL, resp.Options{Cluster: true, Seeds: c.Seeds})
	if err != nil {
		t.Fatal(err)
	}
	return openBrokerOn(t, rc, node, engine.Options{Logger: testbed.Logger().With("node", node)})
}

// TestEngineOnRedisCluster runs two brokers on a 3-master cluster: a
// 12-partition topic's keys land on every master with the tagged layout;
// both brokers lead; appends and reads work; a broker that leaves hands
// over, and one that crashes has its partitions claimed.
func TestEngineOnRedisCluster(t *testing.T) {
	c := testbed.StartRedisCluster(t, 3, 0)
	ctx := context.Background()
	a := openClusterBroker(t, c, 1)
	// The tags {spread:0}..{spread:11} hash into each third of the slots,
	// so redis-cli's even split puts some on every master.
	const topic = "spread"
	if _, err := a.e.CreateTopic(ctx, topic, 12, map[string]string{"retention.ms": "-1"}, false); err != nil {
		t.Fatal(err)
	}
	b := openClusterBroker(t, c, 2)
	lead := waitSettled(t, []*broker{a, b}, topic)
	if n := counts(lead); n[1] == 0 || n[2] == 0 {
		t.Fatalf("leaders %v: both brokers should lead", lead)
	}
	byNode := map[int32]*broker{1: a, 2: b}
	for i, n := range lead {
		p := byNode[n].e.Topic(topic).Partition(int32(i))
		if _, _, err := p.Append(recs(5, time.Now().UnixMilli(), "p")).Wait(ctx); err != nil {
			t.Fatalf("append to partition %d on broker %d: %v", i, n, err)
		}
	}
	// Every master holds segment streams, under the tagged names.
	masters, err := a.rc.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("masters %v: %v", masters, err)
	}
	for _, m := range masters {
		r, err := a.rc.DoNode(ctx, m, "KEYS", "korvet:storage:local:*")
		if err != nil {
			t.Fatal(err)
		}
		var ks []resp.Reply
		ks = r.Elems(ks)
		if len(ks) == 0 {
			t.Errorf("master %s holds no segment stream", m)
		}
		for _, k := range ks {
			if !strings.HasPrefix(string(k.Bytes()), "korvet:storage:local:{"+topic+":") {
				t.Errorf("master %s holds %q, not in the cluster layout", m, k.Bytes())
			}
		}
	}
	for i, n := range lead {
		if got := readAll(t, byNode[n].e.Topic(topic).Partition(int32(i))); len(got) != 5 {
			t.Fatalf("partition %d holds %d records, want 5", i, len(got))
		}
	}

	// b leaves: its partitions are handed to a (transfer).
	b.stop(false)
	waitSettled(t, []*broker{a}, topic)
	// a crashes; a new broker 3 claims everything once a's lease lapses.
	i := slices.Index(lead, 1)
	a.stop(true)
	c3 := openClusterBroker(t, c, 3)
	p := c3.e.Topic(topic).Partition(int32(i))
	testbed.WaitFor(t, 10*time.Second, "broker 3 takes a crashed broker's partition", func() bool {
		_, _, err := p.Append(recs(1, time.Now().UnixMilli(), "after")).Wait(ctx)
		if err != nil && !errors.Is(err, engine.ErrNotLeader) {
			t.Fatalf("append during failover: %v", err)
		}
		return err == nil
	})
	waitSettled(t, []*broker{c3}, topic)
	got := readAll(t, p)
	if len(got) != 6 || string(got[5].Key) != "after-0" {
		t.Fatalf("partition %d after the failover holds %d records", i, len(got))
	}
	// Epochs: claimed by a or b (1), moved to a by the handover (2, for
	// b's), claimed by broker 3 after the crash: at least 2 everywhere.
	for j, ep := range epochs(c3, topic) {
		if ep < 2 {
			t.Errorf("partition %d at epoch %d after two moves", j, ep)
		}
	}
}
