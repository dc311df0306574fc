package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func openTest(t testing.TB, opts Options) (*Coordinator, *resp.Client) {
	t.Helper()
	r := testbed.StartRedis(t)
	rc, err := resp.New(r.URL, resp.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.MinSessionTimeout = 100 * time.Millisecond
	c, err := Open(context.Background(), rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, rc
}

func TestOffsetEncoding(t *testing.T) {
	for _, o := range []Commit{
		{Offset: 0, LeaderEpoch: -1, Time: time.UnixMilli(1)},
		{Offset: 1 << 40, LeaderEpoch: 7, Metadata: "a,b,,c\x00ü", Time: time.UnixMilli(1700000000000)},
	} {
		got, err := decodeOffset(encodeOffset(o))
		if err != nil || got.Offset != o.Offset || got.LeaderEpoch != o.LeaderEpoch || got.Metadata != o.Metadata || !got.Time.Equal(o.Time) {
			t.Fatalf("round trip of %+v: %+v, %v", o, got, err)
		}
	}
	for _, bad := range []string{"", "1,2", "x,1,2,", "1,2,3"} {
		if _, err := decodeOffset(bad); err == nil {
			t.Fatalf("decoded %q", bad)
		}
	}
	tp, ok := parseOffsetField(offsetField(TopicPartition{"a.b-c_d", 12}))
	if !ok || tp.Topic != "a.b-c_d" || tp.Partition != 12 {
		t.Fatalf("field round trip: %+v %v", tp, ok)
	}
}

func TestSelectProtocol(t *testing.T) {
	c := &Coordinator{opts: Options{}, log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		members [][]string
		want    string
	}{
		{[][]string{{"a", "b"}, {"b", "a"}, {"b"}}, "b"},      // a is not supported by all
		{[][]string{{"a", "b"}, {"a", "b"}, {"b", "a"}}, "a"}, // most first choices
		{[][]string{{"b", "a"}, {"a", "b"}}, "b"},             // a tie goes to the leader's choice
	} {
		g := c.newGroup("g")
		for i, ps := range tc.members {
			m := &member{id: string(rune('A' + i))}
			for _, p := range ps {
				m.protocols = append(m.protocols, Protocol{Name: p})
			}
			g.members[m.id] = m
		}
		g.leader = "A"
		if got := g.selectProtocol(); got != tc.want {
			t.Fatalf("%v: chose %q, want %q", tc.members, got, tc.want)
		}
	}
}

func join(t *testing.T, c *Coordinator, id string) (JoinResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Join(ctx, JoinRequest{
		Group: "g", MemberID: id, ClientID: "c", SessionTimeout: 2 * time.Second, RebalanceTimeout: 2 * time.Second,
		ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
	})
}

// TestInitialDelayExtends: a group's first rebalance waits the initial
// delay, and waits again while new members keep coming, up to the
// rebalance timeout.
func TestInitialDelayExtends(t *testing.T) {
	c, _ := openTest(t, Options{InitialRebalanceDelay: 300 * time.Millisecond})
	start := time.Now()
	var wg sync.WaitGroup
	results := make([]JoinResult, 3)
	// The later joins are 150ms from each moment the delay ends (300 and
	// 600ms), so a busy machine's scheduling does not move one across.
	joinAt := []time.Duration{0, 150 * time.Millisecond, 450 * time.Millisecond}
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(joinAt[i]) // the scenario's timing: a join at each moment
			res, err := join(t, c, "")
			if err != nil {
				t.Errorf("join %d: %v", i, err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	took := time.Since(start)
	// Joins at 0, 150 and 450 ms: the delay ends at 300, is extended to
	// 600 (a member came), then to 900 (another came).
	if took < 850*time.Millisecond || took > 1800*time.Millisecond {
		t.Fatalf("first rebalance took %v, want about 900ms", took)
	}
	for i, r := range results {
		if r.Generation != 1 || r.Leader != results[0].Leader {
			t.Fatalf("member %d: %+v", i, r)
		}
	}
	d, _ := c.Describe("g")
	if len(d.Members) != 3 || d.State != CompletingRebalance {
		t.Fatalf("group: %+v", d)
	}
}

// TestJoinAbandoned: a new member whose JoinGroup gives up (its
// connection closed) does not hold the group's rebalance.
func TestJoinAbandoned(t *testing.T) {
	c, _ := openTest(t, Options{InitialRebalanceDelay: 50 * time.Millisecond})
	first, err := join(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(context.Background(), SyncRequest{Group: "g", MemberID: first.MemberID, Generation: first.Generation}); err != nil {
		t.Fatal(err)
	}
	// A second member joins and gives up at once: the group rebalances
	// (the first member must rejoin) but the quitter is gone.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }() // gives up after a while, parked or not: either way it is gone
	_, err = c.Join(ctx, JoinRequest{Group: "g", ClientID: "q", SessionTimeout: 2 * time.Second, RebalanceTimeout: 2 * time.Second, ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}}})
	if !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("abandoned join: %v", err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: first.MemberID, Generation: first.Generation}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat: %v", err)
	}
	start := time.Now()
	res, err := join(t, c, first.MemberID)
	if err != nil || res.Generation != 2 || len(res.Members) != 1 {
		t.Fatalf("rejoin: %+v %v", res, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("rejoin waited %v for a member that gave up", d)
	}
}

func TestCommitsSurviveReopen(t *testing.T) {
	c, rc := openTest(t, Options{})
	ctx := context.Background()
	errs, err := c.Commit(ctx, CommitRequest{Group: "s", Generation: -1, Offsets: []PartitionCommit{
		{TopicPartition: TopicPartition{"t", 0}, Commit: Commit{Offset: 5, LeaderEpoch: 1, Metadata: "m"}},
		{TopicPartition: TopicPartition{"t", 1}, Commit: Commit{Offset: 6, LeaderEpoch: -1, Metadata: string(make([]byte, 5000))}},
	}})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrMetadataTooLarge) {
		t.Fatalf("commit: %v %v", errs, err)
	}
	c.Close()
	c2, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if l := c2.List(); len(l) != 1 || l[0].Group != "s" || l[0].State != Empty {
		t.Fatalf("list after reopen: %+v", l)
	}
	got, err := c2.Fetch(ctx, "s", nil, false)
	if err != nil || len(got) != 1 || got[0].Offset != 5 || got[0].LeaderEpoch != 1 || got[0].Metadata != "m" {
		t.Fatalf("fetch after reopen: %+v %v", got, err)
	}
}

// TestMembershipSurvivesReopen: a coordinator opened on the same Redis
// knows the members, generation and assignments; heartbeats go on and a
// follower rejoining gets its assignment back without a rebalance.
func TestMembershipSurvivesReopen(t *testing.T) {
	c, rc := openTest(t, Options{InitialRebalanceDelay: 10 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	res := make([]JoinResult, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if res[i], err = join(t, c, ""); err != nil {
				t.Errorf("join: %v", err)
			}
		}()
	}
	wg.Wait()
	leader, follower := res[0], res[1]
	if follower.MemberID == leader.Leader {
		leader, follower = follower, leader
	}
	go c.Sync(ctx, SyncRequest{Group: "g", MemberID: follower.MemberID, Generation: follower.Generation})
	if _, err := c.Sync(ctx, SyncRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation,
		Assignments: map[string][]byte{leader.MemberID: []byte("L"), follower.MemberID: []byte("F")}}); err != nil {
		t.Fatal(err)
	}
	c.Close()

	c2, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler), MinSessionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	d, _ := c2.Describe("g")
	if d.State != Stable || d.Generation != leader.Generation || len(d.Members) != 2 || d.Leader != leader.MemberID {
		t.Fatalf("after reopen: %+v", d)
	}
	for _, r := range res {
		if err := c2.Heartbeat(HeartbeatRequest{Group: "g", MemberID: r.MemberID, Generation: r.Generation}); err != nil {
			t.Fatalf("heartbeat after reopen: %v", err)
		}
	}
	again, err := join(t, c2, follower.MemberID)
	if err != nil || again.Generation != follower.Generation {
		t.Fatalf("follower rejoin after reopen: %+v %v", again, err)
	}
	sr, err := c2.Sync(ctx, SyncRequest{Group: "g", MemberID: follower.MemberID, Generation: follower.Generation})
	if err != nil || string(sr.Assignment) != "F" {
		t.Fatalf("sync after reopen: %+v %v", sr, err)
	}
}
