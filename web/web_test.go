package web

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openEngine opens an engine on a fresh redis-server started with args.
func openEngine(t *testing.T, redisArgs ...string) (*engine.Engine, *testbed.Redis) {
	t.Helper()
	r := testbed.StartRedis(t, redisArgs...)
	eng, _ := enginetest.Open(t, r, engine.Options{Logger: quiet, GroupInitialRebalanceDelay: -1})
	return eng, r
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
	// Nothing may come from elsewhere: the page works offline.
	for _, f := range []string{"index.html", "app.js", "style.css"} {
		b, err := static.ReadFile("static/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, "http://") || strings.Contains(s, "https://") || strings.Contains(s, "//cdn") {
			t.Errorf("%s refers to another site", f)
		}
	}
	if w := get(t, h, "/static/nope.js", nil); w.Code != http.StatusNotFound {
		t.Errorf("missing asset: %d", w.Code)
	}
	if w := get(t, h, "/nope", nil); w.Code != http.StatusNotFound {
		t.Errorf("/nope: %d", w.Code)
	}
}

func TestOptionalParts(t *testing.T) {
	eng, _ := openEngine(t)
	rebuilt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	index := IndexStatus{Open: true, Keys: 42, SizeBytes: 4096, Lag: 3, LastRebuild: rebuilt}
	h := New(eng, Options{
		Version: "v1", Started: time.Now(), Logger: quiet,
		Index: func(context.Context) (IndexStatus, error) { return index, nil },
		Tiering: func(context.Context) (TieringStatus, error) {
			return TieringStatus{BacklogSegments: 2, Errors: 1, LastError: "bucket unreachable", LastErrorAt: time.Now()}, nil
		},
	})
	var st statusJSON
	get(t, h, "/api/v1/status", &st)
	if st.Index == nil || st.Index.Keys != 42 || !st.Index.LastRebuild.Equal(rebuilt) {
		t.Errorf("index = %+v", st.Index)
	}
	if st.Tiering == nil || st.Tiering.BacklogSegments != 2 {
		t.Errorf("tiering = %+v", st.Tiering)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "bucket unreachable") {
		t.Errorf("warnings = %q", st.Warnings)
	}

	// /readyz follows the index.
	var ready map[string]any
	get(t, h, "/readyz", &ready)
	index.Open = false
	if w := get(t, h, "/readyz", nil); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"index":"not open"`) {
		t.Errorf("/readyz with the index closed: %d %s", w.Code, w.Body)
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
	eng, _ := openEngine(t)
	const token = "0123456789abcdef-secret"
	var rebuilds int
	rebuild := func(context.Context) error {
		rebuilds++
		if rebuilds > 1 {
			return errors.New("a rebuild is already running")
		}
		return nil
	}
	post := func(h http.Handler, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/api/v1/index/rebuild", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	disabled := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet, RebuildIndex: rebuild})
	if w := post(disabled, "Bearer "+token); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "admin_token") {
		t.Errorf("no token configured: %d %s, want 403", w.Code, w.Body)
	}

	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet, AdminToken: token, RebuildIndex: rebuild})
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Bearer " + token + "x", "Bearer " + token[:10], "Basic " + token, token} {
		if w := post(h, auth); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %s, want 401", auth, w.Code, w.Body)
		}
	}
	if rebuilds != 0 {
		t.Fatalf("rebuild ran %d times without the token", rebuilds)
	}
	if w := post(h, "Bearer "+token); w.Code != http.StatusAccepted || rebuilds != 1 {
		t.Errorf("right token: %d %s, rebuilds %d; want 202 and one rebuild", w.Code, w.Body, rebuilds)
	}
	if w := post(h, "Bearer "+token); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "already running") {
		t.Errorf("second rebuild: %d %s, want 409", w.Code, w.Body)
	}
	if w := get(t, h, "/api/v1/index/rebuild", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET on a POST endpoint: %d", w.Code)
	}

	noIndex := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet, AdminToken: token})
	if w := post(noIndex, "Bearer "+token); w.Code != http.StatusNotImplemented {
		t.Errorf("no index: %d %s, want 501", w.Code, w.Body)
	}
}

func TestMetrics(t *testing.T) {
	eng, _ := openEngine(t)
	fill(t, eng, "orders", 2, 30, "billing", 12)
	reg := prometheus.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "korvet_test_counter", Help: "A counter from the process registry."})
	reg.MustRegister(own)
	own.Add(5)
	h := New(eng, Options{Version: "v1.2.3", Started: time.Now(), Logger: quiet, Metrics: reg,
		Kafka: func() KafkaStats { return KafkaStats{Connections: 4} },
		Index: func(context.Context) (IndexStatus, error) { return IndexStatus{Open: true, Keys: 9, Lag: 2}, nil }})

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
		{"korvet_topics", nil, 1},
		{"korvet_partition_high_watermark", map[string]string{"topic": "orders", "partition": "1"}, 30},
		{"korvet_partition_log_start_offset", map[string]string{"topic": "orders", "partition": "0"}, 0},
		{"korvet_group_lag", map[string]string{"group": "billing", "topic": "orders", "partition": "0"}, 18},
		{"korvet_group_members", map[string]string{"group": "billing", "state": "Empty"}, 0},
		{"korvet_redis_up", nil, 1},
		{"korvet_redis_aof_enabled", nil, 1},
		{"korvet_index_open", nil, 1},
		{"korvet_index_keys", nil, 9},
		{"korvet_index_lag_records", nil, 2},
	} {
		got, ok := value(c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if rtt, ok := value("korvet_redis_round_trip_seconds", nil); !ok || rtt <= 0 || rtt > 1 {
		t.Errorf("korvet_redis_round_trip_seconds = %v (found %v)", rtt, ok)
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
