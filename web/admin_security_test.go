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
)

// SCRAM users set through the API log in over Kafka and are what kadm
// describes; the password never reaches the log.
func TestAdminUsers(t *testing.T) {
	e := startAdmin(t)
	ctx := ctxFor(t, 60*time.Second)
	const pw = "carol-password-1"
	res := e.root("PUT", "/api/v1/users/carol", map[string]any{"mechanism": "SCRAM-SHA-512", "password": pw, "iterations": 4096})
	if res.code != http.StatusOK {
		t.Fatalf("set user: %d %s", res.code, res.body)
	}
	if res := e.root("PUT", "/api/v1/users/carol", map[string]any{"password": pw}); res.code != http.StatusOK {
		t.Fatalf("set user (default mechanism): %d %s", res.code, res.body)
	}
	described, err := e.adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	c := described["carol"]
	if c.Err != nil || len(c.CredInfos) != 2 {
		t.Fatalf("kadm describes carol as %+v", c)
	}
	// carol logs in over Kafka with the password, both mechanisms.
	for _, mech := range []func(scram.Auth) kgo.Opt{
		func(a scram.Auth) kgo.Opt { return kgo.SASL(a.AsSha512Mechanism()) },
		func(a scram.Auth) kgo.Opt { return kgo.SASL(a.AsSha256Mechanism()) },
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafkaAt), mech(scram.Auth{User: "carol", Pass: pw}))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Ping(ctx); err != nil {
			t.Errorf("carol cannot log in: %v", err)
		}
		cl.Close()
	}
	var list struct{ Users []userJSON }
	e.root("GET", "/api/v1/users", nil).json(t, &list)
	if len(list.Users) != 2 || list.Users[0].Name != "carol" || len(list.Users[0].Mechanisms) != 2 || list.Users[1].Name != "root" {
		t.Errorf("users: %+v", list.Users)
	}
	if strings.Contains(strings.Join(e.logs.lines(), "\n"), pw) {
		t.Error("the password is in the log")
	}
	if lines := e.logs.lines("action=user.set", "resource=user:carol", "outcome=ok"); len(lines) != 2 {
		t.Errorf("audit lines of user.set: %q", lines)
	}
	for _, body := range []string{`{"password":""}`, `{"password":"x","mechanism":"MD5"}`, `{"password":"x","iterations":10}`} {
		if res := e.root("PUT", "/api/v1/users/carol", body); res.code != http.StatusBadRequest {
			t.Errorf("set user %s: %d %s", body, res.code, res.body)
		}
	}

	// Delete one mechanism, then the rest.
	if res := e.root("DELETE", "/api/v1/users/carol?mechanism=SCRAM-SHA-512", nil); res.code != http.StatusOK {
		t.Fatalf("delete one mechanism: %d %s", res.code, res.body)
	}
	described, _ = e.adm.DescribeUserSCRAMs(ctx, "carol")
	if c := described["carol"]; len(c.CredInfos) != 1 || c.CredInfos[0].Mechanism != kadm.ScramSha256 {
		t.Fatalf("after deleting SHA-512: %+v", c)
	}
	if res := e.root("DELETE", "/api/v1/users/carol", nil); res.code != http.StatusOK {
		t.Fatalf("delete user: %d %s", res.code, res.body)
	}
	described, _ = e.adm.DescribeUserSCRAMs(ctx, "carol")
	if c := described["carol"]; c.Err == nil {
		t.Fatalf("kadm still describes carol: %+v", c)
	}
	if res := e.root("DELETE", "/api/v1/users/carol", nil); res.code != http.StatusNotFound {
		t.Errorf("delete a deleted user: %d %s", res.code, res.body)
	}

	// Only super users: bob, even with every ACL on the cluster, may not.
	e.addUser("bob", "bob-pw")
	e.allow("User:bob", auth.ResCluster, auth.ClusterName, auth.OpAll)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/users", ""},
		{"PUT", "/api/v1/users/bob", `{"password":"mine-now"}`},
		{"DELETE", "/api/v1/users/root", ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		res := e.as("bob", "bob-pw", c.method, c.path, body)
		if code, _ := res.apiErr(t); res.code != http.StatusForbidden || code != "cluster_authorization_failed" {
			t.Errorf("bob %s %s: %d %s", c.method, c.path, res.code, res.body)
		}
	}
	if err := e.store.CheckPassword(context.Background(), "bob", "bob-pw"); err != nil {
		t.Errorf("bob's password changed: %v", err)
	}
}

// ACLs made through the API are what kadm describes and what korvet
// enforces; kadm's are listed by the API; deleting by filter.
func TestAdminACLs(t *testing.T) {
	e := startAdmin(t)
	ctx := ctxFor(t, 60*time.Second)
	e.addUser("dave", "dave-pw")
	res := e.root("POST", "/api/v1/acls", map[string]any{"resource_type": "topic", "resource_name": "logs-", "pattern": "PREFIXED",
		"principal": "User:dave", "operation": "create"})
	if res.code != http.StatusCreated {
		t.Fatalf("create ACL: %d %s", res.code, res.body)
	}
	var made aclJSON
	res.json(t, &made)
	if made != (aclJSON{"topic", "logs-", "prefixed", "User:dave", "*", "create", "allow"}) {
		t.Errorf("create answered %+v", made)
	}
	desc, err := e.adm.DescribeACLs(ctx, kadm.NewACLs().Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:dave").AllowHosts().Operations(kadm.OpCreate))
	if err != nil || len(desc) != 1 || desc[0].Err != nil || len(desc[0].Described) != 1 {
		t.Fatalf("kadm describes %+v %v", desc, err)
	}
	// Enforced: dave may now create logs-app through the API.
	if res := e.as("dave", "dave-pw", "POST", "/api/v1/topics", map[string]any{"name": "logs-app", "partitions": 1}); res.code != http.StatusCreated {
		t.Errorf("dave creating logs-app: %d %s", res.code, res.body)
	}
	// Created with kadm, listed through the API with a filter.
	if _, err := e.adm.CreateACLs(ctx, kadm.NewACLs().Groups("g1").Deny("User:dave").DenyHosts().Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	var list struct{ ACLs []aclJSON }
	res = e.root("GET", "/api/v1/acls?principal=User:dave&resource_type=group", nil)
	res.json(t, &list)
	if len(list.ACLs) != 1 || list.ACLs[0] != (aclJSON{"group", "g1", "literal", "User:dave", "*", "read", "deny"}) {
		t.Fatalf("filtered list: %s", res.body)
	}
	e.root("GET", "/api/v1/acls", nil).json(t, &list)
	if len(list.ACLs) != 2 {
		t.Fatalf("all ACLs: %+v", list.ACLs)
	}
	// Delete by a filter in the body, then by one in the query.
	res = e.root("DELETE", "/api/v1/acls", map[string]any{"resource_type": "group", "principal": "User:dave"})
	var del struct{ Deleted []aclJSON }
	res.json(t, &del)
	if res.code != http.StatusOK || len(del.Deleted) != 1 || del.Deleted[0].ResourceName != "g1" {
		t.Fatalf("delete by body: %d %s", res.code, res.body)
	}
	if res := e.root("DELETE", "/api/v1/acls?resource_name=logs-&pattern=prefixed", nil); res.code != http.StatusOK || !strings.Contains(string(res.body), "logs-") {
		t.Fatalf("delete by query: %d %s", res.code, res.body)
	}
	desc, _ = e.adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny))
	if n := len(desc[0].Described); n != 0 {
		t.Errorf("kadm describes %d ACLs after the deletes", n)
	}
	for _, body := range []string{`{"resource_type":"topic","resource_name":"x","operation":"read"}`, `{"resource_type":"planet","resource_name":"x","principal":"User:a","operation":"read"}`,
		`{"resource_type":"topic","resource_name":"x","principal":"User:a","operation":"fly"}`} {
		if res := e.root("POST", "/api/v1/acls", body); res.code != http.StatusBadRequest {
			t.Errorf("create %s: %d %s", body, res.code, res.body)
		}
	}

	// Without ALTER (create, delete) or DESCRIBE (list) on the cluster:
	// refused.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/acls", ""},
		{"POST", "/api/v1/acls", `{"resource_type":"topic","resource_name":"x","principal":"User:dave","operation":"all"}`},
		{"DELETE", "/api/v1/acls", `{"principal":"User:root"}`},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		res := e.as("dave", "dave-pw", c.method, c.path, body)
		if code, _ := res.apiErr(t); res.code != http.StatusForbidden || code != "cluster_authorization_failed" {
			t.Errorf("dave %s %s: %d %s", c.method, c.path, res.code, res.body)
		}
	}
	if lines := e.logs.lines("action=acl.create", "principal=User:dave", "outcome=cluster_authorization_failed"); len(lines) != 1 {
		t.Errorf("audit of dave's refused ACL create: %q", lines)
	}
}
