package redisclustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/resp"
)

// TestPartitionsSpreadOverMasters: the partitions of a 12-partition topic
// land on all three masters. Each partition's keys carry the hash tag
// {topic:partition}; for topic "orders" the tags {orders:0}..{orders:11}
// hash to slots 8578, 12707, 448, 4577, 8454, 12583, 324, 4453, 8330,
// 12459, 13089 and 8960: four on each master of redis-cli's layout
// (0-5460, 5461-10922, 10923-16383). The test checks that against the
// live slot map first. After one record to every partition, KEYS on each
// master (through a resp cluster client's DoNode) finds segment streams,
// and each partition's streams are on the master that serves its slot.
func TestPartitionsSpreadOverMasters(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 1, "")
	const topic, partitions = "orders", 12
	shards := e.shards()
	want := map[string][]int32{} // master -> partitions it should hold
	for p := range int32(partitions) {
		m := masterOf(shards, partitionSlot(topic, p))
		if m == "" {
			t.Fatalf("no master serves slot %d of partition %d", partitionSlot(topic, p), p)
		}
		want[m] = append(want[m], p)
	}
	if len(want) != 3 {
		t.Fatalf("the tags of %s hash to %d masters (%v), not 3: pick another topic name", topic, len(want), want)
	}

	e.createTopic(topic, partitions, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := range int32(partitions) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "to %d", p)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Appends are on Redis when acknowledged: no wait needed.
	streams, err := e.segmentStreams(topic)
	if err != nil {
		t.Fatal(err)
	}
	for master, ps := range want {
		keys := streams[master]
		if len(keys) == 0 {
			t.Errorf("master %s holds no segment stream of %s (it serves partitions %v)", master, topic, ps)
		}
		var held []int32
		for _, k := range keys {
			var p int32
			if _, err := fmt.Sscanf(k[strings.Index(k, "{"):], "{"+topic+":%d}", &p); err != nil {
				t.Errorf("master %s: key %q does not carry a {%s:N} tag", master, k, topic)
				continue
			}
			if m := masterOf(shards, resp.Slot(k)); m != master {
				t.Errorf("key %q (slot %d) is on %s, but %s serves that slot", k, resp.Slot(k), master, m)
			}
			if !slices.Contains(held, p) {
				held = append(held, p)
			}
		}
		slices.Sort(held)
		if !slices.Equal(held, ps) {
			t.Errorf("master %s holds segment streams of partitions %v, want %v", master, held, ps)
		}
		n, err := e.dbsize(master)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("master %s: partitions %v, %d segment streams, DBSIZE %d", master, ps, len(keys), n)
	}
}

// dbsize is DBSIZE of the node at addr.
func (e *env) dbsize(addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := e.redis.DoNode(ctx, addr, "DBSIZE")
	if err != nil {
		return 0, fmt.Errorf("DBSIZE on %s: %w", addr, err)
	}
	return r.Int()
}
