package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

// keyRecorder is a KV that remembers the keys it is asked for and has
// none of them.
type keyRecorder struct {
	mu   sync.Mutex
	keys [][]byte
}

func (k *keyRecorder) Get(_ context.Context, topic string, key []byte) (engine.KVRecord, error) {
	k.mu.Lock()
	k.keys = append(k.keys, bytes.Clone(key))
	k.mu.Unlock()
	return engine.KVRecord{}, fmt.Errorf("%w: in %s", engine.ErrKVNotFound, topic)
}

func (k *keyRecorder) TopicStats(context.Context, string, bool) (engine.KVTopicStats, error) {
	return engine.KVTopicStats{}, engine.ErrKVNotIndexed
}

func (k *keyRecorder) take() [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := k.keys
	k.keys = nil
	return keys
}

// percentEncode escapes every byte but letters, digits, '-', '_' and '~',
// as README tells clients to ('.' too, so "." and ".." survive).
func percentEncode(key []byte) string {
	var b strings.Builder
	for _, c := range key {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// FuzzKVKey drives the KV routes with keys in each encoding a client may
// use and with arbitrary paths and queries: an encoded key reaches the
// engine byte for byte, and nothing makes the handler panic or answer a
// server error.
func FuzzKVKey(f *testing.F) {
	for _, s := range []struct {
		key []byte
		raw string
	}{
		{[]byte("user-42"), "user-42"},
		{[]byte("."), "%2E?key_encoding=base64url"},
		{[]byte(".."), "a/b/../c"},
		{[]byte{0, 0xff, '/', '%'}, "AP8Q?key_encoding=base64url"},
		{[]byte("a/b c?d#e"), "AP8Q==?key_encoding=base64url"},
		{nil, "%zz?key_encoding=utf8"},
		{[]byte("ключ"), "x?key_encoding=hex"},
	} {
		f.Add(s.key, s.raw)
	}
	rec := &keyRecorder{}
	mux := http.NewServeMux()
	registerKV(mux, rec, 0, nil, func(_ auth.Operation, h http.HandlerFunc) http.HandlerFunc { return h })
	// serve answers target as korvet's HTTP server would: a target that
	// does not parse as a request URI never reaches the handler.
	serve := func(t *testing.T, method, target string, body []byte) *httptest.ResponseRecorder {
		t.Helper()
		w := httptest.NewRecorder()
		u, err := url.ParseRequestURI(target)
		if err != nil {
			w.Code = http.StatusBadRequest
			return w
		}
		req := httptest.NewRequest(method, "/", bytes.NewReader(body))
		req.URL, req.RequestURI = u, target
		mux.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body)
		}
		return w
	}
	f.Fuzz(func(t *testing.T, key []byte, raw string) {
		rec.take()
		// A key encoded as README says comes through unchanged.
		want := func(target string, w *httptest.ResponseRecorder) {
			t.Helper()
			got := rec.take()
			if w.Code != http.StatusNotFound || len(got) != 1 || !bytes.Equal(got[0], key) {
				t.Fatalf("GET %s for key %q: %d %s, engine asked for %q", target, key, w.Code, w.Body, got)
			}
		}
		for _, target := range []string{
			"/v1/kv/t/" + base64.RawURLEncoding.EncodeToString(key) + "?key_encoding=base64url",
			"/v1/kv/t/" + base64.URLEncoding.EncodeToString(key) + "?key_encoding=base64url",
		} {
			want(target, serve(t, http.MethodGet, target, nil))
		}
		if len(key) > 0 {
			target := "/v1/kv/t/" + percentEncode(key)
			want(target, serve(t, http.MethodGet, target, nil))
		}
		body, _ := json.Marshal([]string{base64.RawURLEncoding.EncodeToString(key)})
		w := serve(t, http.MethodPost, "/v1/kv/t/_mget?key_encoding=base64url", body)
		if got := rec.take(); w.Code != http.StatusOK || len(got) != 1 || !bytes.Equal(got[0], key) {
			t.Fatalf("_mget of key %q: %d %s, engine asked for %q", key, w.Code, w.Body, got)
		}

		// Anything at all: an answer, never a panic or a 5xx.
		serve(t, http.MethodGet, "/v1/kv/t/"+raw, nil)
		serve(t, http.MethodHead, "/v1/kv/"+raw, nil)
		serve(t, http.MethodPost, "/v1/kv/t/_mget?"+raw, key)
		rec.take()
	})
}
