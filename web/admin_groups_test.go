package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
)

// fillTopic creates topic with partitions and n records in each.
func (e *adminEnv) fillTopic(topic string, partitions int32, n int) {
	e.t.Helper()
	ctx := context.Background()
	tp, err := e.eng.CreateTopic(ctx, topic, partitions, nil, false)
	if err != nil {
		e.t.Fatal(err)
	}
	testbed.WaitFor(e.t, 30*time.Second, "this broker to lead the new partitions", func() bool {
		for _, p := range tp.Partitions() {
			if !p.IsLeader() {
				return false
			}
		}
		return true
	})
	for _, p := range tp.Partitions() {
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Value: []byte("v"), Timestamp: int64(1000 * (i + 1))}
		}
		if _, _, err := p.Append(recs).Wait(ctx); err != nil {
			e.t.Fatal(err)
		}
	}
}

// consumer is a kgo group member of grp on topic, logged in as root.
func (e *adminEnv) consumer(grp, topic string) *kgo.Client {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafkaAt), kgo.SASL(scram.Auth{User: "root", Pass: rootPassword}.AsSha256Mechanism()),
		kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	return cl
}

func TestAdminGroups(t *testing.T) {
	e := startAdmin(t)
	ctx := ctxFor(t, 90*time.Second)
	e.fillTopic("clicks", 2, 10)

	// A member consumes everything and commits; while it is there the
	// group is described with it, and reset and delete are refused.
	cl := e.consumer("readers", "clicks")
	defer cl.Close()
	read := 0
	for read < 20 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	var g groupDescJSON
	res := e.root("GET", "/api/v1/groups/readers", nil)
	res.json(t, &g)
	if res.code != http.StatusOK || len(g.Members) != 1 || len(g.Offsets) != 2 || g.Offsets[0].Committed != 10 || g.Offsets[0].Lag != 0 {
		t.Fatalf("describe with a member: %d %s", res.code, res.body)
	}
	if a := g.Members[0].Assignments; len(a) != 1 || a[0].Topic != "clicks" || len(a[0].Partitions) != 2 {
		t.Errorf("member assignment: %+v", a)
	}
	res = e.root("POST", "/api/v1/groups/readers/reset-offsets", map[string]any{"topic": "clicks", "to": "earliest"})
	if code, msg := res.apiErr(t); res.code != http.StatusConflict || code != "group_not_empty" || !strings.Contains(msg, "stop its consumers") {
		t.Fatalf("reset with a member: %d %s", res.code, res.body)
	}
	res = e.root("DELETE", "/api/v1/groups/readers", nil)
	if code, _ := res.apiErr(t); res.code != http.StatusConflict || code != "non_empty_group" {
		t.Fatalf("delete with a member: %d %s", res.code, res.body)
	}
	cl.Close() // leaves the group
	testbed.WaitFor(t, 30*time.Second, "the group to empty", func() bool {
		var g groupDescJSON
		e.root("GET", "/api/v1/groups/readers", nil).json(t, &g)
		return len(g.Members) == 0
	})

	// Dry run: the answer, no change.
	res = e.root("POST", "/api/v1/groups/readers/reset-offsets", map[string]any{"topic": "clicks", "to": "earliest", "dry_run": true})
	var reset struct {
		Offsets []topicOffsetJSON
		DryRun  bool `json:"dry_run"`
	}
	res.json(t, &reset)
	if res.code != http.StatusOK || !reset.DryRun || len(reset.Offsets) != 2 || reset.Offsets[0].Offset != 0 {
		t.Fatalf("dry run: %d %s", res.code, res.body)
	}
	committed := func() map[int32]int64 {
		t.Helper()
		os, err := e.adm.FetchOffsets(ctx, "readers")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for p, o := range os["clicks"] {
			out[p] = o.At
		}
		return out
	}
	if c := committed(); c[0] != 10 || c[1] != 10 {
		t.Fatalf("dry run changed the offsets: %v", c)
	}
	// Each kind of reset, seen through kadm.
	for _, c := range []struct {
		body map[string]any
		want map[int32]int64
	}{
		{map[string]any{"topic": "clicks", "to": "earliest"}, map[int32]int64{0: 0, 1: 0}},
		{map[string]any{"topic": "clicks", "to": "latest", "partitions": []int32{1}}, map[int32]int64{0: 0, 1: 10}},
		{map[string]any{"topic": "clicks", "to": "offset", "offset": 4}, map[int32]int64{0: 4, 1: 4}},
		{map[string]any{"topic": "clicks", "to": "offset", "offset": 99}, map[int32]int64{0: 10, 1: 10}}, // clamped
		{map[string]any{"topic": "clicks", "to": "TIMESTAMP", "timestamp": 3000}, map[int32]int64{0: 2, 1: 2}},
	} {
		res := e.root("POST", "/api/v1/groups/readers/reset-offsets", c.body)
		if res.code != http.StatusOK {
			t.Fatalf("reset %v: %d %s", c.body, res.code, res.body)
		}
		if got := committed(); got[0] != c.want[0] || got[1] != c.want[1] {
			t.Errorf("reset %v: kadm sees %v, want %v", c.body, got, c.want)
		}
	}
	var after groupDescJSON
	e.root("GET", "/api/v1/groups/readers", nil).json(t, &after)
	if len(after.Offsets) != 2 || after.Offsets[0].Lag != 8 || after.State != "empty" {
		t.Errorf("describe after reset: %+v", after)
	}
	for _, body := range []string{`{"topic":"clicks","to":"someday"}`, `{"topic":"clicks","to":"timestamp"}`, `{"to":"earliest"}`, `{"topic":"clicks","to":"earliest","partitions":[7]}`} {
		if res := e.root("POST", "/api/v1/groups/readers/reset-offsets", body); res.code != http.StatusBadRequest {
			t.Errorf("reset %s: %d %s", body, res.code, res.body)
		}
	}

	// Delete; kadm no longer lists it; describing it is a 404.
	if res := e.root("DELETE", "/api/v1/groups/readers", nil); res.code != http.StatusOK {
		t.Fatalf("delete: %d %s", res.code, res.body)
	}
	gs, err := e.adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gs["readers"]; ok {
		t.Errorf("kadm still lists readers after delete")
	}
	if res := e.root("GET", "/api/v1/groups/readers", nil); res.code != http.StatusNotFound {
		t.Errorf("describe after delete: %d %s", res.code, res.body)
	}
	if lines := e.logs.lines("action=group.reset_offsets ", "resource=\"group:readers topic:clicks\"", "outcome=ok"); len(lines) != 5 {
		t.Errorf("audit lines of the resets: %d: %q", len(lines), lines)
	}
}

func TestAdminGroupsRefused(t *testing.T) {
	e := startAdmin(t)
	e.addUser("bob", "bob-pw")
	e.fillTopic("clicks", 1, 5)
	if _, err := e.adm.CommitOffsets(ctxFor(t, 30*time.Second), "theirs", offsetsAt("clicks", 0, 3)); err != nil {
		t.Fatal(err)
	}
	// bob may read the topic but has no rights on the group.
	e.allow("User:bob", auth.ResTopic, "clicks", auth.OpRead)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/v1/groups/theirs", nil},
		{"POST", "/api/v1/groups/theirs/reset-offsets", map[string]any{"topic": "clicks", "to": "earliest"}},
		{"DELETE", "/api/v1/groups/theirs", nil},
	} {
		res := e.as("bob", "bob-pw", c.method, c.path, c.body)
		if code, _ := res.apiErr(t); res.code != http.StatusForbidden || code != "group_authorization_failed" {
			t.Errorf("bob %s %s: %d %s, want 403 group_authorization_failed", c.method, c.path, res.code, res.body)
		}
	}
	os, err := e.adm.FetchOffsets(ctxFor(t, 30*time.Second), "theirs")
	if err != nil || os["clicks"][0].At != 3 {
		t.Fatalf("offsets after refused actions: %v %v", os, err)
	}
}

// The lag history samples every group's lag, bounded per group, and its
// sampler stops with the context.
func TestAdminLagHistory(t *testing.T) {
	eng, _ := openEngine(t)
	ctx := context.Background()
	fill(t, eng, "t", 1, 2, "g", 0)
	sctx, cancel := context.WithCancel(ctx)
	s, _ := build(eng, Options{Version: "t", Started: time.Now(), Logger: quiet, Context: sctx, LagSampleEvery: 10 * time.Millisecond})
	testbed.WaitFor(t, 10*time.Second, "lag samples", func() bool { return len(s.lagHistory.history("g")) >= 3 })
	if h := s.lagHistory.history("g"); h[len(h)-1].Lag != 2 {
		t.Errorf("lag history %+v, want lag 2", h)
	}
	testbed.WaitFor(t, 30*time.Second, "the ring to fill", func() bool { return len(s.lagHistory.history("g")) == lagSamples })
	cancel()
	select {
	case <-s.lagHistory.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sampler did not stop with its context")
	}
	if h := s.lagHistory.history("g"); len(h) != lagSamples || !h[0].Time.Before(h[len(h)-1].Time) {
		t.Errorf("ring: %d samples, oldest %v newest %v", len(h), h[0].Time, h[len(h)-1].Time)
	}
}

// offsetsAt is one committed offset for kadm.
func offsetsAt(topic string, partition int32, at int64) kadm.Offsets {
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: at, LeaderEpoch: -1})
	return os
}
