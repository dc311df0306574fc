package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/registry"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// fixedPasswords logs in the users of its map.
type fixedPasswords map[string]string

func (p fixedPasswords) CheckPassword(_ context.Context, user, password string) error {
	if pw, ok := p[user]; ok && pw == password {
		return nil
	}
	return errors.New("bad login")
}

// /api/v1/schemas lists the subjects a principal may READ (T-key and
// T-value by topic T, others by their own name), and /metrics counts all
// of them.
func TestAPISchemas(t *testing.T) {
	ctx := context.Background()
	r := testbed.StartRedis(t)
	eng, rc := enginetest.Open(t, r, engine.Options{Logger: quiet, GroupInitialRebalanceDelay: -1})
	reg, err := registry.Open(ctx, rc, registry.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(ctx, rc, auth.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	read := func(topic string) auth.ACL {
		return auth.ACL{Principal: "User:alice", Host: "*", ResourceType: auth.ResTopic, Pattern: auth.PatternLiteral, Resource: topic, Operation: auth.OpRead, Permission: auth.PermAllow}
	}
	if err := store.CreateACLs(ctx, []auth.ACL{read("orders"), read("shared-types")}); err != nil {
		t.Fatal(err)
	}
	opts := Options{Version: "v1", Logger: quiet, Registry: reg, Login: LoginBasic,
		Passwords: fixedPasswords{"alice": "alice-pw", "root": "root-pw"},
		Policy:    &auth.Policy{Store: store, ACLs: true, SuperUsers: []string{"User:root"}}}
	h, rh := New(eng, opts), NewRegistry(reg, opts)

	for _, subject := range []string{"orders-value", "orders-key", "payments-value", "shared-types", "orders"} {
		body := `{"schema":"{\"type\":\"record\",\"name\":\"R` + strings.ReplaceAll(subject, "-", "_") + `\",\"fields\":[{\"name\":\"a\",\"type\":\"long\"}]}"}`
		req := httptest.NewRequest(http.MethodPost, "/subjects/"+subject+"/versions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		req.SetBasicAuth("root", "root-pw")
		w := httptest.NewRecorder()
		rh.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("register %s: %d %s", subject, w.Code, w.Body)
		}
	}

	list := func(user, pw string) []string {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/schemas", nil)
		req.SetBasicAuth(user, pw)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /api/v1/schemas as %s: %d %s", user, w.Code, w.Body)
		}
		var got []registry.SubjectInfo
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("GET /api/v1/schemas: %v in %s", err, w.Body)
		}
		names := []string{}
		for _, s := range got {
			names = append(names, s.Subject)
			if len(s.Versions) != 1 || s.LatestVersion != 1 || s.LatestID <= 0 || s.Format != "AVRO" || s.Level != "BACKWARD" || s.LevelOwn || s.Mode != "READWRITE" {
				t.Errorf("subject %+v; want one Avro version, BACKWARD (global), READWRITE", s)
			}
		}
		return names
	}
	if got, want := strings.Join(list("root", "root-pw"), ","), "orders,orders-key,orders-value,payments-value,shared-types"; got != want {
		t.Errorf("super user sees %s, want %s", got, want)
	}
	// orders-key and orders-value follow topic orders, shared-types is
	// its own topic; payments-value is payments'.
	if got, want := strings.Join(list("alice", "alice-pw"), ","), "orders,orders-key,orders-value,shared-types"; got != want {
		t.Errorf("alice sees %s, want %s", got, want)
	}

	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.SetBasicAuth("root", "root-pw")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	for _, want := range []string{"korvet_schema_subjects 5\n", "korvet_schema_versions 5\n"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}

	// Without a registry the list is empty and the gauges absent.
	bare := New(eng, Options{Version: "v1", Logger: quiet})
	var none []registry.SubjectInfo
	get(t, bare, "/api/v1/schemas", &none)
	if len(none) != 0 {
		t.Errorf("no registry: %+v", none)
	}
	if w := get(t, bare, "/metrics", nil); strings.Contains(w.Body.String(), "korvet_schema_subjects") {
		t.Error("no registry, yet /metrics has korvet_schema_subjects")
	}
}
