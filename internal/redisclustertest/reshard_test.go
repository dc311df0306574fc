package redisclustertest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// TestReshardDuringTraffic: a producer and a consumer run against a
// 6-partition topic while redis-cli --cluster reshard moves a range of
// slots holding two live partitions to another master, and then back.
// redis-cli moves a source's lowest-numbered slots; the tags of topic
// "migrate" hash to slots 442, 4507, 8696, 12761, 318 and 4383
// ({migrate:0}..{migrate:5}), so partitions 4 and 0 sit at the bottom of
// the first master's range (0-5460 in redis-cli's layout) and moving that
// master's lowest 443 slots moves both (checked against the live slot map
// before and after each move). No acknowledged record
// is lost or duplicated, order is kept, and the consumer sees them all.
func TestReshardDuringTraffic(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 1, "")
	const topic, partitions = "migrate", 6

	// The master serving the lowest partition slot, the partitions in
	// its lowest slots and how many slots cover the first two of them.
	shards := e.shards()
	type ps struct {
		p    int32
		slot int
	}
	var all []ps
	for p := range int32(partitions) {
		all = append(all, ps{p, partitionSlot(topic, p)})
	}
	slices.SortFunc(all, func(a, b ps) int { return a.slot - b.slot })
	fromAddr := masterOf(shards, all[0].slot)
	lowest := -1
	for _, s := range shards {
		if s.Master == fromAddr {
			for _, r := range s.Slots {
				if lowest < 0 || r[0] < lowest {
					lowest = r[0]
				}
			}
		}
	}
	if masterOf(shards, all[1].slot) != fromAddr {
		t.Fatalf("partitions %d and %d (slots %d, %d) are on different masters: pick another topic name", all[0].p, all[1].p, all[0].slot, all[1].slot)
	}
	moving := []int32{all[0].p, all[1].p}
	n := all[1].slot - lowest + 1
	from, to := e.node(fromAddr), (*testbed.Redis)(nil)
	for _, m := range e.rc.Nodes[:e.rc.Masters] {
		// The move back takes to's lowest slots: to must own none below
		// the range.
		ok := m != from
		for _, s := range shards {
			for _, r := range s.Slots {
				ok = ok && (s.Master != m.Addr || r[0] > lowest+n-1)
			}
		}
		if ok {
			to = m
			break
		}
	}
	if to == nil {
		t.Fatalf("no master to move slots %d-%d to and back from", lowest, lowest+n-1)
	}
	t.Logf("moving slots %d-%d (partitions %v) from %s to %s and back", lowest, lowest+n-1, moving, from.Addr, to.Addr)

	e.createTopic(topic, partitions, nil)
	lp := startLoad(t, e.seeds(), topic)
	tc := startTail(t, e.seeds(), topic)
	lp.waitMore(t, 500, 30*time.Second)

	for i, hop := range [][2]*testbed.Redis{{from, to}, {to, from}} {
		before := lp.ackedCount()
		t0 := time.Now()
		e.rc.Reshard(t, hop[0], hop[1], n)
		took := time.Since(t0)
		for _, p := range moving {
			if got := e.rc.MasterOf(t, partitionTag(topic, p)); got != hop[1] {
				t.Fatalf("move %d: partition %d's slot is on %s after the reshard, not %s", i+1, p, got.Addr, hop[1].Addr)
			}
		}
		acks := lp.ackedCount() - before
		t.Logf("move %d: %d slots %s -> %s in %v, %d records acknowledged meanwhile", i+1, n, hop[0].Addr, hop[1].Addr, took.Round(time.Millisecond), acks)
		fmt.Printf("reshard: %d slots in %dms, %d records acknowledged during it\n", n, took.Milliseconds(), acks)
		// The moved partitions take writes on their new master.
		after := lp.ackedCount()
		for _, p := range moving {
			lp.waitPartition(t, p, after, 30*time.Second)
		}
	}
	lp.waitMore(t, 300, 30*time.Second)
	acked := lp.finish(t)
	tc.waitAll(t, acked, 60*time.Second)
	checkLog(t, e.seeds(), e.adm, topic, acked)
	t.Logf("korvet's redirect metrics: %s", e.redirectMetrics())
}

// node is the testbed node listening on addr.
func (e *env) node(addr string) *testbed.Redis {
	e.t.Helper()
	for _, r := range e.rc.Nodes {
		if r.Addr == addr {
			return r
		}
	}
	e.t.Fatalf("no cluster node at %s", addr)
	return nil
}

// redirectMetrics are the lines of broker 1's /metrics about Redis
// Cluster redirects and slot map refreshes, for the log.
func (e *env) redirectMetrics() string {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + e.brokers[0].HTTPAddr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.ToLower(line)
		if !strings.HasPrefix(l, "#") && (strings.Contains(l, "redirect") || strings.Contains(l, "moved") || strings.Contains(l, "refresh")) {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return "(none exported)"
	}
	return strings.Join(out, "; ")
}
