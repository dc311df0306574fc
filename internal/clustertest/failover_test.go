package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

const partitions = 6

// workload is a cluster under load: idempotent producers writing keyed,
// numbered records to a 6-partition topic and a three-member group
// consuming and committing, while disrupt kills, stops or restarts
// brokers. Afterwards every acknowledged record is in the log exactly
// once and in order, the group delivered every one of them, its commits
// never went backwards and a new member resumes from them.
type workload struct {
	t     *testing.T
	c     *cluster
	lp    *kafkaload.Producer
	g     *groupMembers
	topic string
	group string
}

func runWorkload(t *testing.T, brokers int, proto848 bool, disrupt func(w *workload)) {
	c := startCluster(t, brokers)
	w := &workload{t: t, c: c, topic: "orders", group: "billing"}
	c.createTopic(w.topic, partitions, nil)
	w.lp = kafkaload.StartProducer(t, c.seeds(), w.topic, kafkaload.Options{})
	w.g = startGroup(t, c.seeds(), w.topic, w.group, 3, proto848)
	watch := watchCommits(c.adm, w.topic, w.group)
	w.lp.WaitMore(t, 300, 30*time.Second)
	w.g.waitCommits(t, 3, 30*time.Second)

	disrupt(w)

	// Producers and the group carry on.
	w.lp.WaitMore(t, 300, 30*time.Second)
	w.g.waitCommits(t, 3, 30*time.Second)
	acked := w.lp.Finish(t)
	w.g.waitConsumed(t, acked, 60*time.Second)
	committed := w.g.close(t)
	watch.finish(t)
	kafkaload.CheckLog(t, c.seeds(), c.adm, w.topic, kafkaload.Check{Acked: acked})
	checkResume(t, c.seeds(), c.adm, w.topic, w.group, committed, kafkaload.EndOffsets(t, c.adm, w.topic))
}

// busiest is the live broker that leads the most partitions (the lowest
// node id of a tie) and the partitions it leads.
func (w *workload) busiest() (*testbed.Korvet, []int32) {
	leaders := w.c.waitLeaders(w.topic, partitions, 20*time.Second, func(map[int32]int32) bool { return true })
	var best int32 = -1
	for _, k := range w.c.brokers {
		if !k.Running() {
			continue
		}
		if best < 0 || len(kafkaload.LedBy(leaders, k.NodeID)) > len(kafkaload.LedBy(leaders, best)) {
			best = k.NodeID
		}
	}
	ps := kafkaload.LedBy(leaders, best)
	if len(ps) == 0 {
		w.t.Fatalf("no live broker leads a partition of %s: %v", w.topic, leaders)
	}
	return w.c.broker(best), ps
}

func (w *workload) live(except *testbed.Korvet) []int32 {
	var ids []int32
	for _, k := range w.c.brokers {
		if k != except && k.Running() {
			ids = append(ids, k.NodeID)
		}
	}
	return ids
}

// killBusiest SIGKILLs the broker leading the most partitions and waits
// until the others lead them and accept writes to them, checking that
// leadership moved within the bound the issue sets (2 × the lease; a
// second more for two shared cores).
func (w *workload) killBusiest() *testbed.Korvet {
	victim, moved := w.busiest()
	w.t.Logf("SIGKILL node %d, leader of partitions %v", victim.NodeID, moved)
	t0 := time.Now()
	victim.Kill()
	w.c.waitLeaders(w.topic, partitions, 30*time.Second, func(m map[int32]int32) bool { return len(kafkaload.LedBy(m, victim.NodeID)) == 0 })
	moveTook := time.Since(t0)
	produceTook := measureFailover(w.t, w.lp, fmt.Sprintf("SIGKILL of node %d", victim.NodeID), t0, moved, 30*time.Second)
	w.t.Logf("metadata showed new leaders %v after the kill", moveTook.Round(time.Millisecond))
	if limit := 2*lease + time.Second; produceTook > limit {
		w.t.Errorf("the moved partitions took writes %v after the kill; want within %v (2 × lease)", produceTook.Round(time.Millisecond), limit)
	}
	w.c.waitBrokers(w.topic, w.live(victim), 3*lease)
	return victim
}

// TestKillBroker: one of three brokers is SIGKILLed under load.
func TestKillBroker(t *testing.T) {
	needCluster(t)
	for _, proto := range []struct {
		name     string
		proto848 bool
	}{{"classic", false}, {"consumer", true}} {
		t.Run(proto.name, func(t *testing.T) {
			runWorkload(t, 3, proto.proto848, func(w *workload) { w.killBusiest() })
		})
	}
}

// TestBrokerComesBack: a killed broker is started again (same node id,
// ports and data_dir): it registers, takes back partitions and the
// clients use it, with no error on the way.
func TestBrokerComesBack(t *testing.T) {
	needCluster(t)
	runWorkload(t, 3, false, func(w *workload) {
		victim := w.killBusiest()
		w.lp.WaitMore(t, 200, 30*time.Second)
		t0 := time.Now()
		victim.Restart(t)
		w.c.waitBrokers(w.topic, w.live(nil), 3*lease)
		leaders := w.c.waitLeaders(w.topic, partitions, 30*time.Second, func(m map[int32]int32) bool { return len(kafkaload.LedBy(m, victim.NodeID)) > 0 })
		back := kafkaload.LedBy(leaders, victim.NodeID)
		t.Logf("node %d back after %v, leading %v", victim.NodeID, time.Since(t0).Round(time.Millisecond), back)
		// Records written after it took them back are on it.
		measureFailover(t, w.lp, fmt.Sprintf("restart of node %d", victim.NodeID), time.Now(), back, 30*time.Second)
	})
}

// TestRollingRestart: every broker in turn gets SIGTERM (controlled
// shutdown: it hands its partitions and groups over first) and is
// started again; clients see no error beyond retriable ones (the
// producer, which retries retriable errors, loses nothing and fails
// nothing).
func TestRollingRestart(t *testing.T) {
	needCluster(t)
	runWorkload(t, 3, false, func(w *workload) {
		for _, k := range w.c.brokers {
			leaders := w.c.waitLeaders(w.topic, partitions, 20*time.Second, func(map[int32]int32) bool { return true })
			led := kafkaload.LedBy(leaders, k.NodeID)
			t0 := time.Now()
			k.Stop()
			t.Logf("node %d (leader of %v) stopped by SIGTERM in %v", k.NodeID, led, time.Since(t0).Round(time.Millisecond))
			w.c.waitBrokers(w.topic, w.live(k), 3*lease)
			if len(led) > 0 {
				measureFailover(t, w.lp, fmt.Sprintf("SIGTERM of node %d", k.NodeID), t0, led, 30*time.Second)
			}
			k.Restart(t)
			w.c.waitBrokers(w.topic, w.live(nil), 3*lease)
			w.lp.WaitMore(t, 100, 30*time.Second)
			w.g.waitCommits(t, 1, 30*time.Second)
		}
	})
}

// TestOneBrokerKillRestart runs the same workload and checks on a single
// broker that is SIGKILLed and started again, then stopped with SIGTERM
// and started again: what one broker must keep doing, and a check of
// this package's own machinery that runs without several brokers.
func TestOneBrokerKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a korvet broker")
	}
	runWorkload(t, 1, false, func(w *workload) {
		k := w.c.brokers[0]
		all := make([]int32, partitions)
		for i := range all {
			all[i] = int32(i)
		}
		t0 := time.Now()
		k.Kill()
		k.Restart(t)
		measureFailover(t, w.lp, "SIGKILL and restart of the only broker", t0, all, 30*time.Second)
		w.g.waitCommits(t, 3, 30*time.Second)
		t0 = time.Now()
		k.Restart(t) // SIGTERM, then start
		measureFailover(t, w.lp, "SIGTERM and restart of the only broker", t0, all, 30*time.Second)
		if !slices.Equal(w.live(nil), []int32{k.NodeID}) {
			t.Fatalf("live brokers %v", w.live(nil))
		}
	})
}
