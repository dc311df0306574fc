package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/web"
)

// TestSharedMetadataAcrossEngines: two brokers on one Redis. Topics
// created, grown, altered and deleted on one, ACLs created on one and
// share groups created on one, are seen by the other within a deadline.
func TestSharedMetadataAcrossEngines(t *testing.T) {
	r := testbed.StartRedis(t)
	e1, rc1 := enginetest.Open(t, r, engine.Options{NodeID: 1})
	e2, rc2 := enginetest.Open(t, r, engine.Options{NodeID: 2})
	ctx := context.Background()
	const within = 5 * time.Second

	if _, err := e1.CreateTopic(ctx, "shared", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "topic created on e1 seen by e2", func() bool { return e2.Topic("shared") != nil })
	if e2.Topic("shared").ID() != e1.Topic("shared").ID() {
		t.Fatal("topic ids differ between brokers")
	}
	// Records appended through e1 are readable through e2's partition
	// once its view is reloaded (the new topic was loaded from Redis).
	lead, _ := leaderOf(t, "shared", 0, e1, e2)
	if _, _, err := lead.Topic("shared").Partition(0).Append([]record.Record{{Key: []byte("k"), Value: []byte("v")}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}

	if err := e1.CreatePartitions(ctx, "shared", 3, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "partitions grown on e1 seen by e2", func() bool { return len(e2.Topic("shared").Partitions()) == 3 })

	if err := e1.IncrementalAlterConfigs(ctx, "shared", []engine.ConfigOp{{Name: "retention.ms", Op: engine.OpSet, Value: "123456"}}, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "configs altered on e1 seen by e2", func() bool { return e2.Topic("shared").Configs()["retention.ms"] == "123456" })
	// e2 alters from what Redis has: its change keeps e1's partitions.
	if err := e2.IncrementalAlterConfigs(ctx, "shared", []engine.ConfigOp{{Name: "retention.ms", Op: engine.OpDelete}}, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "configs altered on e2 seen by e1", func() bool { _, ok := e1.Topic("shared").Configs()["retention.ms"]; return !ok })
	if n := len(e1.Topic("shared").Partitions()); n != 3 {
		t.Fatalf("e1 has %d partitions after e2's alter, want 3", n)
	}

	p0 := e2.Topic("shared").Partition(0)
	if err := e1.DeleteTopic(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "topic deleted on e1 gone from e2", func() bool { return e2.Topic("shared") == nil })
	if _, _, err := p0.Append([]record.Record{{Value: []byte("late")}}).Wait(ctx); err == nil {
		t.Fatal("append to a partition of a topic deleted on the other broker succeeded")
	}

	// ACLs: created on one broker's store, enforced by the other's.
	s1, err := auth.Open(ctx, rc1, auth.Options{Events: e1.Events(), Logger: testbed.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := auth.Open(ctx, rc2, auth.Options{Events: e2.Events(), Logger: testbed.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Authorize("User:alice", "127.0.0.1", auth.OpRead, auth.ResTopic, "t") {
		t.Fatal("authorized before any ACL")
	}
	acl := auth.ACL{Principal: "User:alice", Host: "*", ResourceType: auth.ResTopic, Pattern: auth.PatternLiteral, Resource: "t", Operation: auth.OpRead, Permission: auth.PermAllow}
	if err := s1.CreateACLs(ctx, []auth.ACL{acl}); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "ACL created on e1 authorizes on e2", func() bool {
		return s2.Authorize("User:alice", "127.0.0.1", auth.OpRead, auth.ResTopic, "t")
	})
	if _, err := s1.DeleteACLs(ctx, []auth.Filter{{Principal: &acl.Principal, ResourceType: auth.ResTopic, Pattern: auth.PatternLiteral, Resource: &acl.Resource, Operation: auth.OpRead, Permission: auth.PermAllow}}); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "ACL deleted on e1 no longer authorizes on e2", func() bool {
		return !s2.Authorize("User:alice", "127.0.0.1", auth.OpRead, auth.ResTopic, "t")
	})

	// Share groups: the registry is shared.
	if _, err := e1.CreateTopic(ctx, "st", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	// The group's coordinator creates and deletes it; the other broker
	// follows the shared registry.
	co, other := e1, e2
	if e1.Coordinator("sg") != e1.NodeID() {
		co, other = e2, e1
	}
	if _, err := other.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: "sg", MemberID: "m1", Topics: []string{"st"}}); err == nil {
		t.Fatal("a broker that does not coordinate sg took a share heartbeat for it")
	}
	testbed.WaitFor(t, within, "topic st on the coordinator", func() bool { return co.Topic("st") != nil })
	if _, err := co.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: "sg", MemberID: "m1", Topics: []string{"st"}}); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "share group created on its coordinator known to the other broker", func() bool { return other.IsShareGroup("sg") })
	if _, err := co.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: "sg", MemberID: "m1", MemberEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	if err := co.DeleteShareGroup(ctx, "sg"); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, within, "share group deleted on its coordinator gone from the other broker", func() bool { return !other.IsShareGroup("sg") })
}

// TestKVReadYourWritesAcrossEngines: a record appended through engine 1
// is readable through engine 2's KV view (the web handler) with the
// acknowledged partition:offset as a token at once, and without it
// eventually; a token for an offset never written times out with 503;
// malformed tokens get 400.
func TestKVReadYourWritesAcrossEngines(t *testing.T) {
	r := testbed.StartRedis(t)
	e1, _ := enginetest.Open(t, r, engine.Options{NodeID: 1, Index: engine.IndexOptions{Dir: t.TempDir()}})
	e2, _ := enginetest.Open(t, r, engine.Options{NodeID: 2, Index: engine.IndexOptions{Dir: t.TempDir()}})
	ctx := context.Background()
	if _, err := e1.CreateTopic(ctx, "kvt", 2, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 5*time.Second, "topic seen by e2", func() bool { return e2.Topic("kvt") != nil })
	testbed.WaitFor(t, 5*time.Second, "topic seen by e1", func() bool { return e1.Topic("kvt") != nil })
	// Each read goes to the broker that did not take the write.
	srvs := map[*engine.Engine]*httptest.Server{}
	for _, e := range []*engine.Engine{e1, e2} {
		srvs[e] = httptest.NewServer(web.New(e, web.Options{Logger: testbed.Logger()}))
		defer srvs[e].Close()
	}
	lead1, follow1 := leaderOf(t, "kvt", 1, e1, e2)
	lead0, follow0 := leaderOf(t, "kvt", 0, e1, e2)
	srv := srvs[follow1]
	get := func(path string, header string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set("Korvet-After", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}

	for i := range 5 {
		v := "v" + strconv.Itoa(i)
		base, _, err := lead1.Topic("kvt").Partition(1).Append([]record.Record{kvRec("k", v)}).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		token := "1:" + strconv.FormatInt(base, 10)
		var code int
		var body string
		if i%2 == 0 {
			code, body, _ = get("/v1/kv/kvt/k?after="+token, "")
		} else {
			code, body, _ = get("/v1/kv/kvt/k", token)
		}
		if code != http.StatusOK || body != v {
			t.Fatalf("read with token %s through e2: %d %q, want 200 %q", token, code, body, v)
		}
	}
	// Without a token the value arrives too, eventually.
	if _, _, err := lead0.Topic("kvt").Partition(0).Append([]record.Record{kvRec("j", "x")}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	srv = srvs[follow0]
	testbed.WaitFor(t, 5*time.Second, "the other broker serves j without a token", func() bool {
		code, body, _ := get("/v1/kv/kvt/j", "")
		return code == http.StatusOK && body == "x"
	})

	// An offset never written: the broker waits its 2s, then 503.
	start := time.Now()
	code, body, hd := get("/v1/kv/kvt/k?after=0:1000", "")
	if code != http.StatusServiceUnavailable || hd.Get("Retry-After") == "" {
		t.Fatalf("token beyond the log: %d %s (Retry-After %q)", code, body, hd.Get("Retry-After"))
	}
	var behind struct {
		Reason    string `json:"reason"`
		Partition int32  `json:"partition"`
		Behind    int64  `json:"behind"`
	}
	if err := json.Unmarshal([]byte(body), &behind); err != nil || behind.Reason != "index_behind" || behind.Partition != 0 || behind.Behind != 1000 {
		t.Fatalf("503 body: %s (%v)", body, err)
	}
	if took := time.Since(start); took < engine.MaxKVWait || took > engine.MaxKVWait+3*time.Second {
		t.Fatalf("a token beyond the log waited %v, want about %v", took, engine.MaxKVWait)
	}

	for _, bad := range []string{"x", "1", "1:", ":3", "0:-1", "2:0", "-1:0", "0:1,1:1,0:2", "0:1;1:2", "0:99999999999999999999"} {
		if code, body, _ := get("/v1/kv/kvt/k", bad); code != http.StatusBadRequest {
			t.Fatalf("token %q: %d %s, want 400", bad, code, body)
		}
	}
	if code, body, _ := get("/v1/kv/kvt/k?after=", ""); code != http.StatusBadRequest {
		t.Fatalf("empty after=: %d %s, want 400", code, body)
	}
}

// leaderOf waits until one of the engines leads the partition and returns
// it and another.
func leaderOf(t *testing.T, topic string, partition int32, es ...*engine.Engine) (lead, other *engine.Engine) {
	t.Helper()
	testbed.WaitFor(t, 10*time.Second, "a leader for "+topic, func() bool {
		lead, other = nil, nil
		for _, e := range es {
			tp := e.Topic(topic)
			switch {
			case tp == nil || tp.Partition(partition) == nil:
				return false
			case tp.Partition(partition).IsLeader():
				lead = e
			default:
				other = e
			}
		}
		return lead != nil && other != nil
	})
	return lead, other
}
