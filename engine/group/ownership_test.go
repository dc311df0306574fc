package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// twoCoordinators opens two coordinators on one Redis, as two brokers
// would; owner says which one (1 or 2) owns every group.
func twoCoordinators(t *testing.T, opts Options) (c1, c2 *Coordinator, owner *atomic.Int32, rc *resp.Client) {
	t.Helper()
	r := testbed.StartRedis(t)
	rc, err := resp.New(r.URL, resp.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	owner = &atomic.Int32{}
	owner.Store(1)
	open := func(id int32) *Coordinator {
		o := opts
		o.Logger = slog.New(slog.DiscardHandler)
		o.MinSessionTimeout = 100 * time.Millisecond
		o.Owns = func(string) bool { return owner.Load() == id }
		c, err := Open(context.Background(), rc, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	return open(1), open(2), owner, rc
}

// redisSnapshot is every key the group has in Redis, with its value.
func redisSnapshot(t *testing.T, rc *resp.Client, c *Coordinator, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range []string{c.k.GroupState(name), c.k.ConsumerGroupState(name)} {
		r, err := rc.Do(ctx, "GET", k)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = string(r.Bytes())
	}
	for _, k := range []string{c.k.GroupOffsets(name), c.k.Groups()} {
		r, err := rc.Do(ctx, "HGETALL", k)
		if err != nil {
			t.Fatal(err)
		}
		var elems []resp.Reply
		elems = r.Elems(elems)
		for i := 0; i+1 < len(elems); i += 2 {
			out[k+"/"+string(elems[i].Bytes())] = string(elems[i+1].Bytes())
		}
	}
	return out
}

// TestClassicGroupMovesCoordinator: a classic group formed on one
// coordinator moves to another when ownership changes. The old one
// answers NOT_COORDINATOR, answers its parked calls, and writes nothing
// more; the new one restores generation, members, assignments and
// commits from Redis, so members heartbeat on with their ids and
// generation.
func TestClassicGroupMovesCoordinator(t *testing.T) {
	c1, c2, owner, rc := twoCoordinators(t, Options{InitialRebalanceDelay: 10 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	res := make([]JoinResult, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if res[i], err = join(t, c1, ""); err != nil {
				t.Errorf("join: %v", err)
			}
		}()
	}
	wg.Wait()
	leader, follower := res[0], res[1]
	if follower.MemberID == leader.Leader {
		leader, follower = follower, leader
	}
	go c1.Sync(ctx, SyncRequest{Group: "g", MemberID: follower.MemberID, Generation: follower.Generation})
	if _, err := c1.Sync(ctx, SyncRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation,
		Assignments: map[string][]byte{leader.MemberID: []byte("L"), follower.MemberID: []byte("F")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Commit(ctx, CommitRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation,
		Offsets: []PartitionCommit{{TopicPartition: TopicPartition{"t", 0}, Commit: Commit{Offset: 42, LeaderEpoch: -1}}}}); err != nil {
		t.Fatal(err)
	}
	// c2 does not own the group yet: it refuses and holds nothing.
	if err := c2.Heartbeat(HeartbeatRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("heartbeat at the non-owner: %v", err)
	}

	// A third member parks a JoinGroup on c1 (a rebalance starts); then
	// the live brokers change and c2 owns the group.
	parked := make(chan error, 1)
	go func() {
		_, err := c1.Join(ctx, JoinRequest{Group: "g", ClientID: "late", SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}}})
		parked <- err
	}()
	testbed.WaitFor(t, 5*time.Second, "the third member parked on c1", func() bool {
		d, _ := c1.Describe("g")
		return d.State == PreparingRebalance
	})
	// c1 stored the rebalance; take Redis as the new owner will find it.
	// The new owner restores the group as stored when c1 let go of it.
	owner.Store(2)
	if n := c1.OwnershipChanged(ctx); n != 1 {
		t.Fatalf("c1 dropped %d groups, want 1", n)
	}
	c2.OwnershipChanged(ctx)
	select {
	case err := <-parked:
		if !errors.Is(err, ErrNotCoordinator) {
			t.Fatalf("parked join after the move: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked join not answered after the move")
	}
	before := redisSnapshot(t, rc, c1, "g")

	// The old coordinator refuses every call and writes nothing.
	if err := c1.Heartbeat(HeartbeatRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("heartbeat at the old coordinator: %v", err)
	}
	if _, err := c1.Commit(ctx, CommitRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation,
		Offsets: []PartitionCommit{{TopicPartition: TopicPartition{"t", 0}, Commit: Commit{Offset: 99, LeaderEpoch: -1}}}}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("commit at the old coordinator: %v", err)
	}
	if _, err := join(t, c1, ""); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("join at the old coordinator: %v", err)
	}
	if _, err := c1.Fetch(ctx, "g", nil, false); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch at the old coordinator: %v", err)
	}
	if errs := c1.DeleteGroups(ctx, []string{"g"}); !errors.Is(errs[0], ErrNotCoordinator) {
		t.Fatalf("delete at the old coordinator: %v", errs[0])
	}
	if _, _, err := c1.DescribeOwned("g"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("describe at the old coordinator: %v", err)
	}
	if l := c1.List(); len(l) != 0 {
		t.Fatalf("old coordinator lists %+v", l)
	}
	if n, err := c1.Cleanup(ctx); n != 0 || err != nil {
		t.Fatalf("cleanup at the old coordinator: %d %v", n, err)
	}

	// Both see the id taken: c1 in the registry, c2 restoring it.
	if !c1.Exists("g") || !c2.Exists("g") || c2.Exists("nope") {
		t.Fatalf("exists: c1 %v, c2 %v, c2 of an unknown group %v", c1.Exists("g"), c2.Exists("g"), c2.Exists("nope"))
	}
	// The new coordinator carries on from Redis.
	d, ok := c2.Describe("g")
	if !ok || d.Generation != leader.Generation || len(d.Members) != 2 || d.Leader != leader.MemberID {
		t.Fatalf("restored at c2: %+v", d)
	}
	for _, r := range res {
		if err := c2.Heartbeat(HeartbeatRequest{Group: "g", MemberID: r.MemberID, Generation: r.Generation}); err != nil && !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat at the new coordinator: %v", err)
		}
	}
	got, err := c2.Fetch(ctx, "g", []TopicPartition{{"t", 0}}, false)
	if err != nil || got[0].Offset != 42 {
		t.Fatalf("commits at the new coordinator: %+v %v", got, err)
	}
	if after := redisSnapshot(t, rc, c1, "g"); len(after) != len(before) {
		t.Fatalf("Redis changed after the move: %v -> %v", before, after)
	} else {
		for k, v := range before {
			if after[k] != v {
				t.Fatalf("Redis key %s changed after the move: %q -> %q", k, v, after[k])
			}
		}
	}
	// Members rejoin at the new coordinator with their ids and keep
	// their place: the generation moves on from the stored one. The
	// leader goes first: a follower rejoining a Stable group with
	// unchanged protocols is answered at once with the current
	// generation (as Kafka does), so the order is fixed for the test.
	again := make([]JoinResult, 2)
	errs := make([]error, 2)
	var wg2 sync.WaitGroup
	rejoin := func(i int, id string) {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			again[i], errs[i] = join(t, c2, id)
		}()
	}
	rejoin(0, leader.MemberID)
	testbed.WaitFor(t, 5*time.Second, "the leader's rejoin to start a rebalance at c2", func() bool {
		d, _ := c2.Describe("g")
		return d.State == PreparingRebalance
	})
	rejoin(1, follower.MemberID)
	wg2.Wait()
	for i, id := range []string{leader.MemberID, follower.MemberID} {
		if errs[i] != nil || again[i].MemberID != id || again[i].Generation <= leader.Generation {
			t.Fatalf("rejoin %d at c2: %+v %v (was generation %d)", i, again[i], errs[i], leader.Generation)
		}
	}
}

// TestConsumerGroupMovesCoordinator: a KIP-848 group moves; its members
// heartbeat on at the new coordinator with their ids and epochs, keeping
// their assignments.
func TestConsumerGroupMovesCoordinator(t *testing.T) {
	topic := TopicMeta{Name: "t", ID: TopicID{1}, Partitions: 4}
	c1, c2, owner, _ := twoCoordinators(t, Options{Consumer: ConsumerOptions{Topics: func() []TopicMeta { return []TopicMeta{topic} }}})
	hb := func(c *Coordinator, id string, epoch int32, owned Assignment) (ConsumerHeartbeatResult, error) {
		req := ConsumerHeartbeatRequest{Group: "cg", MemberID: id, MemberEpoch: epoch, RebalanceTimeout: -1, Owned: owned}
		if epoch == JoinEpoch {
			req.TopicNames, req.RebalanceTimeout = []string{"t"}, 10*time.Second
		}
		return c.ConsumerHeartbeat(req)
	}
	r, err := hb(c1, "m1", JoinEpoch, nil)
	if err != nil || r.MemberEpoch < 1 || r.Assignment.count() != 4 {
		t.Fatalf("join at c1: %+v %v", r, err)
	}
	epoch, assigned := r.MemberEpoch, r.Assignment
	if r, err = hb(c1, "m1", epoch, assigned); err != nil {
		t.Fatalf("heartbeat at c1: %+v %v", r, err)
	}

	owner.Store(2)
	c1.DropUnowned()
	if _, err := hb(c1, "m1", epoch, assigned); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("heartbeat at the old coordinator: %v", err)
	}
	r, err = hb(c2, "m1", epoch, assigned)
	if err != nil || r.MemberEpoch != epoch {
		t.Fatalf("heartbeat at the new coordinator: %+v %v", r, err)
	}
	d, err := c2.DescribeConsumer("cg")
	if err != nil || len(d.Members) != 1 || d.Members[0].MemberID != "m1" || d.Members[0].Assignment.count() != 4 {
		t.Fatalf("restored consumer group: %+v %v", d, err)
	}
	// A second member joins at the new coordinator: the group goes on
	// from the stored epoch.
	r2, err := hb(c2, "m2", JoinEpoch, nil)
	if err != nil || r2.MemberEpoch <= epoch {
		t.Fatalf("second member at c2: %+v %v", r2, err)
	}
}
