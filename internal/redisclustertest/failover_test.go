package redisclustertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// TestKillMasterDuringProduce: franz-go's idempotent acks=all producer
// writes to a 3-partition topic through korvet with redis.wait_replicas = 1
// (every append waits until a replica has it) while the master serving
// partition 0's slot is killed with SIGKILL mid-stream. Its replica is
// promoted; the producer sees only errors it retries, and afterwards
// every acknowledged record is in the log exactly once, in order, where
// korvet said it was.
func TestKillMasterDuringProduce(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 1, "redis.wait_replicas = 1\nredis.wait_timeout = \"1s\"\n")
	const topic = "payments"
	e.createTopic(topic, 3, nil)
	lp := startLoad(t, e.seeds(), topic)
	tc := startTail(t, e.seeds(), topic)
	lp.waitMore(t, 500, 30*time.Second)

	victim := e.rc.MasterOf(t, partitionTag(topic, 0))
	before := lp.ackedCount()
	t0 := time.Now()
	e.rc.Kill(t, victim)
	t.Logf("SIGKILL master %s (serves %s) after %d acknowledged records", victim.Addr, partitionTag(topic, 0), before)
	promoted := e.rc.WaitPromoted(t, victim)
	t.Logf("replica %s promoted %v after the kill", promoted.Addr, time.Since(t0).Round(time.Millisecond))
	if got := e.rc.MasterOf(t, partitionTag(topic, 0)); got != promoted {
		t.Fatalf("partition 0's slot is served by %s, not the promoted replica %s", got.Addr, promoted.Addr)
	}

	// Partition 0 takes writes again.
	firstAfter := lp.waitPartition(t, 0, before, 60*time.Second)
	t.Logf("first record acknowledged on partition 0 after the kill: %v after it", firstAfter.Sub(t0).Round(time.Millisecond))
	fmt.Printf("master failover: %dms until partition 0 took writes again\n", firstAfter.Sub(t0).Milliseconds())
	lp.waitMore(t, 500, 60*time.Second)
	acked := lp.finish(t)
	tc.waitAll(t, acked, 60*time.Second)
	checkLog(t, e.seeds(), e.adm, topic, acked)
}

// TestTwoBrokersOnCluster: korvet brokers 1 and 2 (2s lease) on the
// Redis Cluster both lead partitions of a 6-partition topic while a
// producer and a consumer run; broker 2 is killed with SIGKILL and broker
// 1 takes its partitions within seconds; producing and consuming carry
// on, and every acknowledged record is in the log once, in order.
func TestTwoBrokersOnCluster(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 2, "")
	const topic, partitions = "shipments", 6
	e.createTopic(topic, partitions, nil)
	leaders := e.waitLeaders(topic, partitions, 30*time.Second, func(m map[int32]int32) bool {
		return len(ledBy(m, 1)) > 0 && len(ledBy(m, 2)) > 0
	})
	moved := ledBy(leaders, 2)
	t.Logf("leaders %v", leaders)
	lp := startLoad(t, e.seeds(), topic)
	tc := startTail(t, e.seeds(), topic)
	lp.waitMore(t, 500, 30*time.Second)

	before := lp.ackedCount()
	t0 := time.Now()
	e.brokers[1].Kill()
	t.Logf("SIGKILL broker 2, leader of %v", moved)
	e.waitLeaders(topic, partitions, 20*time.Second, func(m map[int32]int32) bool { return len(ledBy(m, 1)) == partitions })
	took := time.Since(t0)
	t.Logf("broker 1 leads every partition %v after the kill", took.Round(time.Millisecond))
	fmt.Printf("broker failover: %dms until broker 1 led all %d partitions\n", took.Milliseconds(), partitions)
	for _, p := range moved {
		lp.waitPartition(t, p, before, 30*time.Second)
	}
	lp.waitMore(t, 300, 30*time.Second)
	acked := lp.finish(t)
	tc.waitAll(t, acked, 60*time.Second)
	checkLog(t, []string{e.brokers[0].KafkaAddr}, e.adm, topic, acked)
}

// ledBy lists the partitions a node leads, sorted.
func ledBy(leaders map[int32]int32, node int32) []int32 {
	var ps []int32
	for p, n := range leaders {
		if n == node {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// waitPartition waits until a record to partition p is acknowledged
// after the first `after` acknowledgements, and returns when it was.
func (lp *loadProducer) waitPartition(t *testing.T, p int32, after int, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	testbed.WaitFor(t, within, fmt.Sprintf("an acknowledged record on partition %d", p), func() bool {
		lp.mu.Lock()
		defer lp.mu.Unlock()
		for _, a := range lp.acked[min(after, len(lp.acked)):] {
			if a.partition == p {
				at = a.at
				return true
			}
		}
		return false
	})
	return at
}
