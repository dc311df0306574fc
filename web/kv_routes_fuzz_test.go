package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/web"
)

// fuzzMgetCap is the _mget cap of FuzzKVRoutes: small, so that the
// fuzzer meets truncated answers and values too large for one.
const fuzzMgetCap = 4096

// FuzzKVRoutes drives the whole HTTP handler (web.New) with any method,
// path under /v1/kv/, query and body, against a real engine on a real
// redis-server (started once per fuzzing process) with an indexed topic
// holding a few keys: no panic, only expected statuses, every answer
// marked as data (nosniff, CSP sandbox), JSON bodies that parse, _mget
// answers under the cap, and no value served with an active type.
func FuzzKVRoutes(f *testing.F) {
	n := startNodeWeb(f, engine.Options{Index: engine.IndexOptions{StaleBudget: time.Second}}, web.Options{KVMgetMaxBytes: fuzzMgetCap})
	createTopic(f, n, "kv", 2, map[string]*string{"cleanup.policy": ptr("compact")})
	createTopic(f, n, "plain", 1, nil)
	cl := n.client(kgo.DefaultProduceTopic("kv"))
	rec := func(key, value, ct string) *kgo.Record {
		r := &kgo.Record{Key: []byte(key), Value: []byte(value)}
		if ct != "" {
			r.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte(ct)}}
		}
		return r
	}
	if err := cl.ProduceSync(context.Background(),
		rec("a", "alpha", "text/plain"),
		rec("b", "beta", ""),
		rec("big", strings.Repeat("B", 3000), "application/json"),
		rec("huge", strings.Repeat("H", fuzzMgetCap+1), ""),
		rec("page", "<script>alert(1)</script>", "text/html"),
		rec("svg", "<svg onload=alert(1)>", "image/svg+xml"),
		rec("\x00\xff/%", "binary key", ""),
		rec("..", "dots", "application/x-www-form-urlencoded"),
		&kgo.Record{Key: []byte("gone"), Value: nil},
	).FirstErr(); err != nil {
		f.Fatal(err)
	}
	n.waitReady()
	h := web.New(n.eng, web.Options{Version: "fuzz", Started: time.Now(), Logger: testbed.Logger(), KVMgetMaxBytes: fuzzMgetCap})

	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"}
	many := make([]string, 1001)
	for i := range many {
		many[i] = "a"
	}
	manyBody, _ := json.Marshal(many)
	for _, s := range []struct {
		method      uint8
		path, query string
		body        []byte
	}{
		{0, "kv/a", "", nil},
		{1, "kv/page", "", nil},
		{0, "kv/svg", "", nil},
		{2, "kv/_mget", "", []byte(`["a","a","b","big","page","huge","never","b"]`)},
		{2, "kv/_mget", "", []byte(`["big","big","big","a","b"]`)},
		{2, "kv/_mget", "key_encoding=base64url", []byte(`["AP8vJQ","YQ","YQ==","!!"]`)},
		{2, "kv/_mget", "", manyBody},
		{2, "kv/_mget", "", []byte(`[1,2]`)},
		{2, "kv/_mget", "", []byte(`{"keys":["a"]}`)},
		{2, "kv/_mget", "", []byte(`[]`)},
		{2, "plain/_mget", "", []byte(`["a"]`)},
		{2, "nope/_mget", "", []byte(`["a"]`)},
		{0, "kv", "count=exact", nil},
		{0, "kv", "", nil},
		{0, "nope", "count=exact", nil},
		{0, "kv/a/../b", "", nil},
		{0, "kv/%2E%2E", "", nil},
		{0, "kv/%zz", "", nil},
		{0, "kv/x", "key_encoding=rot13", nil},
		{0, "kv/AP8vJQ", "key_encoding=base64url", nil},
		{0, "kv/gone", "", nil},
		{0, "plain/a", "", nil},
		{3, "kv/a", "", []byte("new value")},
		{4, "kv", "", nil},
		{7, "kv/a", "", nil},
		{0, "", "", nil},
		{0, "kv//a", "", nil},
	} {
		f.Add(s.method, s.path, s.query, s.body)
	}

	allowed := map[int]bool{200: true, 301: true, 304: true, 307: true, 308: true, 400: true, 404: true, 405: true, 410: true, 503: true}
	f.Fuzz(func(t *testing.T, method uint8, path, query string, body []byte) {
		m := methods[int(method)%len(methods)]
		target := "/v1/kv/" + path
		if query != "" {
			target += "?" + query
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return // korvet's HTTP server answers 400 before any handler
		}
		req := httptest.NewRequest(m, "/", bytes.NewReader(body))
		req.URL, req.RequestURI = u, target
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req = req.WithContext(ctx)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		res := w.Result()
		what := fmt.Sprintf("%s %q (%d bytes of body)", m, target, len(body))
		if !allowed[res.StatusCode] {
			t.Fatalf("%s: status %d %s", what, res.StatusCode, w.Body)
		}
		checkKVHeaders(t, what, res.Header)
		if res.StatusCode == 503 && res.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", what)
		}
		ct := res.Header.Get("Content-Type")
		if strings.HasPrefix(ct, "application/json") && m != "HEAD" && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s: %d invalid JSON %q", what, res.StatusCode, w.Body)
		}
		if res.StatusCode == 200 && ct != "application/json" {
			for _, active := range []string{"html", "xml", "script", "svg"} {
				if strings.Contains(strings.ToLower(ct), active) {
					t.Fatalf("%s: value served as %q", what, ct)
				}
			}
		}
		if m == "POST" && strings.HasSuffix(u.Path, "/_mget") && res.StatusCode == 200 {
			var a struct {
				Results []struct {
					Value []byte `json:"value"`
				} `json:"results"`
				Truncated *bool `json:"truncated"`
				Next      *int  `json:"next"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Truncated == nil || *a.Truncated != (a.Next != nil) {
				t.Fatalf("%s: _mget answer %q: %v", what, w.Body, err)
			}
			total := 0
			for _, r := range a.Results {
				total += len(r.Value)
			}
			if total > fuzzMgetCap {
				t.Fatalf("%s: _mget answer with %d value bytes, over the %d cap", what, total, fuzzMgetCap)
			}
		}
	})
}
