package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func txnCommit(t *testing.T, c *Coordinator, req TxnCommitRequest, offsets map[TopicPartition]int64) error {
	t.Helper()
	for tp, o := range offsets {
		req.Offsets = append(req.Offsets, PartitionCommit{TopicPartition: tp, Commit: Commit{Offset: o, LeaderEpoch: -1, Metadata: "md"}})
	}
	errs, err := c.TxnCommit(context.Background(), req)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			t.Fatalf("transactional commit of %v: %v", offsets, errs)
		}
	}
	return nil
}

// fetchState maps each partition asked for to its offset, or to -2 when
// it is unstable (ErrUnstableOffsetCommit).
func fetchState(t *testing.T, c *Coordinator, name string, stable bool, tps ...TopicPartition) map[TopicPartition]int64 {
	t.Helper()
	got, err := c.Fetch(context.Background(), name, tps, stable)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	out := map[TopicPartition]int64{}
	for _, pc := range got {
		switch {
		case errors.Is(pc.Err, ErrUnstableOffsetCommit):
			if pc.Offset != -1 {
				t.Fatalf("unstable %v answered offset %d", pc.TopicPartition, pc.Offset)
			}
			out[pc.TopicPartition] = -2
		case pc.Err != nil:
			t.Fatalf("fetch %v: %v", pc.TopicPartition, pc.Err)
		default:
			out[pc.TopicPartition] = pc.Offset
		}
	}
	return out
}

func wantState(t *testing.T, what string, got map[TopicPartition]int64, want map[TopicPartition]int64) {
	t.Helper()
	for tp, w := range want {
		if got[tp] != w {
			t.Fatalf("%s: %v is %d, want %d (all: %v)", what, tp, got[tp], w, got)
		}
	}
}

func hashLen(t *testing.T, rc *resp.Client, key string) int64 {
	t.Helper()
	r, err := rc.Do(context.Background(), "HLEN", key)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.Int()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	tp0 = TopicPartition{"t", 0}
	tp1 = TopicPartition{"t", 1}
	tp2 = TopicPartition{"t", 2}
)

// TestTxnOffsetsCommitAndAbort: offsets committed in a transaction are
// pending (RequireStable sees them unstable, a plain fetch not at all)
// until CompleteTxn moves them (commit) or drops them (abort), for one
// producer at a time; a second CompleteTxn changes nothing. The group,
// made by a producer outside group management, is listed Empty and
// kept by the cleanup while anything is pending.
func TestTxnOffsetsCommitAndAbort(t *testing.T) {
	c, rc := openTest(t, Options{})
	ctx := context.Background()
	anon := TxnCommitRequest{Group: "s", Generation: -1, ProducerID: 7, ProducerEpoch: 0}
	if err := txnCommit(t, c, anon, map[TopicPartition]int64{tp0: 10, tp1: 11}); err != nil {
		t.Fatal(err)
	}
	other := anon
	other.ProducerID = 8
	if err := txnCommit(t, c, other, map[TopicPartition]int64{tp2: 12}); err != nil {
		t.Fatal(err)
	}
	if n := hashLen(t, rc, c.k.GroupTxnOffsets("s")); n != 3 {
		t.Fatalf("txnoffsets has %d fields, want 3", n)
	}
	wantState(t, "stable fetch while pending", fetchState(t, c, "s", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: -2, tp1: -2, tp2: -2})
	wantState(t, "plain fetch while pending", fetchState(t, c, "s", false, tp0, tp1, tp2), map[TopicPartition]int64{tp0: -1, tp1: -1, tp2: -1})
	if l := c.List(); len(l) != 1 || l[0].Group != "s" || l[0].State != Empty {
		t.Fatalf("list: %+v", l)
	}
	if n, err := c.Cleanup(ctx); n != 0 || err != nil {
		t.Fatalf("cleanup removed %d groups with pending offsets: %v", n, err)
	}

	for range 2 { // the second is a coordinator's retry: no change
		if err := c.CompleteTxn(ctx, "s", 7, true); err != nil {
			t.Fatal(err)
		}
		wantState(t, "after commit", fetchState(t, c, "s", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: 10, tp1: 11, tp2: -2})
	}
	got, err := c.Fetch(ctx, "s", []TopicPartition{tp0}, true)
	if err != nil || got[0].Metadata != "md" {
		t.Fatalf("committed metadata: %+v %v", got, err)
	}
	if n := hashLen(t, rc, c.k.GroupOffsets("s")); n != 2 {
		t.Fatalf("offsets has %d fields, want 2", n)
	}
	for range 2 {
		if err := c.CompleteTxn(ctx, "s", 8, false); err != nil {
			t.Fatal(err)
		}
		wantState(t, "after abort", fetchState(t, c, "s", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: 10, tp1: 11, tp2: -1})
	}
	if n := hashLen(t, rc, c.k.GroupTxnOffsets("s")); n != 0 {
		t.Fatalf("txnoffsets has %d fields after both ended", n)
	}
	// A fresh coordinator on the same Redis reads the same.
	c.Close()
	c2, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	wantState(t, "after reopen", fetchState(t, c2, "s", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: 10, tp1: 11, tp2: -1})

	// Aborted offsets alone leave nothing: the cleanup removes the group.
	if err := txnCommit(t, c2, TxnCommitRequest{Group: "a", Generation: -1, ProducerID: 9}, map[TopicPartition]int64{tp0: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c2.CompleteTxn(ctx, "a", 9, false); err != nil {
		t.Fatal(err)
	}
	if n, err := c2.Cleanup(ctx); n != 1 || err != nil {
		t.Fatalf("cleanup of a group whose only offsets were aborted: %d %v", n, err)
	}
}

// TestTxnOffsetsSurviveRestart: pending offsets are in Redis: a restarted
// coordinator lists the group, answers unstable, and completes them.
func TestTxnOffsetsSurviveRestart(t *testing.T) {
	c, rc := openTest(t, Options{})
	ctx := context.Background()
	if err := txnCommit(t, c, TxnCommitRequest{Group: "s", Generation: -1, ProducerID: 3}, map[TopicPartition]int64{tp0: 5}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c2, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if l := c2.List(); len(l) != 1 || l[0].Group != "s" || l[0].State != Empty {
		t.Fatalf("list after restart: %+v", l)
	}
	if d, ok := c2.Describe("s"); !ok || d.State != Empty || len(d.Members) != 0 {
		t.Fatalf("describe after restart: %+v %v", d, ok)
	}
	wantState(t, "after restart", fetchState(t, c2, "s", true, tp0), map[TopicPartition]int64{tp0: -2})
	if n, err := c2.Cleanup(ctx); n != 0 || err != nil {
		t.Fatalf("cleanup after restart removed %d: %v", n, err)
	}
	if err := c2.CompleteTxn(ctx, "s", 3, true); err != nil {
		t.Fatal(err)
	}
	wantState(t, "committed after restart", fetchState(t, c2, "s", true, tp0), map[TopicPartition]int64{tp0: 5})
}

// TestTxnOffsetsPlainCommitAndDeletes: a plain commit after a
// transactional one for the same partition wins whatever the
// transaction's outcome (the later one in Kafka's log); OffsetDelete and
// DeleteGroups take pending offsets with the committed ones.
func TestTxnOffsetsPlainCommitAndDeletes(t *testing.T) {
	c, rc := openTest(t, Options{})
	ctx := context.Background()
	if err := txnCommit(t, c, TxnCommitRequest{Group: "s", Generation: -1, ProducerID: 1}, map[TopicPartition]int64{tp0: 5, tp1: 6}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(ctx, CommitRequest{Group: "s", Generation: -1, Offsets: []PartitionCommit{{TopicPartition: tp0, Commit: Commit{Offset: 7, LeaderEpoch: -1}}}}); err != nil {
		t.Fatal(err)
	}
	wantState(t, "after the plain commit", fetchState(t, c, "s", true, tp0, tp1), map[TopicPartition]int64{tp0: 7, tp1: -2})
	if err := c.CompleteTxn(ctx, "s", 1, true); err != nil {
		t.Fatal(err)
	}
	wantState(t, "after the transaction", fetchState(t, c, "s", true, tp0, tp1), map[TopicPartition]int64{tp0: 7, tp1: 6})

	if err := txnCommit(t, c, TxnCommitRequest{Group: "s", Generation: -1, ProducerID: 2}, map[TopicPartition]int64{tp1: 8, tp2: 9}); err != nil {
		t.Fatal(err)
	}
	errs, err := c.DeleteOffsets(ctx, "s", []TopicPartition{tp1}, func(string, []byte) ([]string, bool) { return nil, false })
	if err != nil || errs[0] != nil {
		t.Fatalf("delete offsets: %v %v", errs, err)
	}
	wantState(t, "after OffsetDelete", fetchState(t, c, "s", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: 7, tp1: -1, tp2: -2})
	if errs := c.DeleteGroups(ctx, []string{"s"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	r, err := rc.Do(ctx, "EXISTS", c.k.GroupTxnOffsets("s"), c.k.GroupOffsets("s"))
	if n, _ := r.Int(); err != nil || n != 0 {
		t.Fatalf("keys left after DeleteGroups: %d %v", n, err)
	}
	// The transaction ends after the group is gone: nothing comes back.
	if err := c.CompleteTxn(ctx, "s", 2, true); err != nil {
		t.Fatal(err)
	}
	if l := c.List(); len(l) != 0 {
		t.Fatalf("list after delete: %+v", l)
	}
	r, err = rc.Do(ctx, "HEXISTS", c.k.Groups(), "s")
	if n, _ := r.Int(); err != nil || n != 0 {
		t.Fatalf("registry entry after a late completion: %d %v", n, err)
	}
}

// TestTxnOffsetsMemberChecks: KIP-447's checks as Kafka makes them for
// TxnOffsetCommit. A producer outside group management (generation -1,
// no member) commits whatever the group's state; one that names a
// member must be it, at its generation; a static member's instance id
// fences a zombie; an unknown group with a generation is refused.
func TestTxnOffsetsMemberChecks(t *testing.T) {
	c, _ := openTest(t, Options{})
	ctx := context.Background()
	one := map[TopicPartition]int64{tp0: 1}
	if err := txnCommit(t, c, TxnCommitRequest{Group: "nope", Generation: 3, MemberID: "m", ProducerID: 1}, one); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("unknown group with a generation: %v", err)
	}
	ctxJ, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := c.Join(ctxJ, JoinRequest{Group: "g", InstanceID: "i1", ClientID: "c", SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(ctxJ, SyncRequest{Group: "g", MemberID: res.MemberID, Generation: res.Generation, Assignments: map[string][]byte{res.MemberID: nil}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  TxnCommitRequest
		want error
	}{
		{"outside group management", TxnCommitRequest{Generation: -1}, nil},
		{"the member", TxnCommitRequest{Generation: res.Generation, MemberID: res.MemberID, InstanceID: "i1"}, nil},
		{"old generation", TxnCommitRequest{Generation: res.Generation - 1, MemberID: res.MemberID, InstanceID: "i1"}, ErrIllegalGeneration},
		{"member without generation", TxnCommitRequest{Generation: -1, MemberID: res.MemberID}, ErrIllegalGeneration},
		{"unknown member", TxnCommitRequest{Generation: res.Generation, MemberID: "zombie"}, ErrUnknownMemberID},
		{"zombie of the static member", TxnCommitRequest{Generation: res.Generation, MemberID: "zombie", InstanceID: "i1"}, ErrFencedInstanceID},
		{"unknown instance", TxnCommitRequest{Generation: res.Generation, MemberID: res.MemberID, InstanceID: "i2"}, ErrUnknownMemberID},
	} {
		req := tc.req
		req.Group, req.ProducerID = "g", 5
		err := txnCommit(t, c, req, one)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// A KIP-848 consumer group: the member at its epoch, else
	// ILLEGAL_GENERATION (no STALE_MEMBER_EPOCH before v6).
	topic := TopicMeta{Name: "t", ID: TopicID{1}, Partitions: 2}
	c2, _ := openTest(t, Options{Consumer: ConsumerOptions{Topics: func() []TopicMeta { return []TopicMeta{topic} }}})
	r, err := c2.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "cg", MemberID: "m1", MemberEpoch: JoinEpoch, TopicNames: []string{"t"}, RebalanceTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  TxnCommitRequest
		want error
	}{
		{TxnCommitRequest{Generation: r.MemberEpoch, MemberID: "m1"}, nil},
		{TxnCommitRequest{Generation: -1}, nil},
		{TxnCommitRequest{Generation: r.MemberEpoch + 1, MemberID: "m1"}, ErrIllegalGeneration},
		{TxnCommitRequest{Generation: r.MemberEpoch, MemberID: "m2"}, ErrUnknownMemberID},
	} {
		req := tc.req
		req.Group, req.ProducerID = "cg", 5
		err := txnCommit(t, c2, req, one)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("consumer group %+v: %v, want %v", tc.req, err, tc.want)
		}
	}
}

// TestTxnOffsetsCompletedByAnotherBroker: the transaction's coordinator
// may not be the group's. CompleteTxn on a broker that does not own the
// group writes Redis and announces it; the owner answers unstable (never
// a wrong offset) until told, then the committed offset. When the group
// moves, the new owner restores its pending offsets from Redis.
func TestTxnOffsetsCompletedByAnotherBroker(t *testing.T) {
	var mu sync.Mutex
	var announced []string
	c1, c2, owner, _ := twoCoordinators(t, Options{Announce: func(_ context.Context, g string) error {
		mu.Lock()
		defer mu.Unlock()
		announced = append(announced, g)
		return nil
	}})
	ctx := context.Background()
	if err := txnCommit(t, c1, TxnCommitRequest{Group: "g", Generation: -1, ProducerID: 4}, map[TopicPartition]int64{tp0: 40}); err != nil {
		t.Fatal(err)
	}
	if err := txnCommit(t, c2, TxnCommitRequest{Group: "g", Generation: -1, ProducerID: 4}, map[TopicPartition]int64{tp0: 40}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("transactional commit at a broker not owning the group: %v", err)
	}
	wantState(t, "owner while pending", fetchState(t, c1, "g", true, tp0), map[TopicPartition]int64{tp0: -2})
	if err := c2.CompleteTxn(ctx, "g", 4, true); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]string(nil), announced...)
	mu.Unlock()
	if len(got) != 1 || got[0] != "g" {
		t.Fatalf("announced %q, want [g]", got)
	}
	wantState(t, "owner before it is told", fetchState(t, c1, "g", true, tp0), map[TopicPartition]int64{tp0: -2})
	c1.StaleOffsets("g")
	wantState(t, "owner once told", fetchState(t, c1, "g", true, tp0), map[TopicPartition]int64{tp0: 40})
	// A retry at the owner changes nothing and announces nothing.
	if err := c1.CompleteTxn(ctx, "g", 4, true); err != nil {
		t.Fatal(err)
	}
	wantState(t, "after a retry at the owner", fetchState(t, c1, "g", true, tp0), map[TopicPartition]int64{tp0: 40})

	// Pending at c1, then the group moves to c2.
	if err := txnCommit(t, c1, TxnCommitRequest{Group: "g", Generation: -1, ProducerID: 5}, map[TopicPartition]int64{tp0: 50, tp1: 51}); err != nil {
		t.Fatal(err)
	}
	owner.Store(2)
	c1.DropUnowned()
	wantState(t, "new owner", fetchState(t, c2, "g", true, tp0, tp1), map[TopicPartition]int64{tp0: -2, tp1: -2})
	if err := c2.CompleteTxn(ctx, "g", 5, false); err != nil { // at the owner: memory follows at once
		t.Fatal(err)
	}
	wantState(t, "new owner after abort", fetchState(t, c2, "g", true, tp0, tp1), map[TopicPartition]int64{tp0: 40, tp1: -1})
	mu.Lock()
	defer mu.Unlock()
	if len(announced) != 1 {
		t.Fatalf("announced %q: the owner's own completions need no announcement", announced)
	}
}

// TestTxnOffsetsRedisCluster: on a Redis Cluster every key CompleteTxn
// touches shares the {groups} slot, so the script runs there.
func TestTxnOffsetsRedisCluster(t *testing.T) {
	cl := testbed.StartRedisCluster(t, 3, 0)
	rc, err := resp.New(cl.URL, resp.Options{Cluster: true, Seeds: cl.Seeds, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	c, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := txnCommit(t, c, TxnCommitRequest{Group: "g{x}", Generation: -1, ProducerID: 6}, map[TopicPartition]int64{tp0: 60, tp1: 61}); err != nil {
		t.Fatal(err)
	}
	if err := txnCommit(t, c, TxnCommitRequest{Group: "g{x}", Generation: -1, ProducerID: 7}, map[TopicPartition]int64{tp2: 62}); err != nil {
		t.Fatal(err)
	}
	wantState(t, "pending", fetchState(t, c, "g{x}", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: -2, tp1: -2, tp2: -2})
	if err := c.CompleteTxn(ctx, "g{x}", 6, true); err != nil {
		t.Fatal(err)
	}
	if err := c.CompleteTxn(ctx, "g{x}", 7, false); err != nil {
		t.Fatal(err)
	}
	wantState(t, "completed", fetchState(t, c, "g{x}", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: 60, tp1: 61, tp2: -1})
	c.Close()
	c2, err := Open(ctx, rc, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	wantState(t, "reopened", fetchState(t, c2, "g{x}", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: 60, tp1: 61, tp2: -1})
	if n := hashLen(t, rc, c.k.GroupTxnOffsets("g{x}")); n != 0 {
		t.Fatalf("txnoffsets left: %d", n)
	}
}

// TestTxnOffsetsRecheck: a transaction that ended between the
// coordinator's check and the write (its offsets completed already) is
// caught by the recheck: the offsets just stored are taken out of Redis
// and memory, and the recheck's error is returned. Offsets stored
// earlier by the same producer for other partitions stay.
func TestTxnOffsetsRecheck(t *testing.T) {
	c, rc := openTest(t, Options{})
	if err := txnCommit(t, c, TxnCommitRequest{Group: "s", Generation: -1, ProducerID: 3}, map[TopicPartition]int64{tp0: 1}); err != nil {
		t.Fatal(err)
	}
	ended := errors.New("transaction ended")
	req := TxnCommitRequest{Group: "s", Generation: -1, ProducerID: 3, Recheck: func(context.Context) error { return ended }}
	if err := txnCommit(t, c, req, map[TopicPartition]int64{tp1: 2, tp2: 3}); !errors.Is(err, ended) {
		t.Fatalf("commit refused by the recheck: %v", err)
	}
	wantState(t, "after the recheck", fetchState(t, c, "s", true, tp0, tp1, tp2), map[TopicPartition]int64{tp0: -2, tp1: -1, tp2: -1})
	if n := hashLen(t, rc, c.k.GroupTxnOffsets("s")); n != 1 {
		t.Fatalf("txnoffsets has %d fields, want the first commit's 1", n)
	}
	req.Recheck = func(context.Context) error { return nil }
	if err := txnCommit(t, c, req, map[TopicPartition]int64{tp1: 2}); err != nil {
		t.Fatal(err)
	}
	wantState(t, "after a recheck that passes", fetchState(t, c, "s", true, tp0, tp1), map[TopicPartition]int64{tp0: -2, tp1: -2})
}
