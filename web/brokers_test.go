package web

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// brokersOf GETs /api/v1/brokers.
func brokersOf(t *testing.T, h http.Handler) brokerListJSON {
	t.Helper()
	var bl brokerListJSON
	get(t, h, "/api/v1/brokers", &bl)
	return bl
}

func totalPartitions(eng *engine.Engine) int {
	n := 0
	for _, t := range eng.Topics() {
		n += len(t.Partitions())
	}
	return n
}

// One broker: it is the only one, leads every partition and coordinates
// every stored group; /metrics says the same.
func TestAPIBrokersSingle(t *testing.T) {
	listeners := []engine.ListenerAddr{{Name: "PLAINTEXT", Host: "kafka.lan", Port: 9092}, {Name: "TLS", Host: "kafka.lan", Port: 9093}}
	eng, _ := openEngineWith(t, engine.Options{NodeID: 7, Rack: "shelf", Listeners: listeners})
	fill(t, eng, "orders", 3, 2, "billing", 1)
	fill(t, eng, "invoices", 1, 2, "audit", 1)
	h := New(eng, Options{Version: "test", Started: time.Now(), Logger: quiet})

	bl := brokersOf(t, h)
	if bl.Self != 7 || !bl.Groups || bl.Error != "" || len(bl.Brokers) != 1 {
		t.Fatalf("brokers = %+v, want broker 7 alone", bl)
	}
	b := bl.Brokers[0]
	var ls []engine.ListenerAddr
	for _, l := range b.Listeners {
		ls = append(ls, engine.ListenerAddr(l))
	}
	if b.NodeID != 7 || !b.Self || b.Rack != "shelf" || !slices.Equal(ls, listeners) || b.LeaseAgeSeconds > 30 ||
		b.PartitionsLed != totalPartitions(eng) || b.GroupsCoordinated == nil || *b.GroupsCoordinated != 2 {
		t.Errorf("broker = %+v (groups %v), want node 7 in rack shelf at %v leading %d partitions and coordinating 2 groups",
			b, b.GroupsCoordinated, listeners, totalPartitions(eng))
	}

	w := get(t, h, "/metrics", nil)
	for _, want := range []string{
		"korvet_brokers_live 1\n",
		"korvet_partitions_led " + strconv.Itoa(totalPartitions(eng)) + "\n",
		"korvet_groups_coordinated 2\n",
		"korvet_leadership_moves_total ",
		`korvet_partition_leader_epoch{partition="2",topic="orders"} `,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// Three engines on one Redis: each broker's /api/v1/brokers lists all
// three with their listeners, marks itself, and the partitions led and
// groups coordinated add up to all of them. Needs the real broker
// registry (issue 14 part A): skipped while each engine sees only itself.
func TestAPIBrokersCluster(t *testing.T) {
	r := testbed.StartRedis(t)
	var engs []*engine.Engine
	for id := int32(1); id <= 3; id++ {
		eng, _ := enginetest.Open(t, r, engine.Options{NodeID: id, Logger: quiet, GroupInitialRebalanceDelay: -1,
			Listeners: []engine.ListenerAddr{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9090 + id}}})
		engs = append(engs, eng)
		if id == 1 {
			// Before the others open, so that each loads it.
			fill(t, eng, "orders", 6, 1, "", 0)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		seen := make([]int, len(engs))
		for i, e := range engs {
			seen[i] = len(e.Brokers())
		}
		if !slices.ContainsFunc(seen, func(n int) bool { return n != 3 }) {
			break
		}
		if time.Now().After(deadline) {
			if !slices.ContainsFunc(seen, func(n int) bool { return n != 1 }) {
				t.Skip("every engine sees only itself: engine membership (engine/brokers.go) is still the single-broker stub")
			}
			t.Fatalf("the three engines see %v brokers, want 3 each", seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	for _, g := range []string{"a", "b", "c", "d", "e", "f"} {
		// Stored through the engine that coordinates each group.
		co := engs[engs[0].Coordinator(g)-1]
		commitOne(t, co, g, "orders")
	}
	names, err := engs[1].StoredGroupNames(ctx)
	if err != nil || len(names) != 6 {
		t.Fatalf("stored groups %v, %v", names, err)
	}
	total := totalPartitions(engs[0])
	testbed.WaitFor(t, 15*time.Second, "every broker counts every partition led", func() bool {
		for _, eng := range engs {
			bl := brokersOf(t, New(eng, Options{Started: time.Now(), Logger: quiet}))
			led, coordinated := 0, 0
			for _, b := range bl.Brokers {
				led += b.PartitionsLed
				if b.GroupsCoordinated != nil {
					coordinated += *b.GroupsCoordinated
				}
			}
			if led != total || coordinated != 6 {
				return false
			}
		}
		return true
	})
	for i, eng := range engs {
		bl := brokersOf(t, New(eng, Options{Started: time.Now(), Logger: quiet}))
		if bl.Self != int32(i+1) || len(bl.Brokers) != 3 {
			t.Fatalf("broker %d: %+v", i+1, bl)
		}
		for j, b := range bl.Brokers {
			if b.NodeID != int32(j+1) || b.Self != (j == i) || len(b.Listeners) != 1 || b.Listeners[0].Port != 9091+int32(j) || b.LeaseAgeSeconds > 10 {
				t.Errorf("broker %d lists %+v", i+1, b)
			}
		}
	}
}

// commitOne commits offset 0 of topic's partition 0 for grp.
func commitOne(t *testing.T, eng *engine.Engine, grp, topic string) {
	t.Helper()
	errs, err := eng.Groups().Commit(context.Background(), group.CommitRequest{Group: grp, Generation: -1,
		Offsets: []group.PartitionCommit{{TopicPartition: group.TopicPartition{Topic: topic, Partition: 0}, Commit: group.Commit{Offset: 0, LeaderEpoch: -1}}}})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("commit for %s: %v %v", grp, err, errs)
	}
}
