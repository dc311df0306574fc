package group

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/korvet/korvet/resp"
)

// joinAndLeave makes group "g" form a generation with one member, who then
// leaves.
func joinAndLeave(t *testing.T, c *Coordinator) {
	t.Helper()
	res, err := join(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(context.Background(), SyncRequest{Group: "g", MemberID: res.MemberID, Generation: res.Generation}); err != nil {
		t.Fatal(err)
	}
	errs, err := c.Leave("g", []LeaveMember{{MemberID: res.MemberID}})
	if err != nil || errs[0] != nil {
		t.Fatalf("leave: %v %v", errs, err)
	}
}

func redisHas(t *testing.T, rc *resp.Client, c *Coordinator, name string) (state, registered bool) {
	t.Helper()
	ctx := context.Background()
	r1, err1 := rc.Do(ctx, "EXISTS", c.k.GroupState(name))
	r2, err2 := rc.Do(ctx, "HEXISTS", c.k.Groups(), name)
	n1, err3 := r1.Int()
	n2, err4 := r2.Int()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	return n1 == 1, n2 == 1
}

// TestEmptyGroupKeptUntilCleanup: a group without commits whose last
// member left stays Empty (listed, described, in Redis, across a restart)
// until a cleanup pass removes it; one with commits stays; an emptied group
// can be deleted at once.
func TestEmptyGroupKeptUntilCleanup(t *testing.T) {
	c, rc := openTest(t, Options{CleanupInterval: time.Hour})
	ctx := context.Background()
	joinAndLeave(t, c)
	if l := c.List(); len(l) != 1 || l[0].Group != "g" || l[0].State != Empty {
		t.Fatalf("list after the last member left: %+v", l)
	}
	if d, ok := c.Describe("g"); !ok || d.State != Empty || d.ProtocolType != "consumer" || d.Generation != 2 {
		t.Fatalf("describe after the last member left: %+v %v", d, ok)
	}
	if state, reg := redisHas(t, rc, c, "g"); !state || !reg {
		t.Fatalf("Empty group in Redis: state %v, registered %v", state, reg)
	}
	if _, err := c.Commit(ctx, CommitRequest{Group: "kept", Generation: -1, Offsets: []PartitionCommit{{TopicPartition: TopicPartition{"t", 0}, Commit: Commit{Offset: 1}}}}); err != nil {
		t.Fatal(err)
	}

	// A restart brings it back Empty, with its generation (2: the
	// member left with a rebalance to an empty generation, as in Kafka).
	c.Close()
	c, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler), CleanupInterval: time.Hour, MinSessionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if d, ok := c.Describe("g"); !ok || d.State != Empty || d.Generation != 2 {
		t.Fatalf("describe after restart: %+v %v", d, ok)
	}

	n, err := c.Cleanup(ctx)
	if err != nil || n != 1 {
		t.Fatalf("cleanup removed %d: %v", n, err)
	}
	if _, ok := c.Describe("g"); ok {
		t.Fatal("group still there after the cleanup")
	}
	if l := c.List(); len(l) != 1 || l[0].Group != "kept" {
		t.Fatalf("list after cleanup: %+v (the group with commits must stay)", l)
	}
	if state, reg := redisHas(t, rc, c, "g"); state || reg {
		t.Fatalf("removed group still in Redis: state %v, registered %v", state, reg)
	}
	if state, reg := redisHas(t, rc, c, "kept"); !reg || state {
		t.Fatalf("group with commits: registered %v, state %v", reg, state)
	}
	// A new member starts a fresh group.
	if res, err := join(t, c, ""); err != nil || res.Generation != 1 {
		t.Fatalf("join after cleanup: %+v %v", res, err)
	}

	// Emptied and deleted at once, before any cleanup.
	c2, _ := openTest(t, Options{CleanupInterval: time.Hour})
	joinAndLeave(t, c2)
	if errs := c2.DeleteGroups(ctx, []string{"g"}); errs[0] != nil {
		t.Fatalf("delete an emptied group: %v", errs[0])
	}
	if errs := c2.DeleteGroups(ctx, []string{"g"}); !errors.Is(errs[0], ErrGroupNotFound) {
		t.Fatalf("delete it again: %v", errs[0])
	}
}

// TestCleanupRunsPeriodically: the coordinator removes an emptied group
// by itself, on its interval.
func TestCleanupRunsPeriodically(t *testing.T) {
	c, rc := openTest(t, Options{CleanupInterval: 200 * time.Millisecond})
	joinAndLeave(t, c)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ok := c.Describe("g")
		state, reg := redisHas(t, rc, c, "g")
		if !ok && !state && !reg {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("emptied group not removed within 10s of cleanups every 200ms: described %v, state %v, registered %v", ok, state, reg)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
