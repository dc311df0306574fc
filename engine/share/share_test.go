package share

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestParseAcks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches []AckBatch
		max     int64
		maxType int8
		want    []AckRun
		err     error
	}{
		{"one type per batch, adjacent same type merge", []AckBatch{{0, 4, []int8{1}}, {5, 6, []int8{1}}, {8, 8, []int8{3}}}, 100, AckReject,
			[]AckRun{{0, 6, 1}, {8, 8, 3}}, nil},
		{"per offset types split into runs", []AckBatch{{10, 14, []int8{1, 1, 2, 0, 2}}}, 100, AckReject,
			[]AckRun{{10, 11, 1}, {12, 12, 2}, {13, 13, 0}, {14, 14, 2}}, nil},
		{"wrong type count", []AckBatch{{0, 3, []int8{1, 1}}}, 100, AckReject, nil, ErrInvalidRequest},
		{"no types", []AckBatch{{0, 3, nil}}, 100, AckReject, nil, ErrInvalidRequest},
		{"last before first", []AckBatch{{5, 3, []int8{1}}}, 100, AckReject, nil, ErrInvalidRequest},
		{"negative offset", []AckBatch{{-1, 3, []int8{1}}}, 100, AckReject, nil, ErrInvalidRequest},
		{"overlap", []AckBatch{{0, 5, []int8{1}}, {5, 6, []int8{1}}}, 100, AckReject, nil, ErrInvalidRequest},
		{"out of order", []AckBatch{{10, 12, []int8{1}}, {0, 1, []int8{1}}}, 100, AckReject, nil, ErrInvalidRequest},
		{"too many offsets, before allocating per offset", []AckBatch{{0, 1 << 50, []int8{1}}}, 50000, AckReject, nil, ErrTooManyAcknowledged},
		{"too many over batches", []AckBatch{{0, 30, []int8{1}}, {40, 80, []int8{1}}}, 50, AckReject, nil, ErrTooManyAcknowledged},
		{"unknown type", []AckBatch{{0, 0, []int8{5}}}, 100, AckRenew, nil, ErrInvalidAcknowledgeTy},
		{"renew only when allowed", []AckBatch{{0, 0, []int8{AckRenew}}}, 100, AckReject, nil, ErrInvalidAcknowledgeTy},
		{"renew allowed", []AckBatch{{0, 0, []int8{AckRenew}}}, 100, AckRenew, []AckRun{{0, 0, AckRenew}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAcks(tc.batches, tc.max, tc.maxType)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("runs %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	counts := map[string]int32{"a": 4, "b": 1}
	// Fewer members than partitions: disjoint, all covered.
	got := Assign(map[string][]string{"m1": {"a"}, "m2": {"a"}}, counts)
	all := append(slices.Clone(got["m1"]["a"]), got["m2"]["a"]...)
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3}) || len(got["m1"]["a"]) != 2 {
		t.Fatalf("2 members on 4 partitions: %v", got)
	}
	// More members than partitions: every member gets one, partitions
	// shared, every partition covered.
	subs := map[string][]string{}
	for _, m := range []string{"m1", "m2", "m3", "m4", "m5", "m6"} {
		subs[m] = []string{"a", "b", "missing"}
	}
	got = Assign(subs, counts)
	seen := map[int32]int{}
	for m, a := range got {
		if len(a["a"]) != 1 || len(a["b"]) != 1 || len(a["missing"]) != 0 {
			t.Fatalf("member %s got %v", m, a)
		}
		seen[a["a"][0]]++
	}
	if len(seen) != 4 {
		t.Fatalf("partitions covered: %v", seen)
	}
	// Deterministic.
	if again := Assign(subs, counts); !reflect.DeepEqual(again, got) {
		t.Fatal("assignment not deterministic")
	}
	// A member subscribed to nothing existing gets an empty assignment.
	got = Assign(map[string][]string{"m1": {"nope"}}, counts)
	if len(got["m1"]) != 0 {
		t.Fatalf("got %v", got)
	}
}

func counts(m map[string]int32) PartitionCounts {
	return func(topics []string) map[string]int32 {
		out := map[string]int32{}
		for _, t := range topics {
			if n, ok := m[t]; ok {
				out[t] = n
			}
		}
		return out
	}
}

func TestHeartbeat(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCoordinator(Options{SessionTimeout: 10 * time.Second, MaxMembers: 2, Now: func() time.Time { return now }})
	pc := counts(map[string]int32{"t": 2})
	if _, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "", Topics: []string{"t"}}, pc); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("empty member id: %v", err)
	}
	if _, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a"}, pc); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("join without topics: %v", err)
	}
	ra, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a", Topics: []string{"t"}}, pc)
	if err != nil || !ra.Joined || ra.Epoch < 1 || !slices.Equal(ra.Assignment["t"], []int32{0, 1}) {
		t.Fatalf("join a: %+v %v", ra, err)
	}
	rb, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "b", Topics: []string{"t"}}, pc)
	if err != nil || rb.Epoch <= ra.Epoch || len(rb.Assignment["t"]) != 1 {
		t.Fatalf("join b: %+v %v", rb, err)
	}
	if _, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "c", Topics: []string{"t"}}, pc); !errors.Is(err, ErrGroupFull) {
		t.Fatalf("third member: %v", err)
	}
	// a's next heartbeat with its epoch gets the new, smaller assignment.
	ra2, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: ra.Epoch}, pc)
	if err != nil || len(ra2.Assignment["t"]) != 1 || ra2.Epoch != rb.Epoch {
		t.Fatalf("a after b joined: %+v %v", ra2, err)
	}
	if _, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: ra2.Epoch + 5}, pc); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("wrong epoch: %v", err)
	}
	if _, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "zz", MemberEpoch: 3}, pc); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown member: %v", err)
	}
	// b's session times out: a gets both partitions back.
	now = now.Add(8 * time.Second)
	ra3, _ := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: ra2.Epoch}, pc)
	now = now.Add(8 * time.Second)
	ra4, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: ra3.Epoch}, pc)
	if err != nil || !slices.Equal(ra4.Assignment["t"], []int32{0, 1}) {
		t.Fatalf("after b expired: %+v %v", ra4, err)
	}
	// Leave; the group stays, empty.
	if r, err := c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: "a", MemberEpoch: -1}, pc); err != nil || r.Epoch != -1 {
		t.Fatalf("leave: %+v %v", r, err)
	}
	if n := c.Names(); !maps.Equal(n, map[string]int{"g": 0}) {
		t.Fatalf("names %v", n)
	}
	if err := c.Delete("g"); err != nil || c.Exists("g") {
		t.Fatalf("delete: %v", err)
	}
}

func TestSessions(t *testing.T) {
	c := NewCoordinator(Options{MaxSessions: 1})
	k := SessionKey{"g", "m"}
	tp := TopicPartition{Partition: 1}
	if _, err := c.UpdateSession(k, 1, nil, nil); !errors.Is(err, ErrSessionNotFound) {
		t.Fatal(err)
	}
	if _, err := c.OpenSession(k, []TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenSession(SessionKey{"g", "other"}, nil); !errors.Is(err, ErrSessionLimit) {
		t.Fatalf("second session past the limit: %v", err)
	}
	if _, err := c.UpdateSession(k, 2, nil, nil); !errors.Is(err, ErrInvalidSessionEpoch) {
		t.Fatal(err)
	}
	parts, err := c.UpdateSession(k, 1, []TopicPartition{{Partition: 2}}, []TopicPartition{tp})
	if err != nil || len(parts) != 1 || parts[0].Partition != 2 {
		t.Fatalf("update: %v %v", parts, err)
	}
	if _, err := c.CheckSession(k, 0); !errors.Is(err, ErrInvalidSessionEpoch) {
		t.Fatal(err)
	}
	if _, err := c.CheckSession(k, 2); err != nil {
		t.Fatal(err)
	}
	if parts, err := c.CloseSession(k); err != nil || len(parts) != 1 {
		t.Fatal(parts, err)
	}
	if c.Sessions() != 0 {
		t.Fatal("session kept after close")
	}
	many := make([]TopicPartition, MaxSessionPartitions+1)
	for i := range many {
		many[i].Partition = int32(i)
	}
	if _, err := c.OpenSession(k, many); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("session of %d partitions: %v", len(many), err)
	}
	if _, err := c.OpenSession(k, many[:MaxSessionPartitions]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateSession(k, 1, many[MaxSessionPartitions:], nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("growing a session past the bound: %v", err)
	}
}

// TestReconcile: the registry in Redis decides which share groups exist;
// ownership decides where their members live. A group another broker
// coordinates loses its members here (they rejoin there); one deleted
// elsewhere goes once empty; one created elsewhere appears.
func TestReconcile(t *testing.T) {
	c := NewCoordinator(Options{})
	counts := func(topics []string) map[string]int32 {
		out := map[string]int32{}
		for _, n := range topics {
			out[n] = 2
		}
		return out
	}
	for _, g := range []string{"mine", "theirs"} {
		if _, err := c.Heartbeat(HeartbeatRequest{Group: g, MemberID: "m", Topics: []string{"t"}}, counts); err != nil {
			t.Fatal(err)
		}
	}
	c.Ensure("deleted")
	c.Reconcile(map[string]bool{"mine": true, "theirs": true, "new": true}, func(g string) bool { return g != "theirs" })
	names := c.Names()
	want := map[string]int{"mine": 1, "theirs": 0, "new": 0}
	if !maps.Equal(names, want) {
		t.Fatalf("groups after reconcile: %v, want %v", names, want)
	}
	if c.IsMember("theirs", "m") {
		t.Fatal("a member of a group coordinated elsewhere stayed")
	}
	// The member's next heartbeat here is refused: it must find the new
	// coordinator and join there.
	if _, err := c.Heartbeat(HeartbeatRequest{Group: "theirs", MemberID: "m", MemberEpoch: 1}, counts); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("heartbeat of a dropped member: %v", err)
	}
}
