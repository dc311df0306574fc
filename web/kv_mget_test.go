package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/record"
)

// mapKV is a KV over a map that counts reads per key; a key in block
// waits for that channel before answering.
type mapKV struct {
	values map[string][]byte
	block  map[string]chan struct{}
	delay  time.Duration // each read takes that long

	mu          sync.Mutex
	reads       map[string]int
	active, top int // reads running now, and at most
}

func (m *mapKV) Get(ctx context.Context, topic string, key []byte) (engine.KVRecord, error) {
	m.mu.Lock()
	m.reads[string(key)]++
	m.active++
	m.top = max(m.top, m.active)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.active--
		m.mu.Unlock()
	}()
	if m.delay > 0 {
		time.Sleep(m.delay) // a read's latency
	}
	if ch := m.block[string(key)]; ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return engine.KVRecord{}, ctx.Err()
		}
	}
	if topic != "t" {
		return engine.KVRecord{}, fmt.Errorf("%w: %q", engine.ErrUnknownTopic, topic)
	}
	v, ok := m.values[string(key)]
	if !ok {
		return engine.KVRecord{}, fmt.Errorf("%w: %q", engine.ErrKVNotFound, key)
	}
	return engine.KVRecord{Offset: 7, Value: v, Headers: []record.Header{{Key: []byte("content-type"), Value: []byte("text/html")}}}, nil
}

func (m *mapKV) TopicStats(context.Context, string, bool) (engine.KVTopicStats, error) {
	return engine.KVTopicStats{}, nil
}

type mgetAnswer struct {
	Topic   string `json:"topic"`
	Results []struct {
		Key         string `json:"key"`
		Status      int    `json:"status"`
		Value       []byte `json:"value"`
		Reason      string `json:"reason"`
		ContentType string `json:"content_type"`
		Offset      *int64 `json:"offset"`
	} `json:"results"`
	Truncated bool `json:"truncated"`
	Next      *int `json:"next"`
}

func mgetServer(t *testing.T, kv KV, maxBytes int64) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	registerKV(mux, kv, maxBytes, nil, func(_ auth.Operation, h http.HandlerFunc) http.HandlerFunc { return h })
	srv := httptest.NewServer(withKVHeaders(mux))
	t.Cleanup(srv.Close)
	return srv
}

func postMget(t *testing.T, url string, keys []string) (mgetAnswer, *http.Response) {
	t.Helper()
	body, _ := json.Marshal(keys)
	res, err := http.Post(url+"/v1/kv/t/_mget", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var a mgetAnswer
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &a) != nil {
		t.Fatalf("_mget %q: %d %s", keys, res.StatusCode, raw)
	}
	return a, res
}

// Duplicate keys are read and answered once, at their first place; the
// value bytes of an answer stay under the cap, with "next" saying where
// to go on; a value over the cap on its own is 413 too_large; a client
// that loops on "next" gets every key.
func TestMgetDedupAndCap(t *testing.T) {
	kv := &mapKV{values: map[string][]byte{}, reads: map[string]int{}}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		kv.values[k] = bytes.Repeat([]byte(k), 100)
	}
	kv.values["huge"] = bytes.Repeat([]byte("h"), 300)
	srv := mgetServer(t, kv, 250)

	a, res := postMget(t, srv.URL, []string{"a", "b", "a", "missing", "b"})
	if len(a.Results) != 3 || a.Truncated || a.Next != nil || a.Topic != "t" ||
		a.Results[0].Key != "a" || string(a.Results[0].Value) != strings.Repeat("a", 100) ||
		a.Results[1].Key != "b" || a.Results[2].Key != "missing" || a.Results[2].Status != 404 {
		t.Fatalf("duplicates: %+v", a)
	}
	if kv.reads["a"] != 1 || kv.reads["b"] != 1 {
		t.Fatalf("reads per key %v: a key sent twice must be read once", kv.reads)
	}
	// Values are data: text/html is not passed on, not even in the JSON.
	if ct := a.Results[0].ContentType; ct != "application/octet-stream" {
		t.Fatalf("content_type %q for a text/html record", ct)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Fatalf("_mget headers %v", res.Header)
	}

	// 250 bytes: a and b fit, c does not. The "a" at index 2 was answered
	// (as index 0), so next is 3, c's index.
	a, _ = postMget(t, srv.URL, []string{"a", "b", "a", "c", "d"})
	if len(a.Results) != 2 || !a.Truncated || a.Next == nil || *a.Next != 3 {
		t.Fatalf("capped: %+v", a)
	}

	// A client loop: send, keep the results, send again from next.
	keys := []string{"a", "huge", "b", "c", "a", "d", "e", "missing"}
	got := map[string]int{}
	rounds := 0
	for rest := keys; len(rest) > 0; {
		if rounds++; rounds > len(keys) {
			t.Fatalf("no progress: %v left after %d rounds", rest, rounds)
		}
		a, _ := postMget(t, srv.URL, rest)
		var bytes int
		for _, r := range a.Results {
			got[r.Key] = r.Status
			bytes += len(r.Value)
			if r.Key == "huge" && (r.Status != http.StatusRequestEntityTooLarge || r.Reason != "too_large" || r.Value != nil) {
				t.Fatalf("a value over the cap: %+v", r)
			}
		}
		if bytes > 250 {
			t.Fatalf("an answer carries %d value bytes, over the 250 cap", bytes)
		}
		if !a.Truncated {
			break
		}
		rest = rest[*a.Next:]
	}
	want := map[string]int{"a": 200, "huge": 413, "b": 200, "c": 200, "d": 200, "e": 200, "missing": 404}
	if fmt.Sprint(got) != fmt.Sprint(want) || rounds != 3 {
		t.Fatalf("client loop: %v in %d rounds, want %v in 3", got, rounds, want)
	}

	// Errors of the whole request are not streamed answers.
	body, _ := json.Marshal([]string{"a"})
	r2, err := http.Post(srv.URL+"/v1/kv/other/_mget", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusNotFound || r2.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Fatalf("unknown topic: %d %v", r2.StatusCode, r2.Header)
	}
	if a, _ := postMget(t, srv.URL, []string{}); len(a.Results) != 0 || a.Truncated {
		t.Fatalf("no keys: %+v", a)
	}
}

// The answer is streamed: the first result reaches the client while a
// later key is still being read.
func TestMgetStreams(t *testing.T) {
	release := make(chan struct{})
	kv := &mapKV{
		values: map[string][]byte{"first": bytes.Repeat([]byte("x"), 64<<10), "later": []byte("y")},
		block:  map[string]chan struct{}{"later": release},
		reads:  map[string]int{},
	}
	srv := mgetServer(t, kv, 1<<20)
	res, err := http.Post(srv.URL+"/v1/kv/t/_mget", "application/json", strings.NewReader(`["first","later"]`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ContentLength != -1 {
		t.Fatalf("Content-Length %d: the answer was built before it was sent", res.ContentLength)
	}
	// The first result (87 KiB of base64) arrives, with a deadline, while
	// "later" is still held: the body would never come if the handler
	// waited for every key.
	first := `"key":"first","status":200,"partition":0,"offset":7,"timestamp":0,"content_type":"application/octet-stream"}`
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, len(`{"topic":"t","results":[{"value":"`)+base64.StdEncoding.EncodedLen(64<<10)+len(`",`)+len(first))
		_, err := io.ReadFull(res.Body, buf)
		if err == nil && (!bytes.HasPrefix(buf, []byte(`{"topic":"t","results":[{"value":"eHh4`)) || !bytes.HasSuffix(buf, []byte(first))) {
			err = fmt.Errorf("answer starts %q, ends %q", buf[:40], buf[len(buf)-len(first):])
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no result reached the client while a later key was being read")
	}
	close(release)
	rest, err := io.ReadAll(res.Body)
	if err != nil || !bytes.Equal(rest, []byte(`,{"value":"eQ==","key":"later","status":200,"partition":0,"offset":7,"timestamp":0,"content_type":"application/octet-stream"}],"truncated":false}`+"\n")) {
		t.Fatalf("end of the answer: %v %q", err, rest)
	}
}

// Reading ahead is bounded in bytes: with 1 MiB values at most 4 (4 MiB)
// are read ahead of the writer; with small values all 8 readers run.
func TestMgetReadAhead(t *testing.T) {
	for _, c := range []struct {
		size, most int
		least      int
	}{{1 << 20, 4, 2}, {100, mgetWorkers, mgetWorkers}} {
		kv := &mapKV{values: map[string][]byte{}, reads: map[string]int{}, delay: 20 * time.Millisecond}
		var keys []string
		for i := range 40 {
			k := fmt.Sprint("k", i)
			kv.values[k] = bytes.Repeat([]byte{'v'}, c.size)
			keys = append(keys, k)
		}
		srv := mgetServer(t, kv, 64<<20)
		a, _ := postMget(t, srv.URL, keys)
		if len(a.Results) != len(keys) || a.Truncated {
			t.Fatalf("%d-byte values: %d results, truncated %v", c.size, len(a.Results), a.Truncated)
		}
		if kv.top > c.most || kv.top < c.least {
			t.Errorf("%d-byte values: %d reads at once, want %d to %d", c.size, kv.top, c.least, c.most)
		}
		t.Logf("%d-byte values: %d reads at once", c.size, kv.top)
	}
}
