package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
)

// checkKVHeaders fails unless a KV answer is marked as data.
func checkKVHeaders(t testing.TB, what string, h http.Header) {
	t.Helper()
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "sandbox" {
		t.Fatalf("%s: X-Content-Type-Options %q, Content-Security-Policy %q; want nosniff and sandbox",
			what, h.Get("X-Content-Type-Options"), h.Get("Content-Security-Policy"))
	}
}

// KV values are data, not pages: every answer under /v1/kv (values,
// 304, HEAD, errors, _mget, stats, the mux's own 405 and redirects) has
// nosniff and a CSP sandbox, and a record's content-type that a browser
// would render actively is served as application/octet-stream.
func TestKVDataHeaders(t *testing.T) {
	n := startNode(t, engine.Options{})
	createTopic(t, n, "kv", 1, map[string]*string{"cleanup.policy": ptr("compact")})
	cl := n.client(kgo.DefaultProduceTopic("kv"))
	typed := func(key, ct, value string) *kgo.Record {
		return &kgo.Record{Key: []byte(key), Value: []byte(value), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte(ct)}}}
	}
	if err := cl.ProduceSync(context.Background(),
		typed("page", "text/html; charset=utf-8", "<script>alert(document.domain)</script>"),
		typed("svg", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`),
		typed("xhtml", "application/xhtml+xml", "<html/>"),
		typed("js", "text/javascript", "alert(1)"),
		typed("multi", "multipart/x-mixed-replace; boundary=b", "--b"),
		typed("json", "application/json; charset=utf-8", `{"a":1}`),
		typed("png", "image/png", "\x89PNG"),
		&kgo.Record{Key: []byte("plain"), Value: []byte("<b>hi</b>")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, hdr http.Header, body string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, n.http.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		checkKVHeaders(t, method+" "+path, res.Header)
		return res.StatusCode, res.Header, b
	}

	for key, want := range map[string]string{
		"page": "application/octet-stream", "svg": "application/octet-stream", "xhtml": "application/octet-stream",
		"js": "application/octet-stream", "multi": "application/octet-stream", "plain": "application/octet-stream",
		"json": "application/json; charset=utf-8", "png": "image/png",
	} {
		code, h, _ := do("GET", "/v1/kv/kv/"+key, nil, "")
		if code != 200 || h.Get("Content-Type") != want {
			t.Errorf("GET %s: %d Content-Type %q, want 200 %q", key, code, h.Get("Content-Type"), want)
		}
		if code, h, _ := do("HEAD", "/v1/kv/kv/"+key, nil, ""); code != 200 || h.Get("Content-Type") != want {
			t.Errorf("HEAD %s: %d Content-Type %q, want 200 %q", key, code, h.Get("Content-Type"), want)
		}
		if code, _, _ := do("GET", "/v1/kv/kv/"+key, http.Header{"If-None-Match": {h.Get("ETag")}}, ""); code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", key, code)
		}
	}
	code, _, body := do("POST", "/v1/kv/kv/_mget", nil, `["page","json","never","page"]`)
	var mg struct {
		Results []struct {
			Key         string `json:"key"`
			ContentType string `json:"content_type"`
		} `json:"results"`
	}
	if code != 200 || json.Unmarshal(body, &mg) != nil || len(mg.Results) != 3 ||
		mg.Results[0].ContentType != "application/octet-stream" || mg.Results[1].ContentType != "application/json; charset=utf-8" {
		t.Errorf("_mget: %d %s", code, body)
	}
	// Every other answer under /v1/kv, whoever writes it.
	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"GET", "/v1/kv/kv/never", "", 404},
		{"GET", "/v1/kv/nope/x", "", 404},
		{"GET", "/v1/kv/kv/x?key_encoding=rot13", "", 400},
		{"POST", "/v1/kv/kv/_mget", "{", 400},
		{"POST", "/v1/kv/nope/_mget", `["x"]`, 404},
		{"GET", "/v1/kv/kv", "", 200},
		{"GET", "/v1/kv/kv?count=exact", "", 200},
		{"GET", "/v1/kv/nope", "", 404},
		{"PUT", "/v1/kv/kv/x", "v", 405},
		{"DELETE", "/v1/kv/kv", "", 405},
		{"GET", "/v1/kv/kv/a/../page", "", 307}, // the mux redirects to the cleaned path
		{"GET", "/v1/kv", "", 404},
		{"GET", "/v1/kv/", "", 404},
	} {
		if code, _, b := do(c.method, c.path, nil, c.body); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, b, c.code)
		}
	}
	// The status page keeps its own policy: the sandbox is for data only.
	res, err := http.Get(n.http.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); res.StatusCode != 200 || strings.Contains(csp, "sandbox") || !bytes.Contains([]byte(csp), []byte("default-src 'self'")) {
		t.Errorf("status page: %d CSP %q", res.StatusCode, csp)
	}
}
