package redisclustertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
	"github.com/korvet/korvet/resp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbed.RemoveKorvetBuild()
	os.Exit(code)
}

// keyspace is redis.keyspace in these tests (korvet's default).
const keyspace = "korvet"

// lease is kafka.broker_session_timeout where several brokers run.
const lease = 2 * time.Second

// env is korvet on a Redis Cluster of 3 masters + 3 replicas.
type env struct {
	t       *testing.T
	rc      *testbed.RedisCluster
	redis   *resp.Client // a cluster client of our own, to look at what korvet wrote
	brokers []*testbed.Korvet
	adm     *kadm.Client
}

// needRedisCluster skips t under -short and while this checkout's korvet
// cannot use a Redis Cluster (no redis.cluster key yet).
func needRedisCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a Redis Cluster and korvet brokers")
	}
	if !testbed.KorvetKnows(t, "redis", "cluster") {
		t.Skip("this korvet has no redis.cluster key yet")
	}
	testbed.NeedClient(t, "redis-cli", "redis-cli", "--version")
}

// clusterConfig is the korvet config (dotted keys) that points a broker
// at rc: the first master as redis.url, every node as a seed.
func clusterConfig(rc *testbed.RedisCluster) string {
	quoted := make([]string, len(rc.Seeds))
	for i, s := range rc.Seeds {
		quoted[i] = strconv.Quote(s)
	}
	return fmt.Sprintf("redis.cluster = true\nredis.seeds = [%s]\n", strings.Join(quoted, ", "))
}

// startEnv starts a 3+3 Redis Cluster and n korvet brokers (node ids
// 1..n) on it, each with extra (dotted keys) in its config.
func startEnv(t *testing.T, n int, extra string) *env {
	t.Helper()
	rc := testbed.StartRedisCluster(t, 3, 1)
	rcl, err := resp.New(rc.URL, resp.Options{Cluster: true, Seeds: rc.Seeds, PoolSize: 4, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("cluster client: %v", err)
	}
	t.Cleanup(func() { rcl.Close() })
	e := &env{t: t, rc: rc, redis: rcl}
	for i := range n {
		o := testbed.KorvetOptions{RedisURL: rc.URL, NodeID: int32(i + 1), Extra: clusterConfig(rc) + extra}
		if n > 1 {
			o.SessionTimeout = lease
		}
		e.brokers = append(e.brokers, testbed.StartKorvet(t, o))
	}
	e.adm = kafkaload.Admin(t, e.seeds())
	return e
}

func (e *env) seeds() []string { return kafkaload.Seeds(e.brokers) }

// createTopic creates topic and waits until every partition has a leader.
func (e *env) createTopic(topic string, partitions int32, configs map[string]*string) {
	e.t.Helper()
	kafkaload.CreateTopic(e.t, e.adm, topic, partitions, configs, 30*time.Second)
}

// waitLeaders waits until every partition of topic has a leader and ok
// holds for the leader map, and returns that map.
func (e *env) waitLeaders(topic string, partitions int32, within time.Duration, ok func(map[int32]int32) bool) map[int32]int32 {
	e.t.Helper()
	return kafkaload.WaitLeaders(e.t, e.adm, topic, partitions, within, ok)
}

// partitionTag is the hash tag korvet's cluster key layout gives a
// partition's keys ({topic:partition}, engine/keys).
func partitionTag(topic string, p int32) string { return fmt.Sprintf("{%s:%d}", topic, p) }

// partitionSlot is the hash slot of a partition's keys.
func partitionSlot(topic string, p int32) int { return resp.Slot(partitionTag(topic, p)) }

// shards is the cluster's slot map now, from our own cluster client.
func (e *env) shards() []resp.Shard {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sh, err := e.redis.Shards(ctx)
	if err != nil {
		e.t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	if len(sh) == 0 {
		e.t.Fatal("the cluster client sees no shards")
	}
	return sh
}

// masterOf is the master serving slot in shards ("" if none does).
func masterOf(shards []resp.Shard, slot int) string {
	for _, s := range shards {
		for _, r := range s.Slots {
			if slot >= r[0] && slot <= r[1] {
				return s.Master
			}
		}
	}
	return ""
}

// nodeKeys lists the keys matching pattern on the node at addr.
func (e *env) nodeKeys(addr, pattern string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := e.redis.DoNode(ctx, addr, "KEYS", pattern)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("KEYS %s on %s: %w", pattern, addr, err)
	}
	var out []string
	r.ForEach(func(k resp.Reply) bool {
		out = append(out, string(k.Bytes()))
		return true
	})
	return out, nil
}

// segmentStreams lists, per master address, korvet's segment streams of
// topic (every topic if topic is "") on that master.
func (e *env) segmentStreams(topic string) (map[string][]string, error) {
	pattern := keyspace + ":storage:local:*"
	if topic != "" {
		pattern = keyspace + ":storage:local:{" + topic + ":*"
	}
	out := map[string][]string{}
	for _, s := range e.shards() {
		ks, err := e.nodeKeys(s.Master, pattern)
		if err != nil {
			return nil, err
		}
		slices.Sort(ks)
		out[s.Master] = ks
	}
	return out, nil
}

// record is what a test produced and expects back, byte for byte.
type record struct {
	Partition int32
	Key       []byte // nil: a null key
	Value     []byte
	Headers   []kgo.RecordHeader
}

func (r record) String() string {
	return fmt.Sprintf("p%d key %q value %q (%d bytes) headers %v", r.Partition, r.Key, trim(r.Value), len(r.Value), r.Headers)
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func sameRecord(a, b record) bool {
	if a.Partition != b.Partition || !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// checkRecords compares what was read with what was produced, per
// partition and in order: bytes in == bytes out.
func checkRecords(t *testing.T, who string, got, want []record) {
	t.Helper()
	byP := func(rs []record) map[int32][]record {
		m := map[int32][]record{}
		for _, r := range rs {
			m[r.Partition] = append(m[r.Partition], r)
		}
		return m
	}
	g, w := byP(got), byP(want)
	bad := 0
	for p, ws := range w {
		gs := g[p]
		if len(gs) != len(ws) {
			t.Errorf("%s: partition %d holds %d records, want %d", who, p, len(gs), len(ws))
		}
		for i := range min(len(gs), len(ws)) {
			if !sameRecord(gs[i], ws[i]) {
				if bad++; bad <= 5 {
					t.Errorf("%s: partition %d record %d is %v, want %v", who, p, i, gs[i], ws[i])
				}
			}
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			t.Errorf("%s: %d records in partition %d, where none were produced", who, len(g[p]), p)
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d records differ from what was produced", who, bad)
	}
}

func asRecords(rs []*kgo.Record) []record {
	out := make([]record, len(rs))
	for i, r := range rs {
		out[i] = record{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	return out
}
