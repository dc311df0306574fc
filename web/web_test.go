package web

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

var quiet = testbed.Logger()

// openEngine opens an engine on a fresh redis-server started with args.
func openEngine(t *testing.T, redisArgs ...string) (*engine.Engine, *testbed.Redis) {
	t.Helper()
	return openEngineWith(t, engine.Options{}, redisArgs...)
}

// openEngineWith is openEngine with options, such as a KV index or a
// cold tier.
func openEngineWith(t *testing.T, opts engine.Options, redisArgs ...string) (*engine.Engine, *testbed.Redis) {
	t.Helper()
	r := testbed.StartRedis(t, redisArgs...)
	opts.Logger, opts.GroupInitialRebalanceDelay = quiet, -1
	eng, _ := enginetest.Open(t, r, opts)
	return eng, r
}

// indexedTopic creates a topic in the KV index with one record per key,
// and returns once the index has caught up and counted its keys.
func indexedTopic(t *testing.T, eng *engine.Engine, topic string, keys ...string) {
	t.Helper()
	ctx := context.Background()
	tp, err := eng.CreateTopic(ctx, topic, 1, map[string]string{"korvet.index.enable": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, _, err := tp.Partition(0).Append([]record.Record{{Key: []byte(k), Value: []byte("v"), Timestamp: time.Now().UnixMilli()}}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	countKeys(t, eng, topic)
}

// countKeys waits for the index to catch up, then counts topic's keys
// (the figures the status shows are the last count).
func countKeys(t *testing.T, eng *engine.Engine, topic string) {
	t.Helper()
	testbed.WaitFor(t, 30*time.Second, "the index to catch up", eng.KV().Ready)
	if _, err := eng.KV().TopicStats(context.Background(), topic, true); err != nil {
		t.Fatal(err)
	}
}

// fill creates topic with the given partitions and appends n records to
// each, then commits offset commit on partition 0 for group.
func fill(t *testing.T, eng *engine.Engine, topic string, partitions int32, n int, grp string, commit int64) {
	t.Helper()
	ctx := context.Background()
	tp, err := eng.CreateTopic(ctx, topic, partitions, map[string]string{"retention.ms": "86400000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	// A new partition gets its leader at once, or at the next periodic
	// check when the claim lost a race (a loaded machine).
	testbed.WaitFor(t, 30*time.Second, "the new partitions to have this broker as leader", func() bool {
		for _, p := range tp.Partitions() {
			if !p.IsLeader() {
				return false
			}
		}
		return true
	})
	for _, p := range tp.Partitions() {
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Key: []byte("k"), Value: []byte(`{"v":1}`), Timestamp: time.Now().UnixMilli()}
		}
		if _, _, err := p.Append(recs).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if grp != "" {
		errs, err := eng.Groups().Commit(ctx, group.CommitRequest{Group: grp, Generation: -1,
			Offsets: []group.PartitionCommit{{TopicPartition: group.TopicPartition{Topic: topic, Partition: 0}, Commit: group.Commit{Offset: commit, LeaderEpoch: -1}}}})
		if err != nil || errors.Join(errs...) != nil {
			t.Fatalf("commit: %v %v", err, errs)
		}
	}
}

func get(t *testing.T, h http.Handler, path string, into any) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	if into != nil {
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if err := json.Unmarshal(w.Body.Bytes(), into); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, w.Body)
		}
	}
	return w
}

func TestAPI(t *testing.T) {
	eng, _ := openEngine(t)
	fill(t, eng, "orders", 2, 30, "billing", 12)
	fill(t, eng, "users", 1, 5, "", 0)
	h := New(eng, Options{
		Version:   "v9.9.9",
		Started:   time.Now().Add(-time.Hour),
		Listeners: []Listener{{Name: "Kafka", Address: "127.0.0.1:9092"}},
		Kafka:     func() KafkaStats { return KafkaStats{Connections: 3, FetchedRecords: 7} },
		Logger:    quiet,
	})

	var st statusJSON
	get(t, h, "/api/v1/status", &st)
	if st.Broker.Version != "v9.9.9" || st.Broker.UptimeSeconds < 3599 || st.Broker.ClientsConnected != 3 || st.Broker.FetchedRecords != 7 ||
		len(st.Broker.Listeners) != 1 || st.Broker.ClusterID != eng.ClusterID() {
		t.Errorf("broker = %+v", st.Broker)
	}
	if !st.Redis.Reachable || !strings.HasPrefix(st.Redis.Version, "7.") && !strings.HasPrefix(st.Redis.Version, "8.") || !st.Redis.AOFEnabled ||
		st.Redis.UsedMemory <= 0 || st.Redis.MaxMemoryPolicy != "noeviction" {
		t.Errorf("redis = %+v", st.Redis)
	}
	if st.Totals != (totalsJSON{Topics: 2, Partitions: 3, Records: 65, Bytes: st.Totals.Bytes, HighWatermarks: 65}) || st.Totals.Bytes <= 0 {
		t.Errorf("totals = %+v", st.Totals)
	}
	if len(st.Warnings) != 0 || st.Index != nil || st.Tiering != nil {
		t.Errorf("warnings %q, index %v, tiering %v; want none", st.Warnings, st.Index, st.Tiering)
	}

	var topics []topicJSON
	get(t, h, "/api/v1/topics", &topics)
	if len(topics) != 2 || topics[0].Name != "orders" || topics[1].Name != "users" {
		t.Fatalf("topics = %+v", topics)
	}
	o := topics[0]
	if len(o.Partitions) != 2 || o.Records != 60 || o.Partitions[1] != (partitionJSON{Partition: 1, LogStart: 0, HighWatermark: 30, Records: 30, Bytes: o.Partitions[1].Bytes}) {
		t.Errorf("orders = %+v", o)
	}
	if c := o.Configs["retention.ms"]; c != (configJSON{Value: "86400000", Source: "topic"}) {
		t.Errorf("orders retention.ms = %+v", c)
	}
	if c := o.Configs["cleanup.policy"]; c != (configJSON{Value: "delete", Source: "default"}) {
		t.Errorf("orders cleanup.policy = %+v", c)
	}
	if id := eng.Topic("orders").ID(); strings.ReplaceAll(o.ID, "-", "") != hex.EncodeToString(id[:]) || len(o.ID) != 36 {
		t.Errorf("orders id %q", o.ID)
	}

	var groups []groupJSON
	get(t, h, "/api/v1/groups", &groups)
	if len(groups) != 1 || groups[0].Group != "billing" || groups[0].State != "Empty" || groups[0].Lag != 18 ||
		len(groups[0].Partitions) != 1 || groups[0].Partitions[0] != (groupPartJSON{Topic: "orders", Partition: 0, Committed: 12, HighWatermark: 30, Lag: 18}) {
		t.Errorf("groups = %+v", groups)
	}

	if w := get(t, h, "/api/v1/nope", nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown endpoint: %d %s", w.Code, w.Body)
	}
}

func TestPageAssets(t *testing.T) {
	eng, _ := openEngine(t)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	for _, tc := range []struct{ path, ctype, has string }{
		{"/", "text/html", `src="/static/app.js"`},
		{"/static/app.js", "javascript", "/api/v1/status"},
		{"/static/style.css", "text/css", "prefers-color-scheme"},
	} {
		w := get(t, h, tc.path, nil)
		if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(w.Body.String(), tc.has) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tc.path, w.Code, w.Header().Get("Content-Type"), tc.has, strings.Contains(w.Body.String(), tc.has))
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", tc.path, csp)
		}
	}
	// Nothing may come from elsewhere: the page works offline. (SVG's
	// namespace name is a name, not a fetch.)
	files, err := static.ReadDir("static")
	if err != nil || len(files) < 3 {
		t.Fatalf("static files: %v %v", files, err)
	}
	for _, f := range files {
		b, err := static.ReadFile("static/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
		if strings.Contains(s, "http://") || strings.Contains(s, "https://") || strings.Contains(s, "//cdn") {
			t.Errorf("%s refers to another site", f.Name())
		}
		if strings.HasSuffix(f.Name(), ".js") && strings.Contains(s, "innerHTML") {
			t.Errorf("%s uses innerHTML: build elements with textContent", f.Name())
		}
		if name := "/static/" + f.Name(); f.Name() != "index.html" && !strings.Contains(get(t, h, "/", nil).Body.String(), name) {
			t.Errorf("the page does not load %s", name)
		}
	}
	if w := get(t, h, "/static/nope.js", nil); w.Code != http.StatusNotFound {
		t.Errorf("missing asset: %d", w.Code)
	}
	if w := get(t, h, "/nope", nil); w.Code != http.StatusNotFound {
		t.Errorf("/nope: %d", w.Code)
	}
}

// The index and tiering sections show the engine's figures, with their
// troubles among the warnings; /readyz follows the index.
func TestIndexAndTiering(t *testing.T) {
	ctx := context.Background()
	// An object store that does not answer: archiving fails, and sealed
	// segments wait in Redis.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	store, err := cold.Open(ctx, cold.Config{Warehouse: "s3://korvet/wh", Endpoint: "http://" + ln.Addr().String(),
		AccessKey: "key", SecretKey: "secret", Region: "us-east-1", PathStyle: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, _ := openEngineWith(t, engine.Options{Index: engine.IndexOptions{Dir: t.TempDir()}, Cold: store, TieringInterval: 50 * time.Millisecond})
	indexedTopic(t, eng, "users", "ann", "bob", "ann", "cy")
	tp, err := eng.CreateTopic(ctx, "logs", 1, map[string]string{"remote.storage.enable": "true", "segment.bytes": "500", "retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, _, err := tp.Partition(0).Append([]record.Record{{Value: make([]byte, 100), Timestamp: time.Now().UnixMilli() + int64(i)}}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testbed.WaitFor(t, 30*time.Second, "a backlog and an archiving error", func() bool {
		tt, _ := eng.Tiering()
		return tt.BacklogSegments > 0 && tt.Errors > 0
	})
	if err := eng.KV().StartRebuild(); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 30*time.Second, "the index rebuild", func() bool {
		rb := eng.KV().RebuildState()
		return !rb.Running && !rb.Last.IsZero()
	})
	countKeys(t, eng, "users")

	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	w := get(t, h, "/api/v1/status", nil)
	var st statusJSON
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	rb := eng.KV().RebuildState()
	if ix := st.Index; ix == nil || !ix.Open || ix.Keys != 3 || ix.SizeBytes <= 0 || ix.Lag != 0 || len(ix.Topics) != 1 || ix.Topics[0] != "users" ||
		ix.Rebuilding || !ix.LastRebuild.Equal(rb.Last) || ix.Error != "" {
		t.Errorf("index = %+v, want open, 3 keys of users, rebuilt at %v", st.Index, rb.Last)
	}
	if tt, _ := eng.Tiering(); st.Tiering == nil || st.Tiering.BacklogSegments != tt.BacklogSegments || st.Tiering.Errors == 0 || st.Tiering.LastError == "" {
		t.Errorf("tiering = %+v, want a backlog of %d segments and errors", st.Tiering, tt.BacklogSegments)
	}
	if st.Tiering != nil && (len(st.Warnings) != 1 || st.Warnings[0] != "Tiering: "+st.Tiering.LastError) {
		t.Errorf("warnings = %q, want the archiving error", st.Warnings)
	}
	// The names the page reads (static/app.js).
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for part, want := range map[string][]string{
		"index":   {"open", "keys", "size_bytes", "lag", "topics", "rebuilding", "last_rebuild"},
		"tiering": {"backlog_segments", "backlog_bytes", "errors", "last_error", "last_error_at"},
	} {
		var fields map[string]any
		if err := json.Unmarshal(raw[part], &fields); err != nil {
			t.Fatalf("%s: %v", part, err)
		}
		var got []string
		for k := range fields {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s has %q, want %q", part, got, want)
		}
	}

	var ready struct{ Checks map[string]string }
	get(t, h, "/readyz", &ready)
	if ready.Checks["index"] != "ok" {
		t.Errorf("/readyz checks = %v, want the index ok", ready.Checks)
	}
}

func TestRedisWarnings(t *testing.T) {
	eng, r := openEngine(t, "--appendonly", "no", "--maxmemory-policy", "allkeys-lru")
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	var st statusJSON
	get(t, h, "/api/v1/status", &st)
	if st.Redis.AOFEnabled || len(st.Warnings) != 2 || !strings.Contains(st.Warnings[0], "AOF off") || !strings.Contains(st.Warnings[1], "allkeys-lru") {
		t.Errorf("aof %v, warnings %q; want AOF off and eviction warnings", st.Redis.AOFEnabled, st.Warnings)
	}

	// With Redis gone the API still answers, saying so; /readyz fails.
	r.Stop()
	st = statusJSON{}
	get(t, h, "/api/v1/status", &st)
	if st.Redis.Reachable || st.Redis.Error == "" || len(st.Warnings) != 1 {
		t.Errorf("redis down: redis %+v warnings %q", st.Redis, st.Warnings)
	}
	if w := get(t, h, "/readyz", nil); w.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down: %d %s", w.Code, w.Body)
	}
	if w := get(t, h, "/healthz", nil); w.Code != http.StatusOK {
		t.Errorf("/healthz with Redis down: %d %s", w.Code, w.Body)
	}
}

func TestAdminToken(t *testing.T) {
	eng, r := openEngineWith(t, engine.Options{Index: engine.IndexOptions{Dir: t.TempDir()}})
	indexedTopic(t, eng, "users", "ann", "bob")
	const token = "0123456789abcdef-secret"
	post := func(h http.Handler, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/api/v1/index/rebuild", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	noRebuild := func(when string) {
		t.Helper()
		if rb := eng.KV().RebuildState(); rb.Running || !rb.Last.IsZero() {
			t.Fatalf("%s: a rebuild ran: %+v", when, rb)
		}
	}

	disabled := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	if w := post(disabled, "Bearer "+token); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "admin_token") {
		t.Errorf("no token configured: %d %s, want 403", w.Code, w.Body)
	}
	noRebuild("no token configured")

	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet, AdminToken: token})
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Bearer " + token + "x", "Bearer " + token[:10], "Basic " + token, token} {
		if w := post(h, auth); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %s, want 401", auth, w.Code, w.Body)
		}
	}
	noRebuild("without the token")

	// With Redis paused the rebuild cannot read the log, so it is still
	// running when the second request comes.
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if res, err := rc.Do(context.Background(), "CLIENT", "PAUSE", "3000", "ALL"); err != nil || res.Err() != nil {
		t.Fatalf("CLIENT PAUSE: %v %v", err, res.Err())
	}
	if w := post(h, "Bearer "+token); w.Code != http.StatusAccepted || !eng.KV().RebuildState().Running {
		t.Errorf("right token: %d %s, rebuild %+v; want 202 and a rebuild running", w.Code, w.Body, eng.KV().RebuildState())
	}
	if w := post(h, "Bearer "+token); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "already running") {
		t.Errorf("second rebuild: %d %s, want 409", w.Code, w.Body)
	}
	testbed.WaitFor(t, 30*time.Second, "the rebuild to end", func() bool {
		rb := eng.KV().RebuildState()
		return !rb.Running && !rb.Last.IsZero()
	})
	if w := get(t, h, "/api/v1/index/rebuild", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET on a POST endpoint: %d", w.Code)
	}

	noIndexEng, _ := openEngine(t)
	noIndex := New(noIndexEng, Options{Version: "v1", Started: time.Now(), Logger: quiet, AdminToken: token})
	if w := post(noIndex, "Bearer "+token); w.Code != http.StatusNotImplemented {
		t.Errorf("no index: %d %s, want 501", w.Code, w.Body)
	}
}

func TestMetrics(t *testing.T) {
	eng, _ := openEngineWith(t, engine.Options{Index: engine.IndexOptions{Dir: t.TempDir()}})
	fill(t, eng, "orders", 2, 30, "billing", 12)
	indexedTopic(t, eng, "users", "ann", "bob", "ann")
	reg := prometheus.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "korvet_test_counter", Help: "A counter from the process registry."})
	reg.MustRegister(own)
	own.Add(5)
	h := New(eng, Options{Version: "v1.2.3", Started: time.Now(), Logger: quiet, Metrics: reg,
		Kafka: func() KafkaStats { return KafkaStats{Connections: 4} }})

	w := get(t, h, "/metrics", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, w.Body)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
	next:
		for _, m := range f.Metric {
			for k, v := range labels {
				if labelValue(m, k) != v {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			}
		}
		return 0, false
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"korvet_test_counter", nil, 5},
		{"korvet_build_info", map[string]string{"version": "v1.2.3"}, 1},
		{"korvet_kafka_connections", nil, 4},
		{"korvet_topics", nil, 2},
		{"korvet_partition_high_watermark", map[string]string{"topic": "orders", "partition": "1"}, 30},
		{"korvet_partition_log_start_offset", map[string]string{"topic": "orders", "partition": "0"}, 0},
		{"korvet_group_lag", map[string]string{"group": "billing", "topic": "orders", "partition": "0"}, 18},
		{"korvet_group_members", map[string]string{"group": "billing", "state": "Empty"}, 0},
		{"korvet_redis_up", nil, 1},
		{"korvet_redis_aof_enabled", nil, 1},
		{"korvet_index_open", nil, 1},
		{"korvet_index_keys", nil, 2},
		{"korvet_index_lag_records", nil, 0},
	} {
		got, ok := value(c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if rtt, ok := value("korvet_redis_round_trip_seconds", nil); !ok || rtt <= 0 || rtt > 1 {
		t.Errorf("korvet_redis_round_trip_seconds = %v (found %v)", rtt, ok)
	}
	if b, ok := value("korvet_index_size_bytes", nil); !ok || b <= 0 {
		t.Errorf("korvet_index_size_bytes = %v (found %v)", b, ok)
	}
	if b, ok := value("korvet_partition_appended_bytes_total", map[string]string{"topic": "orders", "partition": "0"}); !ok || b <= 0 {
		t.Errorf("korvet_partition_appended_bytes_total = %v (found %v)", b, ok)
	}
	if _, ok := fams["korvet_tiering_backlog_segments"]; ok {
		t.Error("tiering metrics without a tiering component")
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
