package redisclustertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
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
	lp := kafkaload.StartProducer(t, e.seeds(), topic, kafkaload.Options{})
	tc := kafkaload.StartTail(t, e.seeds(), topic)
	lp.WaitMore(t, 500, 30*time.Second)

	for i, hop := range [][2]*testbed.Redis{{from, to}, {to, from}} {
		before := lp.AckedCount()
		t0 := time.Now()
		e.rc.Reshard(t, hop[0], hop[1], n)
		took := time.Since(t0)
		for _, p := range moving {
			if got := e.rc.MasterOf(t, partitionTag(topic, p)); got != hop[1] {
				t.Fatalf("move %d: partition %d's slot is on %s after the reshard, not %s", i+1, p, got.Addr, hop[1].Addr)
			}
		}
		// The partitions' streams went with their slots.
		for _, p := range moving {
			pattern := fmt.Sprintf("%s:storage:local:%s:*", keyspace, partitionTag(topic, p))
			for _, node := range hop {
				keys, err := e.nodeKeys(node.Addr, pattern)
				if err != nil {
					t.Fatal(err)
				}
				if moved := len(keys) > 0; moved != (node == hop[1]) {
					t.Errorf("move %d: %s holds segment streams %v of partition %d", i+1, node.Addr, keys, p)
				}
			}
		}
		acks := lp.AckedCount() - before
		t.Logf("move %d: %d slots %s -> %s in %v, %d records acknowledged meanwhile", i+1, n, hop[0].Addr, hop[1].Addr, took.Round(time.Millisecond), acks)
		fmt.Printf("reshard: %d slots in %dms, %d records acknowledged during it\n", n, took.Milliseconds(), acks)
		// The moved partitions take writes on their new master.
		after := lp.AckedCount()
		for _, p := range moving {
			lp.WaitPartition(t, p, after, 30*time.Second)
		}
	}

	lp.WaitMore(t, 300, 30*time.Second)
	acked := lp.Finish(t)
	tc.WaitAll(t, acked, 60*time.Second)
	kafkaload.CheckLog(t, e.seeds(), e.adm, topic, kafkaload.Check{Acked: acked, ReadPastRetriable: true})
	if r := e.redirects(); r != "" {
		t.Logf("korvet's Redis client followed redirects %s", r)
	}
}

// TestAppendDuringSlotMigration: one partition's slot moves step by step
// under traffic, as redis-cli moves each slot: SETSLOT IMPORTING on the
// target and MIGRATING on the source, MIGRATE of its keys, SETSLOT NODE.
// Each stage is held until the partition took writes in it. While the
// slot is migrating and its keys are already on the target, the source
// answers ASK for them; korvet must follow it (ASKING) rather than
// refuse appends to the partition until the migration ends (redis-cli
// holds that stage while it migrates a slot's keys: long for big
// segment streams). Afterwards nothing acknowledged is lost or doubled.
func TestAppendDuringSlotMigration(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 1, "")
	const topic, partitions = "migrate", 6
	const p = 4 // slot 318: on the first master in redis-cli's layout
	slot := partitionSlot(topic, p)
	from := e.rc.MasterOf(t, partitionTag(topic, p))
	to := e.rc.Nodes[0]
	for _, m := range e.rc.Nodes[:e.rc.Masters] {
		if m != from {
			to = m
			break
		}
	}
	e.createTopic(topic, partitions, nil)
	lp := kafkaload.StartProducer(t, e.seeds(), topic, kafkaload.Options{})
	tc := kafkaload.StartTail(t, e.seeds(), topic)
	lp.WaitMore(t, 500, 30*time.Second)

	stage := func(what string) {
		t.Helper()
		t0 := time.Now()
		if at, ok := lp.PartitionAcked(p, lp.AckedCount(), 15*time.Second); ok {
			t.Logf("%s: partition %d took a write after %v", what, p, at.Sub(t0).Round(time.Millisecond))
		} else {
			t.Errorf("%s: partition %d took no write within 15s (the producer retried %s)", what, p, lp.Retried())
		}
	}
	if src := e.rc.BeginMigration(t, slot, to); src != from {
		t.Fatalf("slot %d is on %s, want %s", slot, src.Addr, from.Addr)
	}
	stage(fmt.Sprintf("slot %d MIGRATING %s -> %s, keys on the source", slot, from.Addr, to.Addr))
	e.rc.MigrateKeys(t, slot, from, to)
	stage(fmt.Sprintf("slot %d MIGRATING, keys on the target", slot))
	e.rc.EndMigration(t, slot, to)
	lp.WaitPartition(t, p, lp.AckedCount(), 30*time.Second)
	if got := e.rc.MasterOf(t, partitionTag(topic, p)); got != to {
		t.Fatalf("slot %d is on %s after the migration, not %s", slot, got.Addr, to.Addr)
	}

	lp.WaitMore(t, 300, 30*time.Second)
	acked := lp.Finish(t)
	tc.WaitAll(t, acked, 60*time.Second)
	kafkaload.CheckLog(t, e.seeds(), e.adm, topic, kafkaload.Check{Acked: acked, ReadPastRetriable: true})
	if r := e.redirects(); r != "" {
		t.Logf("korvet's Redis client followed redirects %s", r)
	}
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

// redirects is what broker 1 says at /api/v1/redis about the redirects
// its Redis client followed, for the log ("" where this korvet has no
// such page yet).
func (e *env) redirects() string {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + e.brokers[0].HTTPAddr + "/api/v1/redis")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	var r struct {
		Redirects json.RawMessage `json:"redirects"`
		Refreshes uint64          `json:"slot_map_refreshes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&r); err != nil {
		return fmt.Sprintf("/api/v1/redis: %v", err)
	}
	return fmt.Sprintf("%s, %d slot map refreshes", r.Redirects, r.Refreshes)
}
