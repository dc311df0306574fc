package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// principal is one row of the access matrix: how it logs in over HTTP
// and over Kafka.
type principal struct {
	name, user, password string // user "" is anonymous
}

func (p principal) do(t *testing.T, method, url, body string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if p.user != "" {
		req.SetBasicAuth(p.user, p.password)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", method, url, p.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// jsonNames returns the field members of a JSON array.
func jsonNames(t *testing.T, b []byte, field string) []string {
	t.Helper()
	var items []map[string]any
	if err := json.Unmarshal(b, &items); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprint(it[field]))
	}
	slices.Sort(out)
	return out
}

// kafkaView is what a principal sees of the same things over Kafka:
// topics listed by Metadata, whether it may read each topic, and the
// groups it may describe.
func kafkaView(t *testing.T, ctx context.Context, addr string, p principal, topics []string) (listed []string, readable []string, groups []string) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}
	if p.user != "" {
		opts = append(opts, kgo.SASL(scram.Auth{User: p.user, Pass: p.password}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("%s: list topics: %v", p.name, err)
	}
	listed = md.Names()
	slices.Sort(listed)
	for _, topic := range topics {
		// A fetch needs READ. Current fetches name topics by id, which a
		// principal learns only for topics it may describe.
		td, ok := md[topic]
		if !ok {
			continue
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 100, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: fetch %s: %v", p.name, topic, err)
		}
		switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
		case 0:
			readable = append(readable, topic)
		case kerr.TopicAuthorizationFailed.Code:
		default:
			t.Fatalf("%s: fetch %s: %v", p.name, topic, kerr.ErrorForCode(code))
		}
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("%s: list groups: %v", p.name, err)
	}
	groups = lg.Groups()
	slices.Sort(groups)
	return listed, readable, groups
}

// TestHTTPAccessMatrix runs korvet with SASL, ACLs and HTTP Basic on, and
// checks every HTTP route for an anonymous client, a user without ACLs, a
// user with READ on one topic and a super user, against what the same
// principal sees over Kafka.
func TestHTTPAccessMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	pwFile := filepath.Join(t.TempDir(), "admin.password")
	if err := os.WriteFile(pwFile, []byte("root-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := testbed.StartRedis(t)
	p := startKorvetWith(t, r, func(kafkaAddr, httpAddr string) string {
		return fmt.Sprintf(`admin_user = "root"
admin_password_file = %q
[kafka]
listen = %q
auth = "sasl"
acls = true
[http]
listen = %q
auth = "basic"
[cold]
archive_interval = "200ms"
`, pwFile, kafkaAddr, httpAddr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	root := principal{"super user", "root", "root-secret-1"}
	alice := principal{"READ on ledger", "alice", "alice-pw-123"}
	bob := principal{"no ACLs", "bob", "bob-pw-456"}
	anon := principal{name: "anonymous"}

	// root exists from admin_password_file; it creates the rest over Kafka.
	rootCl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.SASL(scram.Auth{User: "root", Pass: "root-secret-1"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer rootCl.Close()
	adm := kadm.NewClient(rootCl)
	for _, u := range []principal{alice, bob} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u.user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: u.password}})
		if err != nil || res.Error() != nil {
			t.Fatalf("create %s: %v %v", u.user, err, res.Error())
		}
	}
	tiered := map[string]*string{"korvet.index.enable": ptr("true"), "remote.storage.enable": ptr("true"), "segment.bytes": ptr("4000"), "retention.ms": ptr("-1")}
	for _, topic := range []string{"ledger", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, tiered, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		// One append at a time: a segment is sealed by the append that
		// finds it full.
		for i := range 30 {
			rec := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-value-%d-%s", topic, i, strings.Repeat("x", 400))}
			if err := rootCl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", topic, err)
			}
		}
	}
	acl := kadm.NewACLs().Topics("ledger").Groups("g-ledger").Allow("User:alice").Operations(kadm.OpRead)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	for _, g := range []string{"g-ledger", "g-secret"} {
		topic := strings.TrimPrefix(g, "g-")
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, g, offs); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, resp.Error())
		}
	}
	// Wait until both topics have an Iceberg table, so that the catalog's
	// listing has something to hide.
	base := p.httpBase
	for deadline := time.Now().Add(60 * time.Second); ; {
		code, b, _ := root.do(t, "GET", base+"/iceberg/v1/namespaces/korvet/tables", "")
		if code == http.StatusOK && strings.Contains(string(b), `"ledger"`) && strings.Contains(string(b), `"secret"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tables not archived within 60s: %d %s", code, b)
		}
		time.Sleep(200 * time.Millisecond)
	}

	type want struct {
		topics, readable, groups []string
		metrics, admin           int
	}
	wants := map[string]want{
		root.name:  {[]string{"ledger", "secret"}, []string{"ledger", "secret"}, []string{"g-ledger", "g-secret"}, 200, 202},
		alice.name: {[]string{"ledger"}, []string{"ledger"}, []string{"g-ledger"}, 403, 403},
		bob.name:   {nil, nil, nil, 403, 403},
	}
	for _, pr := range []principal{root, alice, bob} {
		w := wants[pr.name]
		t.Run(pr.user, func(t *testing.T) {
			// Kafka first: HTTP must agree with it.
			listed, readable, groups := kafkaView(t, ctx, p.kafkaAddr, pr, []string{"ledger", "secret"})
			if !slices.Equal(listed, w.topics) || !slices.Equal(readable, w.readable) || !slices.Equal(groups, w.groups) {
				t.Fatalf("over Kafka: topics %v readable %v groups %v; want %v %v %v", listed, readable, groups, w.topics, w.readable, w.groups)
			}
			code, b, _ := pr.do(t, "GET", base+"/api/v1/topics", "")
			if got := jsonNames(t, b, "name"); code != 200 || !slices.Equal(got, listed) {
				t.Errorf("/api/v1/topics: %d %v; Kafka lists %v", code, got, listed)
			}
			code, b, _ = pr.do(t, "GET", base+"/api/v1/groups", "")
			if got := jsonNames(t, b, "group"); code != 200 || !slices.Equal(got, groups) {
				t.Errorf("/api/v1/groups: %d %v; Kafka lists %v", code, got, groups)
			}
			code, b, _ = pr.do(t, "GET", base+"/api/v1/status", "")
			var st struct {
				Totals struct{ Topics int } `json:"totals"`
			}
			if err := json.Unmarshal(b, &st); code != 200 || err != nil || st.Totals.Topics != len(listed) {
				t.Errorf("/api/v1/status: %d topics %d; want %d (%v)", code, st.Totals.Topics, len(listed), err)
			}
			for _, path := range []string{"/", "/static/app.js", "/healthz", "/readyz"} {
				if code, _, _ := pr.do(t, "GET", base+path, ""); code != 200 {
					t.Errorf("GET %s: %d", path, code)
				}
			}
			var tables struct {
				Identifiers []struct{ Name string } `json:"identifiers"`
			}
			code, b, _ = pr.do(t, "GET", base+"/iceberg/v1/namespaces/korvet/tables", "")
			if err := json.Unmarshal(b, &tables); code != 200 || err != nil {
				t.Fatalf("iceberg tables: %d %s", code, b)
			}
			var tnames []string
			for _, id := range tables.Identifiers {
				tnames = append(tnames, id.Name)
			}
			slices.Sort(tnames)
			if !slices.Equal(tnames, readable) {
				t.Errorf("iceberg tables %v; Kafka may read %v", tnames, readable)
			}
			for _, topic := range []string{"ledger", "secret"} {
				may := slices.Contains(readable, topic)
				ok, denied := http.StatusOK, http.StatusForbidden
				expect := func(what string, code int, hd http.Header) {
					t.Helper()
					if want := map[bool]int{true: ok, false: denied}[may]; code != want {
						t.Errorf("%s %s: %d, want %d", what, topic, code, want)
					}
					if hd.Get("X-Content-Type-Options") != "nosniff" {
						t.Errorf("%s %s: no nosniff header", what, topic)
					}
				}
				code, b, hd := pr.do(t, "GET", base+"/v1/kv/"+topic+"/k3", "")
				expect("KV GET", code, hd)
				if may && !strings.HasPrefix(string(b), topic+"-value-3-") {
					t.Errorf("KV GET %s: %.40q", topic, b)
				}
				if !may && strings.Contains(string(b), "value") {
					t.Errorf("KV GET %s refused but leaks %.60q", topic, b)
				}
				code, _, hd = pr.do(t, "HEAD", base+"/v1/kv/"+topic+"/k3", "")
				expect("KV HEAD", code, hd)
				code, b, hd = pr.do(t, "POST", base+"/v1/kv/"+topic+"/_mget", `["k1","k2"]`, "Content-Type", "application/json")
				expect("KV _mget", code, hd)
				if !may && strings.Contains(string(b), "value") {
					t.Errorf("_mget %s refused but leaks %.60q", topic, b)
				}
				code, _, hd = pr.do(t, "GET", base+"/v1/kv/"+topic, "")
				expect("KV stats", code, hd)
				code, _, _ = pr.do(t, "GET", base+"/iceberg/v1/namespaces/korvet/tables/"+topic, "")
				if want := map[bool]int{true: ok, false: denied}[may]; code != want {
					t.Errorf("iceberg table %s: %d, want %d", topic, code, want)
				}
			}
			if code, _, _ := pr.do(t, "GET", base+"/metrics", ""); code != w.metrics {
				t.Errorf("/metrics: %d, want %d", code, w.metrics)
			}
			if code, b, _ := pr.do(t, "POST", base+"/api/v1/index/rebuild", ""); code != w.admin && !(w.admin == 202 && code == 409) {
				t.Errorf("index rebuild: %d %s, want %d", code, b, w.admin)
			}
		})
	}

	t.Run("browser", func(t *testing.T) {
		// Without a login the page loads its log-in form, and no data.
		chromium := findChromium(t)
		if dom := runChromium(t, chromium, "--dump-dom", base+"/"); strings.Contains(dom, `data-state="ready"`) || !strings.Contains(dom, `data-state="login"`) ||
			strings.Contains(dom, `data-topic="ledger"`) {
			t.Errorf("the page without a login: want its log-in form and no topics; DOM:\n%s", dom)
		}
		// Logged in as alice with the page's form, it shows the topic and
		// group she may see, not the others.
		b := newBrowser(t, ctx, chromium)
		b.do("open the page", chromedp.Navigate(base+"/"))
		b.waitJS("the log-in form", `!document.getElementById("login").hidden`)
		b.do("log in as alice",
			chromedp.SendKeys(chromedp.ID("login-user"), alice.user),
			chromedp.SendKeys(chromedp.ID("login-password"), alice.password),
			chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)))
		b.waitJS("the page as alice", `document.body.dataset.state === "ready" && document.getElementById("viewer").textContent === "alice" &&
			document.querySelector('#topics-body tr[data-topic="ledger"]') !== null && document.querySelector('#groups-body tr[data-group="g-ledger"]') !== null`)
		if b.evalBool(`document.querySelector('[data-topic="secret"], [data-group="g-secret"]') !== null`) {
			t.Error("the page shows secret or g-secret to alice")
		}
		// Her refusals hide the Users and ACLs panels.
		if b.evalBool(`!document.getElementById("users").hidden || !document.getElementById("acls").hidden`) {
			t.Error("alice sees the Users or ACLs panel")
		}
		b.shot(artifactDir(t), "status-page-login.png", 1280, 900, "")
		b.checkConsole()
	})

	t.Run("anonymous", func(t *testing.T) {
		for _, route := range [][2]string{{"POST", "/"}, {"GET", "/api/v1/status"}, {"GET", "/api/v1/topics"}, {"GET", "/api/v1/groups"},
			{"GET", "/metrics"}, {"GET", "/v1/kv/ledger/k1"}, {"HEAD", "/v1/kv/ledger/k1"}, {"POST", "/v1/kv/ledger/_mget"}, {"GET", "/v1/kv/ledger"},
			{"GET", "/iceberg/v1/namespaces/korvet/tables"}, {"POST", "/api/v1/index/rebuild"}} {
			code, b, hd := anon.do(t, route[0], base+route[1], "")
			if code != http.StatusUnauthorized || !strings.HasPrefix(hd.Get("WWW-Authenticate"), "Basic") || strings.Contains(string(b), "value") {
				t.Errorf("%s %s anonymous: %d %q %.80q; want 401 with a Basic challenge", route[0], route[1], code, hd.Get("WWW-Authenticate"), b)
			}
		}
		// The page's own files hold no data: they load so that it can
		// show its log-in form.
		for _, path := range []string{"/healthz", "/readyz", "/", "/static/app.js"} {
			if code, b, _ := anon.do(t, "GET", base+path, ""); code != 200 || strings.Contains(string(b), "ledger") {
				t.Errorf("%s anonymous: %d, want 200 without data", path, code)
			}
		}
		wrong := principal{"wrong password", "alice", "nope"}
		if code, _, _ := wrong.do(t, "GET", base+"/api/v1/topics", ""); code != http.StatusUnauthorized {
			t.Errorf("wrong password: %d, want 401", code)
		}
		// A page of another site posting with the browser's cached login.
		if code, _, _ := root.do(t, "POST", base+"/api/v1/index/rebuild", "", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
			t.Errorf("cross-site POST: %d, want 403", code)
		}
	})
}

// TestHTTPAnonymousLoopback: with auth = "none" on loopback and ACLs on,
// anonymous HTTP requests are User:ANONYMOUS, as plain Kafka connections
// are, see what the ACLs grant it there, and must name korvet in Host (no
// DNS rebinding).
func TestHTTPAnonymousLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pwFile := filepath.Join(t.TempDir(), "admin.password")
	if err := os.WriteFile(pwFile, []byte("root-secret-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := testbed.StartRedis(t)
	// The listener has no SASL, so every Kafka client is anonymous: its
	// ACLs go into Redis before korvet starts.
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(ctx, rc, auth.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	allow := func(rt auth.ResourceType, name string, op auth.Operation) auth.ACL {
		return auth.ACL{Principal: auth.Anonymous, Host: "*", ResourceType: rt, Pattern: auth.PatternLiteral, Resource: name, Operation: op, Permission: auth.PermAllow}
	}
	if err := store.CreateACLs(ctx, []auth.ACL{
		allow(auth.ResCluster, auth.ClusterName, auth.OpCreate),
		allow(auth.ResTopic, "public", auth.OpRead), allow(auth.ResTopic, "public", auth.OpWrite),
		allow(auth.ResGroup, "g-public", auth.OpRead),
	}); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	p := startKorvetWith(t, r, func(kafkaAddr, httpAddr string) string {
		return fmt.Sprintf(`admin_user = "root"
admin_password_file = %q
[kafka]
listen = %q
acls = true
[http]
listen = %q
hosts = ["korvet.lan"]
`, pwFile, kafkaAddr, httpAddr)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"public", "private"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"korvet.index.enable": ptr("true")}, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "public", Key: []byte("k1"), Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "public", Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "g-public", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	anon := principal{name: "anonymous"}
	root := principal{"super user", "root", "root-secret-2"}
	listed, readable, groups := kafkaView(t, ctx, p.kafkaAddr, anon, []string{"public", "private"})
	if !slices.Equal(listed, []string{"public"}) || !slices.Equal(readable, []string{"public"}) || !slices.Equal(groups, []string{"g-public"}) {
		t.Fatalf("over Kafka: topics %v readable %v groups %v", listed, readable, groups)
	}
	code, b, _ := anon.do(t, "GET", p.httpBase+"/api/v1/topics", "")
	if got := jsonNames(t, b, "name"); code != 200 || !slices.Equal(got, listed) {
		t.Errorf("/api/v1/topics: %d %v; Kafka lists %v", code, got, listed)
	}
	code, b, _ = anon.do(t, "GET", p.httpBase+"/api/v1/groups", "")
	if got := jsonNames(t, b, "group"); code != 200 || !slices.Equal(got, groups) {
		t.Errorf("/api/v1/groups: %d %v; Kafka lists %v", code, got, groups)
	}
	if code, b, _ := anon.do(t, "GET", p.httpBase+"/v1/kv/public/k1", ""); code != 200 || string(b) != "hello" {
		t.Errorf("KV public: %d %q", code, b)
	}
	if code, _, _ := anon.do(t, "GET", p.httpBase+"/v1/kv/private/k1", ""); code != http.StatusForbidden {
		t.Errorf("KV private: %d, want 403", code)
	}
	if code, _, _ := anon.do(t, "GET", p.httpBase+"/metrics", ""); code != http.StatusForbidden {
		t.Errorf("anonymous /metrics with ACLs on: %d, want 403", code)
	}
	if code, _, _ := anon.do(t, "POST", p.httpBase+"/api/v1/index/rebuild", ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous index rebuild: %d, want 401", code)
	}
	// A super user's Basic login works in this mode too.
	if code, _, _ := root.do(t, "GET", p.httpBase+"/metrics", ""); code != 200 {
		t.Errorf("root /metrics: %d", code)
	}
	port := p.httpBase[strings.LastIndex(p.httpBase, ":"):]
	for host, want := range map[string]int{
		"127.0.0.1" + port:    200,
		"localhost" + port:    200,
		"korvet.lan" + port:   200,
		"KORVET.LAN":          200,
		"evil.example" + port: http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io":    http.StatusMisdirectedRequest,
	} {
		if code, b, _ := anon.do(t, "GET", p.httpBase+"/api/v1/status", "", "Host", host); code != want {
			t.Errorf("Host %s: %d %s, want %d", host, code, b, want)
		}
	}
	// A logged-in request is not a rebinding victim: any Host.
	if code, _, _ := root.do(t, "GET", p.httpBase+"/api/v1/status", "", "Host", "evil.example"); code != 200 {
		t.Errorf("root with a foreign Host: %d, want 200", code)
	}
}
