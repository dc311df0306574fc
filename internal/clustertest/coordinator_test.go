package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// TestCoordinatorFailover: two groups whose coordinators
// (FindCoordinator) are different brokers consume one topic under
// produce load; both coordinators are killed, one after the other. Each
// group carries on from its commits: no partition restarts below a
// commit korvet accepted (so nothing is delivered twice beyond the
// uncommitted tail), commits never go backwards, every record is
// delivered, and a new member resumes exactly at the commits.
func TestCoordinatorFailover(t *testing.T) {
	needCluster(t)
	c := startCluster(t, 3)
	const topic = "events"
	c.createTopic(topic, partitions, nil)

	// Two group names that hash to different coordinators.
	coordinator := func(group string) int32 {
		t.Helper()
		var node int32
		testbed.Eventually(t, 20*time.Second, "coordinator of "+group, func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r := c.adm.FindGroupCoordinators(ctx, group)[group]
			node = r.NodeID
			return r.Err == nil, fmt.Sprint(r.Err)
		})
		return node
	}
	names := [2]string{}
	coords := [2]int32{}
	for i := 0; names[1] == ""; i++ {
		if i == 50 {
			t.Fatalf("50 group names all coordinated by node %d", coords[0])
		}
		name := fmt.Sprintf("team-%d", i)
		node := coordinator(name)
		switch {
		case names[0] == "":
			names[0], coords[0] = name, node
		case node != coords[0]:
			names[1], coords[1] = name, node
		}
	}
	t.Logf("group %s coordinated by node %d, %s by node %d", names[0], coords[0], names[1], coords[1])

	lp := kafkaload.StartProducer(t, c.seeds(), topic, kafkaload.Options{})
	var groups [2]*groupMembers
	var watches [2]*commitWatch
	for i, name := range names {
		groups[i] = startGroup(t, c.seeds(), topic, name, 2, false)
		watches[i] = watchCommits(c.adm, topic, name)
	}
	for _, g := range groups {
		g.waitCommits(t, 3, 30*time.Second)
	}

	for i, node := range coords {
		k := c.broker(node)
		t0 := time.Now()
		k.Kill()
		// The group carries on: new commits accepted, by a new coordinator.
		groups[i].waitCommits(t, 3, 30*time.Second)
		took := time.Since(t0).Round(time.Millisecond)
		// Each broker sees the lease lapse on its own; the one answering
		// FindCoordinator may see it a moment after the one that took
		// the group over: ask until it names a live broker.
		var now int32
		testbed.Eventually(t, 10*time.Second, "FindCoordinator to stop naming the killed node", func() (bool, string) {
			now = coordinator(names[i])
			return now != node, fmt.Sprintf("group %s still coordinated by the killed node %d", names[i], node)
		})
		t.Logf("SIGKILL node %d: group %s committing again after %v, coordinator now node %d", node, names[i], took, now)
		for _, g := range groups {
			g.waitCommits(t, 2, 30*time.Second)
		}
	}

	lp.WaitMore(t, 200, 30*time.Second)
	acked := lp.Finish(t)
	ends := kafkaload.EndOffsets(t, c.adm, topic)
	for i, g := range groups {
		g.waitConsumed(t, acked, 60*time.Second)
		committed := g.close(t)
		watches[i].finish(t)
		checkResume(t, c.seeds(), c.adm, topic, names[i], committed, ends)
	}
	kafkaload.CheckLog(t, c.seeds(), c.adm, topic, kafkaload.Check{Acked: acked})
}
