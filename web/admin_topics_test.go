package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/internal/testbed"
)

// Topics through the admin API, checked through kadm, and back.
func TestAdminTopics(t *testing.T) {
	e := startAdmin(t)
	ctx := ctxFor(t, 60*time.Second)

	// Create: kadm sees the topic, its partitions and its config.
	res := e.root("POST", "/api/v1/topics", map[string]any{"name": "orders", "partitions": 3, "configs": map[string]string{"retention.ms": "86400000"}})
	if res.code != http.StatusCreated {
		t.Fatalf("create: %d %s", res.code, res.body)
	}
	var created struct {
		Name       string
		Partitions int32
	}
	res.json(t, &created)
	if created.Name != "orders" || created.Partitions != 3 {
		t.Fatalf("create answered %+v", created)
	}
	td, err := e.adm.ListTopics(ctx, "orders")
	if err != nil || len(td["orders"].Partitions) != 3 {
		t.Fatalf("kadm: orders has %d partitions (%v), want 3", len(td["orders"].Partitions), err)
	}
	rc, err := e.adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On("orders", nil); err != nil || configValue(v.Configs, "retention.ms") != "86400000" {
		t.Fatalf("kadm: retention.ms of orders = %q (%v)", configValue(v.Configs, "retention.ms"), err)
	}
	if lines := e.logs.lines(`msg="admin action"`, "action=topic.create", "principal=User:root", "resource=topic:orders", "outcome=ok"); len(lines) != 1 {
		t.Errorf("audit lines for the create: %q", lines)
	}

	// Twice: 409 topic_already_exists.
	res = e.root("POST", "/api/v1/topics", map[string]any{"name": "orders", "partitions": 1})
	if code, _ := res.apiErr(t); res.code != http.StatusConflict || code != "topic_already_exists" {
		t.Fatalf("second create: %d %s", res.code, res.body)
	}

	// Created with kadm, seen through the API.
	if _, err := e.adm.CreateTopic(ctx, 2, -1, map[string]*string{"cleanup.policy": strPtr("compact")}, "made-by-kadm"); err != nil {
		t.Fatal(err)
	}
	res = e.root("GET", "/api/v1/topics/made-by-kadm", nil)
	var desc topicDescJSON
	res.json(t, &desc)
	if res.code != http.StatusOK || desc.Name != "made-by-kadm" || len(desc.Partitions) != 2 || desc.ID == "" {
		t.Fatalf("describe: %d %s", res.code, res.body)
	}
	if v := findConfig(desc.Configs, "cleanup.policy"); v == nil || *v.Value != "compact" || v.Source != "dynamic_topic_config" {
		t.Fatalf("describe: cleanup.policy = %+v", v)
	}

	// Alter configs: set and delete; kadm sees both.
	res = e.root("PATCH", "/api/v1/topics/made-by-kadm/configs", map[string]any{"set": map[string]string{"retention.ms": "3600000"}, "delete": []string{"cleanup.policy"}})
	if res.code != http.StatusOK {
		t.Fatalf("alter configs: %d %s", res.code, res.body)
	}
	rc, err = e.adm.DescribeTopicConfigs(ctx, "made-by-kadm")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := rc.On("made-by-kadm", nil)
	if configValue(v.Configs, "retention.ms") != "3600000" || configValue(v.Configs, "cleanup.policy") != "delete" {
		t.Fatalf("kadm after alter: retention.ms=%q cleanup.policy=%q", configValue(v.Configs, "retention.ms"), configValue(v.Configs, "cleanup.policy"))
	}
	// validate_only changes nothing; a bad value is a 400 naming it.
	res = e.root("PATCH", "/api/v1/topics/made-by-kadm/configs?validate_only=true", map[string]any{"set": map[string]string{"retention.ms": "1000"}})
	if res.code != http.StatusOK || e.eng.Topic("made-by-kadm") == nil {
		t.Fatalf("validate only: %d %s", res.code, res.body)
	}
	if val, _ := e.eng.Topic("made-by-kadm").Config("retention.ms"); val != "3600000" {
		t.Fatalf("validate_only changed retention.ms to %s", val)
	}
	res = e.root("PATCH", "/api/v1/topics/made-by-kadm/configs", map[string]any{"set": map[string]string{"retention.ms": "soon"}})
	if code, msg := res.apiErr(t); res.code != http.StatusBadRequest || !strings.HasPrefix(code, "invalid_") || !strings.Contains(msg, "retention.ms") {
		t.Fatalf("bad config value: %d %s", res.code, res.body)
	}

	// Add partitions.
	res = e.root("POST", "/api/v1/topics/made-by-kadm/partitions", map[string]any{"count": 5})
	if res.code != http.StatusOK {
		t.Fatalf("add partitions: %d %s", res.code, res.body)
	}
	wantPartitions(t, e, "made-by-kadm", 5)

	// Delete; kadm no longer sees it; the API says 404.
	res = e.root("DELETE", "/api/v1/topics/orders", nil)
	if res.code != http.StatusOK {
		t.Fatalf("delete: %d %s", res.code, res.body)
	}
	testbed.WaitFor(t, 30*time.Second, "kadm to stop seeing orders", func() bool {
		td, err := e.adm.ListTopics(ctx, "orders")
		return err == nil && (!td.Has("orders") || td["orders"].Err != nil)
	})
	res = e.root("GET", "/api/v1/topics/orders", nil)
	if code, _ := res.apiErr(t); res.code != http.StatusNotFound || code != "unknown_topic_or_partition" {
		t.Fatalf("describe after delete: %d %s", res.code, res.body)
	}
}

// Each topic action is refused (403 JSON) for a principal without the
// right, and allowed once an ACL grants it.
func TestAdminTopicsRefused(t *testing.T) {
	e := startAdmin(t)
	e.addUser("bob", "bob-pw")
	if res := e.root("POST", "/api/v1/topics", map[string]any{"name": "guarded", "partitions": 1}); res.code != http.StatusCreated {
		t.Fatalf("create: %d %s", res.code, res.body)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/topics", map[string]any{"name": "bobs", "partitions": 1}},
		{"GET", "/api/v1/topics/guarded", nil},
		{"DELETE", "/api/v1/topics/guarded", nil},
		{"PATCH", "/api/v1/topics/guarded/configs", map[string]any{"set": map[string]string{"retention.ms": "1000"}}},
		{"POST", "/api/v1/topics/guarded/partitions", map[string]any{"count": 4}},
	} {
		res := e.as("bob", "bob-pw", c.method, c.path, c.body)
		if code, msg := res.apiErr(t); res.code != http.StatusForbidden || !strings.HasSuffix(code, "_authorization_failed") || msg == "" {
			t.Errorf("bob %s %s: %d %s, want 403 *_authorization_failed", c.method, c.path, res.code, res.body)
		}
	}
	if e.eng.Topic("bobs") != nil || e.eng.Topic("guarded") == nil || len(e.eng.Topic("guarded").Partitions()) != 1 {
		t.Fatal("a refused action changed something")
	}
	if lines := e.logs.lines("action=topic.delete", "principal=User:bob", "outcome=topic_authorization_failed"); len(lines) != 1 {
		t.Errorf("audit lines of bob's refused delete: %q", lines)
	}
	// Without credentials: 401 (Login basic).
	if res := e.as("", "", "DELETE", "/api/v1/topics/guarded", nil); res.code != http.StatusUnauthorized {
		t.Errorf("anonymous delete: %d %s", res.code, res.body)
	}

	// Granted: bob may now delete it.
	e.allow("User:bob", auth.ResTopic, "guarded", auth.OpDelete)
	if res := e.as("bob", "bob-pw", "DELETE", "/api/v1/topics/guarded", nil); res.code != http.StatusOK {
		t.Fatalf("bob with DELETE on guarded: %d %s", res.code, res.body)
	}
}

// Bad requests are 400 invalid_request naming what to fix; unknown
// routes are JSON 404s.
func TestAdminBadRequests(t *testing.T) {
	e := startAdmin(t)
	for _, c := range []struct {
		method, path, body, want string
	}{
		{"POST", "/api/v1/topics", `{"name":"x","partitons":3}`, `unknown field "partitons"`},
		{"POST", "/api/v1/topics", `{"name":"x","partitions":"3"}`, "field partitions"},
		{"POST", "/api/v1/topics", `{"name":`, "not JSON"},
		{"POST", "/api/v1/topics", ``, "empty"},
		{"POST", "/api/v1/topics", `{"name":"x"} {"name":"y"}`, "more than one"},
		{"POST", "/api/v1/topics", `{"partitions":3}`, "field name"},
		{"POST", "/api/v1/topics", `{"name":"x","configs":{"a":"` + strings.Repeat("a", maxAdminBody) + `"}}`, "larger than"},
		{"PATCH", "/api/v1/topics/x/configs?validate_only=maybe", `{"set":{"a":"b"}}`, "validate_only"},
		{"PATCH", "/api/v1/topics/x/configs", `{}`, "nothing to change"},
		{"POST", "/api/v1/topics/x/partitions", `{"count":0}`, "field count"},
	} {
		res := e.root(c.method, c.path, c.body)
		code, msg := res.apiErr(t)
		if res.code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %.40q: %d %s, want 400 invalid_request mentioning %q", c.method, c.path, c.body, res.code, res.body, c.want)
		}
	}
	res := e.root("GET", "/api/v1/nothing-here", nil)
	if code, _ := res.apiErr(t); res.code != http.StatusNotFound || code != "no_such_route" {
		t.Errorf("unknown route: %d %s", res.code, res.body)
	}
	res = e.root("PUT", "/api/v1/topics", nil)
	if code, _ := res.apiErr(t); res.code != http.StatusMethodNotAllowed || code != "method_not_allowed" || !strings.Contains(res.hdr.Get("Allow"), "POST") {
		t.Errorf("PUT /api/v1/topics: %d %s %v", res.code, res.body, res.hdr)
	}
}

func strPtr(s string) *string { return &s }

func configValue(cs []kadm.Config, name string) string {
	for _, c := range cs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

func findConfig(cs []configView, name string) *configView {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func wantPartitions(t *testing.T, e *adminEnv, topic string, n int) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	td, err := e.adm.ListTopics(ctx, topic)
	if err != nil || len(td[topic].Partitions) != n {
		t.Fatalf("kadm: %s has %d partitions (%v), want %d", topic, len(td[topic].Partitions), err, n)
	}
}
