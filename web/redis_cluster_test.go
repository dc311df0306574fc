package web

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// spreadTopic returns a topic name whose partitions' meta keys land on
// every master of c, and how many land on each (by master address).
func spreadTopic(t *testing.T, c *testbed.RedisCluster, partitions int32) (string, map[string]int) {
	t.Helper()
	ks := keys.New(keys.Default, true)
	for i := range 100 {
		topic := fmt.Sprintf("spread-%d", i)
		per := map[string]int{}
		for p := range partitions {
			per[c.MasterOf(t, ks.Partition(topic, p)).Addr]++
		}
		if len(per) == c.Masters {
			return topic, per
		}
	}
	t.Fatalf("no topic of %d partitions spreads over %d masters", partitions, c.Masters)
	return "", nil
}

// On a Redis Cluster of 3 masters and 3 replicas: three shards serving
// every slot between them, each with its replica, the partitions of a
// topic counted where their keys live, and /metrics with the same
// figures. A replica that hangs shows as unreachable, and the rest is
// still answered at once. A slot moved to another master moves its
// partition there, and the client's MOVED shows in the counters.
func TestAPIRedisCluster(t *testing.T) {
	c := testbed.StartRedisCluster(t, 3, 1)
	rc, err := resp.New(c.URL, resp.Options{Cluster: true, Seeds: c.Seeds})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), rc, engine.Options{Logger: quiet, GroupInitialRebalanceDelay: -1})
	if err != nil {
		rc.Close()
		t.Fatalf("open engine: %v", err)
	}
	t.Cleanup(func() { eng.Close(); rc.Close() })
	ctx := context.Background()

	topic, per := spreadTopic(t, c, 12)
	tp, err := eng.CreateTopic(ctx, topic, 12, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tp.Partitions() {
		if _, _, err := p.Append([]record.Record{{Value: []byte("v"), Timestamp: time.Now().UnixMilli()}}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// __consumer_offsets's one partition is counted too.
	per[c.MasterOf(t, keys.New(keys.Default, true).Partition("__consumer_offsets", 0)).Addr]++
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})

	rd := redisOf(t, h)
	if !rd.Cluster || rd.Error != "" || len(rd.Shards) != 3 || rd.Partitions != 13 || rd.Unserved != 0 {
		t.Fatalf("redis = %+v; want a cluster of 3 shards, 13 partitions", rd)
	}
	slots := 0
	replicaOf := map[string]string{}
	for _, sh := range rd.Shards {
		slots += sh.Slots
		if sh.Partitions != per[sh.Master] || sh.Partitions == 0 || sh.ID != c.NodeID(nodeAt(t, c, sh.Master)) || sh.SlotRanges == "" {
			t.Errorf("shard %s: %+v; want %d partitions", sh.Master, sh, per[sh.Master])
		}
		if len(sh.Nodes) != 2 || sh.Nodes[0].Addr != sh.Master || sh.Nodes[0].Role != "master" || sh.Nodes[1].Role != "replica" {
			t.Fatalf("shard %s nodes = %+v; want its master and one replica", sh.Master, sh.Nodes)
		}
		for _, n := range sh.Nodes {
			if !n.Up || n.UsedMemory <= 0 || n.Keys <= 0 && n.Role == "master" {
				t.Errorf("node %+v", n)
			}
		}
		replicaOf[sh.Master] = sh.Nodes[1].Addr
	}
	if slots != resp.SlotCount {
		t.Errorf("shards serve %d slots, want %d", slots, resp.SlotCount)
	}

	m := metricValues(t, h)
	want := map[string]float64{"korvet_redis_cluster": 1, "korvet_redis_shards": 3}
	for _, sh := range rd.Shards {
		want["korvet_redis_shard_slots{shard="+sh.Master+"}"] = float64(sh.Slots)
		want["korvet_redis_shard_partitions{shard="+sh.Master+"}"] = float64(per[sh.Master])
		want["korvet_redis_node_up{node="+sh.Master+",role=master}"] = 1
		want["korvet_redis_node_up{node="+replicaOf[sh.Master]+",role=replica}"] = 1
	}
	for key, v := range want {
		if got, ok := m[key]; !ok || got != v {
			t.Errorf("%s = %v (found %v), want %v", key, got, ok, v)
		}
	}
	for _, n := range c.Nodes {
		role := "master"
		if _, isMaster := per[n.Addr]; !isMaster {
			role = "replica"
		}
		if v := m["korvet_redis_node_used_memory_bytes{node="+n.Addr+",role="+role+"}"]; v <= 0 {
			t.Errorf("korvet_redis_node_used_memory_bytes{node=%s,role=%s} = %v", n.Addr, role, v)
		}
	}
	if v, ok := m["korvet_redis_slot_map_refreshes_total"]; !ok || v < 1 {
		t.Errorf("korvet_redis_slot_map_refreshes_total = %v (found %v), want >= 1", v, ok)
	}

	// A replica that hangs: shown unreachable, the page still quick.
	hung := replicaOf[rd.Shards[0].Master]
	resume := pause(t, rc, hung)
	testbed.WaitFor(t, 30*time.Second, "the hung replica shown unreachable", func() bool {
		start := time.Now()
		rd = redisOf(t, h)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("/api/v1/redis took %v with a view cached", d)
		}
		for _, sh := range rd.Shards {
			for _, n := range sh.Nodes {
				if n.Addr == hung {
					return !n.Up && n.Error != ""
				}
			}
		}
		return false
	})
	for _, sh := range rd.Shards {
		if !sh.Nodes[0].Up || sh.Partitions != per[sh.Master] {
			t.Errorf("with a replica hung: shard %+v", sh)
		}
	}
	if v := metricValues(t, h)["korvet_redis_node_up{node="+hung+",role=replica}"]; v != 0 {
		t.Errorf("korvet_redis_node_up of the hung replica = %v", v)
	}
	resume()
	c.WaitOK(t)

	// Move partition 0's slot to another master: the next append follows
	// MOVED (or the slot map reload that beat it to it), and the
	// partition is counted on its new shard. The page's counters are the
	// client's.
	before := rc.Stats()
	ks := keys.New(keys.Default, true)
	key := ks.Partition(topic, 0)
	from := c.MasterOf(t, key)
	to := c.Nodes[0]
	if to == from {
		to = c.Nodes[1]
	}
	c.MoveSlot(t, resp.Slot(key), to)
	p0 := tp.Partition(0)
	testbed.WaitFor(t, 30*time.Second, "an append after the move", func() bool {
		_, _, err := p0.Append([]record.Record{{Value: []byte("after"), Timestamp: time.Now().UnixMilli()}}).Wait(ctx)
		return err == nil
	})
	per[from.Addr]--
	per[to.Addr]++
	testbed.WaitFor(t, 30*time.Second, "the partition counted on its new shard", func() bool {
		rd = redisOf(t, h)
		for _, sh := range rd.Shards {
			if sh.Partitions != per[sh.Master] {
				return false
			}
		}
		s := rc.Stats()
		return rd.Redirects == redisRedirectJSON{Moved: s.Moved, Ask: s.Ask, TryAgain: s.TryAgain, ClusterDown: s.ClusterDown} &&
			rd.Refreshes == s.Refreshes && (s.Moved+s.Ask > before.Moved+before.Ask || s.Refreshes > before.Refreshes)
	})
	m = metricValues(t, h)
	if v := m["korvet_redis_redirects_total{kind=moved}"]; v < float64(rd.Redirects.Moved) {
		t.Errorf("korvet_redis_redirects_total{kind=moved} = %v, the API said %d", v, rd.Redirects.Moved)
	}
	if v := m["korvet_redis_slot_map_refreshes_total"]; v < float64(rd.Refreshes) {
		t.Errorf("korvet_redis_slot_map_refreshes_total = %v, the API said %d", v, rd.Refreshes)
	}
	if v := m["korvet_redis_shard_partitions{shard="+to.Addr+"}"]; v != float64(per[to.Addr]) {
		t.Errorf("korvet_redis_shard_partitions{shard=%s} = %v, want %d", to.Addr, v, per[to.Addr])
	}
	t.Logf("client counters after the move: %+v", rc.Stats())
}

// nodeAt returns the node of c at addr.
func nodeAt(t *testing.T, c *testbed.RedisCluster, addr string) *testbed.Redis {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("no node at %s", addr)
	return nil
}
