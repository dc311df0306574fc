package redisclustertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// TestKillMasterDuringProduce: franz-go's idempotent acks=all producer
// writes to a 3-partition topic through korvet with redis.wait_replicas = 1
// (an append is acknowledged once a replica has it) while the master
// serving partition 0's slot is killed with SIGKILL mid-stream. Its
// replica is promoted. Having no replica of its own then, it cannot
// confirm appends to partition 0 (NOT_ENOUGH_REPLICAS_AFTER_APPEND, which
// the producer retries) until the killed node is started again and
// rejoins as its replica. The producer sees only errors it retries, and
// afterwards every acknowledged record is in the log exactly once, in
// order, where korvet said it was.
func TestKillMasterDuringProduce(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 1, "redis.wait_replicas = 1\nredis.wait_timeout = \"1s\"\n")
	const topic = "payments"
	e.createTopic(topic, 3, nil)
	lp := kafkaload.StartProducer(t, e.seeds(), topic, kafkaload.Options{})
	tc := kafkaload.StartTail(t, e.seeds(), topic)
	lp.WaitMore(t, 500, 30*time.Second)

	victim := e.rc.MasterOf(t, partitionTag(topic, 0))
	before := lp.AckedCount()
	t0 := time.Now()
	e.rc.Kill(t, victim)
	t.Logf("SIGKILL master %s (serves %s) after %d acknowledged records", victim.Addr, partitionTag(topic, 0), before)
	promoted := e.rc.WaitPromoted(t, victim)
	promotedIn := time.Since(t0)
	t.Logf("replica %s promoted %v after the kill", promoted.Addr, promotedIn.Round(time.Millisecond))
	if got := e.rc.MasterOf(t, partitionTag(topic, 0)); got != promoted {
		t.Fatalf("partition 0's slot is served by %s, not the promoted replica %s", got.Addr, promoted.Addr)
	}
	// The other shards carry on meanwhile.
	lp.WaitMore(t, 200, 30*time.Second)

	// The killed node comes back (AOF) and becomes the new master's
	// replica: appends to partition 0 can be confirmed again.
	victim.Restart(t)
	t1 := time.Now()
	testbed.Eventually(t, 30*time.Second, promoted.Addr+" has a replica again", func() (bool, string) {
		info, _ := e.rc.Do(t, promoted, "INFO", "replication").(string)
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online"), info
	})
	e.rc.WaitOK(t)
	t.Logf("%s restarted; a replica of %s again %v later", victim.Addr, promoted.Addr, time.Since(t1).Round(time.Millisecond))

	firstAfter := lp.WaitPartition(t, 0, before, 60*time.Second)
	t.Logf("first record acknowledged on partition 0 after the kill: %v after the kill, %v after the restart", firstAfter.Sub(t0).Round(time.Millisecond), firstAfter.Sub(t1).Round(time.Millisecond))
	fmt.Printf("master failover: promoted in %dms; partition 0 took writes again %dms after the kill, %dms after the old master returned as replica\n",
		promotedIn.Milliseconds(), firstAfter.Sub(t0).Milliseconds(), firstAfter.Sub(t1).Milliseconds())
	lp.WaitMore(t, 500, 60*time.Second)
	acked := lp.Finish(t)
	tc.WaitAll(t, acked, 60*time.Second)
	kafkaload.CheckLog(t, e.seeds(), e.adm, topic, kafkaload.Check{Acked: acked, ReadPastRetriable: true})
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
		return len(kafkaload.LedBy(m, 1)) > 0 && len(kafkaload.LedBy(m, 2)) > 0
	})
	moved := kafkaload.LedBy(leaders, 2)
	t.Logf("leaders %v", leaders)
	lp := kafkaload.StartProducer(t, e.seeds(), topic, kafkaload.Options{})
	tc := kafkaload.StartTail(t, e.seeds(), topic)
	lp.WaitMore(t, 500, 30*time.Second)

	before := lp.AckedCount()
	t0 := time.Now()
	e.brokers[1].Kill()
	t.Logf("SIGKILL broker 2, leader of %v", moved)
	e.waitLeaders(topic, partitions, 20*time.Second, func(m map[int32]int32) bool { return len(kafkaload.LedBy(m, 1)) == partitions })
	took := time.Since(t0)
	t.Logf("broker 1 leads every partition %v after the kill", took.Round(time.Millisecond))
	fmt.Printf("broker failover: %dms until broker 1 led all %d partitions\n", took.Milliseconds(), partitions)
	for _, p := range moved {
		lp.WaitPartition(t, p, before, 30*time.Second)
	}
	lp.WaitMore(t, 300, 30*time.Second)
	acked := lp.Finish(t)
	tc.WaitAll(t, acked, 60*time.Second)
	kafkaload.CheckLog(t, []string{e.brokers[0].KafkaAddr}, e.adm, topic, kafkaload.Check{Acked: acked, ReadPastRetriable: true})
}
