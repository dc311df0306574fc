package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/resp"
	"github.com/korvet/korvet/web"
)

// node is a whole korvet in the test process: engine with a key index,
// Kafka server and HTTP handler, on a real redis-server. restart brings
// it back on the same Redis and index directory.
type node struct {
	t     testing.TB
	redis *testbed.Redis
	dir   string
	opts  engine.Options
	wopts web.Options // Version, Started and Logger are set by start

	rc     *resp.Client
	eng    *engine.Engine
	kafka  string
	http   *httptest.Server
	cancel context.CancelFunc
	done   chan error
}

func startNode(t testing.TB, opts engine.Options) *node {
	t.Helper()
	return startNodeWeb(t, opts, web.Options{})
}

// startNodeWeb is startNode with options for the HTTP handler.
func startNodeWeb(t testing.TB, opts engine.Options, wopts web.Options) *node {
	t.Helper()
	n := &node{t: t, redis: testbed.StartRedis(t), dir: t.TempDir(), opts: opts, wopts: wopts}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *node) start() {
	n.t.Helper()
	opts := n.opts
	opts.Logger = testbed.Logger()
	opts.Index.Dir = n.dir
	opts.GroupInitialRebalanceDelay = -1
	eng, rc := enginetest.Open(n.t, n.redis, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := kafkawire.NewServer(eng, kafkawire.Options{AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(port), Logger: opts.Logger, MaxRequestBytes: 8 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	n.rc, n.eng, n.kafka, n.cancel, n.done = rc, eng, ln.Addr().String(), cancel, done
	wopts := n.wopts
	wopts.Version, wopts.Started, wopts.Logger = "test", time.Now(), opts.Logger
	n.http = httptest.NewServer(web.New(eng, wopts))
}

func (n *node) stop() {
	if n.eng == nil {
		return
	}
	n.http.Close()
	n.cancel()
	<-n.done
	n.eng.Close()
	n.rc.Close()
	n.eng = nil
}

func (n *node) restart() {
	n.t.Helper()
	n.stop()
	n.start()
}

func (n *node) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.kafka)}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

// waitReady waits until the index has caught up after a start.
func (n *node) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !n.eng.KV().Ready() {
		if time.Now().After(deadline) {
			n.t.Fatalf("index did not catch up: %+v", n.eng.KV().Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type reply struct {
	code int
	hdr  http.Header
	body []byte
}

func (n *node) do(method, path string, hdr map[string]string, body []byte) reply {
	n.t.Helper()
	req, err := http.NewRequest(method, n.http.URL+path, bytes.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	return reply{res.StatusCode, res.Header, b}
}

func (n *node) getKey(topic, key string) reply {
	return n.do("GET", "/v1/kv/"+topic+"/"+escapeKey(key), nil, nil)
}

// escapeKey percent-encodes a key for the path; dot segments too, which
// HTTP clients and servers would otherwise resolve away.
func escapeKey(k string) string {
	if k == "." || k == ".." {
		return strings.Repeat("%2E", len(k))
	}
	return url.PathEscape(k)
}

func createTopic(t testing.TB, n *node, name string, parts int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(n.client())
	res, err := adm.CreateTopics(context.Background(), parts, 1, configs, name)
	if err != nil || res[name].Err != nil {
		t.Fatalf("create %s: %v %v", name, err, res[name].Err)
	}
}

func ptr(s string) *string { return &s }

// The compaction contract, end to end: thousands of overwrites over 100
// keys produced with franz-go, tombstones among them, compactions forced
// and korvet restarted between rounds; then every key and every tombstone
// is checked over HTTP, and a consumer reads the compacted log through its
// gaps to the end with each key's latest value last.
func TestKVCompactionContract(t *testing.T) {
	n := startNode(t, engine.Options{})
	const topic, keys = "contract", 100
	createTopic(t, n, topic, 3, map[string]*string{
		"cleanup.policy": ptr("compact"), "delete.retention.ms": ptr("0"), "min.compaction.lag.ms": ptr("0"),
	})
	latest := map[string]*string{} // nil: tombstone
	ctx := context.Background()
	for round := range 4 {
		cl := n.client(kgo.DefaultProduceTopic(topic))
		var batch []*kgo.Record
		for i := range 1500 {
			k := fmt.Sprintf("key-%03d", (i*7+round*13)%keys)
			r := &kgo.Record{Key: []byte(k), Value: []byte(fmt.Sprintf("round %d write %d", round, i))}
			if (i+round)%11 == 0 {
				r.Value = nil
				latest[k] = nil
			} else {
				v := string(r.Value)
				latest[k] = &v
			}
			batch = append(batch, r)
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("round %d produce: %v", round, err)
		}
		cl.Close()
		check := func(when string) {
			t.Helper()
			for k, want := range latest {
				got := n.getKey(topic, k)
				switch {
				case want == nil && got.code != http.StatusNotFound:
					t.Fatalf("round %d %s: tombstoned %s: %d %s", round, when, k, got.code, got.body)
				case want != nil && (got.code != http.StatusOK || string(got.body) != *want):
					t.Fatalf("round %d %s: %s: %d %q, want %q", round, when, k, got.code, got.body, *want)
				}
			}
		}
		check("after produce")
		res, err := n.eng.CompactTopic(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 && res.Deleted == 0 {
			t.Fatalf("round %d: compaction deleted nothing: %+v", round, res)
		}
		check("after compaction")
		n.restart()
		n.waitReady()
		check("after restart")
	}

	// A consumer from the start reads only the survivors, through the
	// gaps, up to the high watermark.
	cl := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	adm := kadm.NewClient(n.client())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	seen := map[string]*kgo.Record{}
	count := 0
	reached := map[int32]bool{}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(reached) < len(want) {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consumer stuck: reached %v of %v after %d records", reached, want, count)
		}
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			count++
			if prev := seen[string(r.Key)]; prev != nil && prev.Partition == r.Partition {
				t.Errorf("key %s appears twice after compaction (offsets %d and %d)", r.Key, prev.Offset, r.Offset)
			}
			seen[string(r.Key)] = r
			if r.Offset+1 >= want[r.Partition] {
				reached[r.Partition] = true
			}
		})
	}
	for k, v := range latest {
		r := seen[k]
		switch {
		case v == nil && r != nil && r.Value != nil:
			t.Errorf("consumer: tombstoned %s has value %q", k, r.Value)
		case v != nil && (r == nil || string(r.Value) != *v):
			t.Errorf("consumer: %s = %v, want %q", k, r, *v)
		}
	}
	if count > keys+3 {
		t.Errorf("consumer read %d records from a compacted topic of %d keys", count, keys)
	}
}

// The HTTP surface: odd and binary keys, HEAD, ETag, Content-Type,
// _mget, stats and the error statuses with their JSON bodies.
func TestKVHTTP(t *testing.T) {
	n := startNode(t, engine.Options{RetentionInterval: 50 * time.Millisecond, Index: engine.IndexOptions{StaleBudget: 300 * time.Millisecond}})
	ctx := context.Background()
	createTopic(t, n, "kv", 2, map[string]*string{"cleanup.policy": ptr("compact")})
	createTopic(t, n, "plain", 1, nil)
	cl := n.client(kgo.DefaultProduceTopic("kv"))
	odd := []string{"a/b/c", "ü€ 𝄞", "", "100%", "..", "?x=1#y", "line\nbreak"}
	var recs []*kgo.Record
	for i, k := range odd {
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte("odd " + strconv.Itoa(i))})
	}
	binKey := []byte{0, 0xff, 0x10, '/', 0x80}
	recs = append(recs,
		&kgo.Record{Key: binKey, Value: []byte{1, 2, 3}},
		&kgo.Record{Key: []byte("doc"), Value: []byte(`{"name":"Ada"}`), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}},
		&kgo.Record{Key: []byte("gone-soon"), Value: []byte("x")},
		&kgo.Record{Key: []byte("gone-soon"), Value: nil},
	)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i, k := range odd {
		if got := n.getKey("kv", k); got.code != 200 || string(got.body) != "odd "+strconv.Itoa(i) {
			t.Fatalf("key %q: %d %s", k, got.code, got.body)
		}
	}
	b64 := base64.RawURLEncoding.EncodeToString(binKey)
	got := n.do("GET", "/v1/kv/kv/"+b64+"?key_encoding=base64url", nil, nil)
	if got.code != 200 || !bytes.Equal(got.body, []byte{1, 2, 3}) || got.hdr.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("binary key: %d %v %q", got.code, got.hdr, got.body)
	}
	doc := n.getKey("kv", "doc")
	if doc.code != 200 || doc.hdr.Get("Content-Type") != "application/json" || doc.hdr.Get("ETag") == "" ||
		doc.hdr.Get("X-Korvet-Partition") == "" || doc.hdr.Get("X-Korvet-Offset") == "" || doc.hdr.Get("X-Korvet-Timestamp") == "" {
		t.Fatalf("doc: %d %v", doc.code, doc.hdr)
	}
	if ts, _ := strconv.ParseInt(doc.hdr.Get("X-Korvet-Timestamp"), 10, 64); time.Since(time.UnixMilli(ts)) > time.Minute {
		t.Fatalf("timestamp header %s", doc.hdr.Get("X-Korvet-Timestamp"))
	}
	head := n.do("HEAD", "/v1/kv/kv/doc", nil, nil)
	if head.code != 200 || len(head.body) != 0 || head.hdr.Get("Content-Length") != strconv.Itoa(len(`{"name":"Ada"}`)) {
		t.Fatalf("HEAD: %d %v %q", head.code, head.hdr, head.body)
	}
	if nm := n.do("GET", "/v1/kv/kv/doc", map[string]string{"If-None-Match": doc.hdr.Get("ETag")}, nil); nm.code != http.StatusNotModified || len(nm.body) != 0 {
		t.Fatalf("If-None-Match: %d %q", nm.code, nm.body)
	}
	// A new value is a new ETag.
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("doc"), Value: []byte(`{"name":"Grace"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if nm := n.do("GET", "/v1/kv/kv/doc", map[string]string{"If-None-Match": doc.hdr.Get("ETag")}, nil); nm.code != 200 || string(nm.body) != `{"name":"Grace"}` {
		t.Fatalf("after overwrite: %d %q", nm.code, nm.body)
	}

	errCase := func(path string, code int, reason string) {
		t.Helper()
		r := n.do("GET", path, nil, nil)
		var body map[string]string
		if r.code != code || json.Unmarshal(r.body, &body) != nil || body["reason"] != reason || body["error"] == "" || r.hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s, want %d %s", path, r.code, r.body, code, reason)
		}
	}
	errCase("/v1/kv/kv/never", 404, "key_not_found")
	errCase("/v1/kv/kv/gone-soon", 404, "key_not_found")
	errCase("/v1/kv/plain/x", 404, "topic_not_indexed")
	errCase("/v1/kv/nope/x", 404, "topic_not_found")
	errCase("/v1/kv/kv/x?key_encoding=rot13", 400, "bad_key")

	// _mget: found, missing and binary keys in one request.
	body, _ := json.Marshal([]string{"doc", "never", "a/b/c"})
	mg := n.do("POST", "/v1/kv/kv/_mget", nil, body)
	var mres struct {
		Results []struct {
			Key, Reason string
			Status      int
			Value       []byte
		}
	}
	if mg.code != 200 || json.Unmarshal(mg.body, &mres) != nil || len(mres.Results) != 3 ||
		mres.Results[0].Status != 200 || string(mres.Results[0].Value) != `{"name":"Grace"}` ||
		mres.Results[1].Status != 404 || mres.Results[2].Status != 200 || string(mres.Results[2].Value) != "odd 0" {
		t.Fatalf("_mget: %d %s", mg.code, mg.body)
	}
	body, _ = json.Marshal([]string{b64})
	if mg := n.do("POST", "/v1/kv/kv/_mget?key_encoding=base64url", nil, body); mg.code != 200 || !strings.Contains(string(mg.body), `"value":"AQID"`) {
		t.Fatalf("_mget base64url: %d %s", mg.code, mg.body)
	}
	if mg := n.do("POST", "/v1/kv/plain/_mget", nil, []byte(`["x"]`)); mg.code != 404 {
		t.Fatalf("_mget on a plain topic: %d %s", mg.code, mg.body)
	}

	// Stats.
	st := n.do("GET", "/v1/kv/kv?count=exact", nil, nil)
	var ts engine.KVTopicStats
	if st.code != 200 || json.Unmarshal(st.body, &ts) != nil || ts.Keys != int64(len(odd)+2) || ts.Tombstones != 1 || len(ts.Partitions) != 2 || ts.Reads.Hit == 0 || ts.Reads.Miss == 0 {
		t.Fatalf("stats: %d %s", st.code, st.body)
	}

	// 410: a pointer below the log start (retention trimmed the record).
	createTopic(t, n, "short", 1, map[string]*string{"korvet.index.enable": ptr("true"), "retention.ms": ptr("3600000")})
	sc := n.client(kgo.DefaultProduceTopic("short"))
	if err := sc.ProduceSync(ctx, &kgo.Record{Key: []byte("old"), Value: []byte("x"), Timestamp: time.Now().Add(-2 * time.Hour)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := sc.ProduceSync(ctx, &kgo.Record{Key: []byte("new"), Value: []byte("y")}, &kgo.Record{Key: []byte("other"), Value: []byte("z")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := n.eng.Topic("short").Partition(0)
	deadline := time.Now().Add(5 * time.Second)
	for p.LogStart() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("retention did not trim")
		}
		time.Sleep(10 * time.Millisecond)
	}
	errCase("/v1/kv/short/old", 410, "gone")
	// 503: the record under "new"'s pointer vanished behind korvet's back;
	// never serve "other" in its place.
	if _, err := n.rc.Do(ctx, "XDEL", p.StreamKey(), "1-1", "1-2", "1-3", "1-4", "1-5"); err != nil {
		t.Fatal(err)
	}
	r := n.do("GET", "/v1/kv/short/new", nil, nil)
	if r.code != 503 || r.hdr.Get("Retry-After") == "" || strings.Contains(string(r.body), `"z"`) {
		t.Fatalf("stale pointer: %d %v %s", r.code, r.hdr, r.body)
	}
}
