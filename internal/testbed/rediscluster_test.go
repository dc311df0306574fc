package testbed

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRedisCluster(t *testing.T) {
	rc := StartRedisCluster(t, 3, 1)
	if len(rc.Nodes) != 6 || rc.Masters != 3 || len(rc.Seeds) != 6 || rc.URL != rc.Nodes[0].URL {
		t.Fatalf("cluster %+v", rc)
	}
	for i, r := range rc.Nodes {
		me, err := rc.self(r)
		if err != nil {
			t.Fatal(err)
		}
		if me.master != (i < rc.Masters) {
			t.Fatalf("node %d (%s) master=%v", i, r.Addr, me.master)
		}
	}

	// A key is written on the master MasterOf names; the others redirect.
	m := rc.MasterOf(t, "k1")
	if got := rc.Do(t, m, "SET", "k1", "v1"); got != "OK" {
		t.Fatalf("SET on owner: %v", got)
	}
	for _, r := range rc.Nodes[:rc.Masters] {
		if r == m {
			continue
		}
		if _, err := rc.do(r, "GET", "k1"); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
			t.Fatalf("GET on %s: %v, want MOVED", r.Addr, err)
		}
	}

	// MoveSlot moves the slot and its key.
	slot := rc.keySlot(t, "k1")
	to := rc.Nodes[0]
	if to == m {
		to = rc.Nodes[1]
	}
	rc.MoveSlot(t, slot, to)
	if got := rc.MasterOf(t, "k1"); got != to {
		t.Fatalf("after MoveSlot k1 on %s, want %s", got.Addr, to.Addr)
	}
	if got := rc.Do(t, to, "GET", "k1"); got != "v1" {
		t.Fatalf("GET after MoveSlot: %v", got)
	}

	// Reshard moves slots with their keys.
	for i := range 200 {
		k := "r" + strconv.Itoa(i)
		rc.Do(t, rc.MasterOf(t, k), "SET", k, k)
	}
	before := rc.slotCount(t, rc.Nodes[1])
	rc.Reshard(t, rc.Nodes[1], rc.Nodes[2], 500)
	if got := rc.slotCount(t, rc.Nodes[1]); got != before-500 {
		t.Fatalf("after Reshard %s serves %d slots, want %d", rc.Nodes[1].Addr, got, before-500)
	}
	for i := range 200 {
		k := "r" + strconv.Itoa(i)
		if got := rc.Do(t, rc.MasterOf(t, k), "GET", k); got != k {
			t.Fatalf("GET %s after Reshard: %v", k, got)
		}
	}

	// Killing a master promotes its replica.
	dead := rc.MasterOf(t, "k1")
	rc.Kill(t, dead)
	start := time.Now()
	p := rc.WaitPromoted(t, dead)
	t.Logf("failover took %v", time.Since(start))
	if p == dead || p.Port == 0 {
		t.Fatalf("promoted %v", p)
	}
	if got := rc.MasterOf(t, "k1"); got != p {
		t.Fatalf("k1 on %s after failover, want %s", got.Addr, p.Addr)
	}
	if got := rc.Do(t, p, "GET", "k1"); got != "v1" {
		t.Fatalf("GET on promoted replica: %v", got)
	}
}

func TestRedisClusterPassword(t *testing.T) {
	rc := StartRedisCluster(t, 3, 0, "--requirepass", "pw")
	r := rc.MasterOf(t, "a")
	if got := rc.Do(t, r, "SET", "a", "1"); got != "OK" {
		t.Fatalf("SET: %v", got)
	}
	noAuth := &RedisCluster{}
	if _, err := noAuth.do(r, "GET", "a"); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("GET without AUTH: %v", err)
	}
	rc.MoveSlot(t, rc.keySlot(t, "a"), otherMaster(rc, r))
	if got := rc.Do(t, rc.MasterOf(t, "a"), "GET", "a"); got != "1" {
		t.Fatalf("GET after MoveSlot: %v", got)
	}
}

func otherMaster(rc *RedisCluster, r *Redis) *Redis {
	for _, m := range rc.Nodes[:rc.Masters] {
		if m != r {
			return m
		}
	}
	return nil
}

func (rc *RedisCluster) slotCount(t *testing.T, r *Redis) int {
	me, err := rc.self(r)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range me.slots {
		n += s[1] - s[0] + 1
	}
	return n
}
