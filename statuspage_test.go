package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/resp"
)

// TestStatusPage runs the real binary with topics, records, a committed
// group and live traffic, checks the JSON API and /metrics, then loads
// the page in headless Chromium: the DOM must show them, and screenshots
// (desktop and phone) are kept as artifacts in $KORVET_ARTIFACTS (or a
// temp dir, logged).
func TestStatusPage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and a browser")
	}
	p := startKorvet(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": ptr("259200000")}, "orders"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "order-%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: "users", Key: fmt.Appendf(nil, "user-%d", i), Value: []byte(`{"plan":"pro"}`)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// A group that committed and went away: its lag is what the page is for.
	offsets := kadm.Offsets{}
	for part, at := range []int64{50, 60, 10} {
		offsets.Add(kadm.Offset{Topic: "orders", Partition: int32(part), At: at, LeaderEpoch: -1})
	}
	if resp, err := adm.CommitOffsets(ctx, "billing", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit offsets: %v %v", err, resp.Error())
	}

	// Live traffic while the page samples: a producer and a group member.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.ConsumerGroup("analytics"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	traffic, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopTraffic(); wg.Wait() }()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; traffic.Err() == nil; i++ {
			cl.Produce(traffic, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, `{"live":%d}`, i)}, nil)
			time.Sleep(2 * time.Millisecond) // a steady trickle, not a flood
		}
	}()
	go func() {
		defer wg.Done()
		for traffic.Err() == nil {
			consumer.PollFetches(traffic)
		}
	}()

	hc := &http.Client{Timeout: 5 * time.Second}
	getJSON := func(path string, into any) {
		t.Helper()
		code, body, err := httpGet(hc, p.httpBase+path)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %s %v", path, code, body, err)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}

	// The analytics member joins after the initial rebalance delay.
	var groups []struct {
		Group   string `json:"group"`
		State   string `json:"state"`
		Members int    `json:"members"`
		Lag     int64  `json:"lag"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		getJSON("/api/v1/groups", &groups)
		if len(groups) == 2 && groups[0].Group == "analytics" && groups[0].State == "Stable" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(groups) != 2 || groups[0].Group != "analytics" || groups[0].State != "Stable" || groups[0].Members != 1 ||
		groups[1].Group != "billing" || groups[1].State != "Empty" || groups[1].Lag < 300-120 {
		t.Errorf("groups = %+v; want analytics Stable with 1 member, billing Empty with lag >= 180", groups)
	}

	var st struct {
		Broker struct {
			Version          string `json:"version"`
			ClientsConnected int64  `json:"clients_connected"`
			ProducedRecords  int64  `json:"produced_records_total"`
		} `json:"broker"`
		Redis struct {
			Reachable  bool `json:"reachable"`
			AOFEnabled bool `json:"aof_enabled"`
		} `json:"redis"`
		Totals struct {
			Topics, Partitions int
			Records            int64
		} `json:"totals"`
		Warnings []string `json:"warnings"`
	}
	getJSON("/api/v1/status", &st)
	if st.Broker.Version != testVersion || st.Broker.ClientsConnected < 2 || st.Broker.ProducedRecords < 340 ||
		!st.Redis.Reachable || !st.Redis.AOFEnabled || st.Totals.Topics != 2 || st.Totals.Partitions != 4 || st.Totals.Records < 340 || len(st.Warnings) != 0 {
		t.Errorf("status = %+v", st)
	}
	var topics []struct {
		Name       string `json:"name"`
		Partitions []struct {
			HighWatermark int64 `json:"high_watermark"`
		} `json:"partitions"`
		Configs map[string]struct{ Value, Source string } `json:"configs"`
	}
	getJSON("/api/v1/topics", &topics)
	if len(topics) != 2 || topics[0].Name != "orders" || len(topics[0].Partitions) != 3 || topics[1].Name != "users" ||
		topics[1].Partitions[0].HighWatermark != 40 || topics[0].Configs["retention.ms"].Value != "259200000" {
		t.Errorf("topics = %+v", topics)
	}

	// The Redis deployment: one standalone shard serving every slot, with
	// every partition (orders, users, __consumer_offsets) on it.
	var rd struct {
		Cluster    bool `json:"cluster"`
		Partitions int  `json:"partitions"`
		Shards     []struct {
			Master     string `json:"master"`
			Slots      int    `json:"slots"`
			Partitions int    `json:"partitions"`
			Nodes      []struct {
				Up         bool  `json:"up"`
				UsedMemory int64 `json:"used_memory"`
			} `json:"nodes"`
		} `json:"shards"`
	}
	getJSON("/api/v1/redis", &rd)
	if rd.Cluster || rd.Partitions != 5 || len(rd.Shards) != 1 || rd.Shards[0].Master != p.redis.Addr || rd.Shards[0].Slots != 16384 ||
		rd.Shards[0].Partitions != 5 || len(rd.Shards[0].Nodes) != 1 || !rd.Shards[0].Nodes[0].Up || rd.Shards[0].Nodes[0].UsedMemory <= 0 {
		t.Errorf("redis deployment = %+v", rd)
	}

	// The schema registry: two subjects, one with its own level and
	// two versions.
	registerStatusSchemas(t, hc, p.registryBase)
	var subjects []struct {
		Subject  string `json:"subject"`
		Versions []int  `json:"versions"`
		LatestID int32  `json:"latest_id"`
		Type     string `json:"schema_type"`
		Level    string `json:"compatibility"`
		LevelOwn bool   `json:"compatibility_own"`
		Mode     string `json:"mode"`
	}
	getJSON("/api/v1/schemas", &subjects)
	if len(subjects) != 2 || subjects[0].Subject != "orders-value" || len(subjects[0].Versions) != 2 || subjects[0].Type != "AVRO" ||
		subjects[0].Level != "FULL" || !subjects[0].LevelOwn || subjects[0].Mode != "READWRITE" || subjects[0].LatestID < 2 ||
		subjects[1].Subject != "users-value" || subjects[1].Type != "JSON" || subjects[1].Level != "BACKWARD" || subjects[1].LevelOwn {
		t.Errorf("schemas = %+v; want orders-value (AVRO, 2 versions, FULL of its own) and users-value (JSON, BACKWARD global)", subjects)
	}

	checkMetrics(t, hc, p.httpBase)

	chromium := findChromium(t)
	art := artifactDir(t)
	dom := runChromium(t, chromium, "--dump-dom", p.httpBase+"/")
	for _, want := range []string{`data-state="ready"`, `data-topic="orders"`, `data-topic="users"`, `data-group="billing"`, `data-group="analytics"`,
		testVersion, "All good", "AOF on", "noeviction", "3 days",
		// The Redis shards section: the one shard, its master and memory bar,
		// its slots and partitions.
		`data-shard="` + p.redis.Addr + `"`, `data-role="master"`, `class="membar `, "0-16383", "standalone", "5 partitions · redirects: 0 moved",
		// The Schemas card, and the registry among the listeners.
		"Schema registry", strings.TrimPrefix(p.registryBase, "http://"),
		`data-subject="orders-value"`, `data-subject="users-value"`, "FULL *", `id="schemas-count">2<`} {
		if !strings.Contains(dom, want) {
			t.Errorf("page DOM lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
	for _, shot := range []struct{ name, size string }{
		{"status-page.png", "1280,900"}, {"status-page-full.png", "1280,1500"}, {"status-page-phone.png", "390,844"},
	} {
		out := filepath.Join(art, shot.name)
		runChromium(t, chromium, "--screenshot="+out, "--window-size="+shot.size, "--hide-scrollbars", p.httpBase+"/")
		if fi, err := os.Stat(out); err != nil || fi.Size() < 10000 {
			t.Errorf("screenshot %s: %v (size %d)", out, err, fi.Size())
		}
		t.Logf("screenshot: %s", out)
	}
}

func ptr[T any](v T) *T { return &v }

// registerStatusSchemas registers, over the registry's own listener,
// orders-value (Avro, two versions, subject level FULL) and users-value
// (JSON Schema).
func registerStatusSchemas(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	send := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	order := `{"type":"record","name":"Order","fields":[{"name":"n","type":"long"}]}`
	order2 := `{"type":"record","name":"Order","fields":[{"name":"n","type":"long"},{"name":"note","type":"string","default":""}]}`
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	send(http.MethodPut, "/config/orders-value", `{"compatibility":"FULL"}`)
	send(http.MethodPost, "/subjects/orders-value/versions", `{"schema":`+quote(order)+`}`)
	send(http.MethodPost, "/subjects/orders-value/versions", `{"schema":`+quote(order2)+`}`)
	send(http.MethodPost, "/subjects/users-value/versions", `{"schemaType":"JSON","schema":`+quote(`{"type":"object","properties":{"plan":{"type":"string"}}}`)+`}`)
}

// checkMetrics parses /metrics with Prometheus's own text parser and
// looks for the Kafka, engine, group and runtime series. They fill in as
// the live traffic runs (a fetch counts once it has been answered), so it
// reads until all are there and reports those still missing at the
// deadline.
func checkMetrics(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if missing = missingMetrics(t, hc, base); len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, what := range missing {
		t.Errorf("/metrics: %s missing or wrong", what)
	}
}

// missingMetrics reads /metrics once and returns the series that are
// missing or wrong.
func missingMetrics(t *testing.T, hc *http.Client, base string) (missing []string) {
	t.Helper()
	code, body, err := httpGet(hc, base+"/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	find := func(name string, labels ...string) *dto.Metric {
		f := fams[name]
		if f == nil {
			return nil
		}
	next:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				ok := false
				for _, l := range m.Label {
					ok = ok || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !ok {
					continue next
				}
			}
			return m
		}
		return nil
	}
	checks := []struct {
		what string
		ok   func() bool
	}{
		{"Produce requests", func() bool {
			m := find("korvet_kafka_requests_total", "api", "Produce")
			return m != nil && m.GetCounter().GetValue() > 0
		}},
		{"Fetch latency", func() bool {
			m := find("korvet_kafka_request_duration_seconds", "api", "Fetch")
			return m != nil && m.GetHistogram().GetSampleCount() > 0
		}},
		{"bytes in", func() bool {
			m := find("korvet_kafka_received_bytes_total", "api", "Produce")
			return m != nil && m.GetCounter().GetValue() > 0
		}},
		{"bytes out", func() bool {
			m := find("korvet_kafka_sent_bytes_total", "api", "Fetch")
			return m != nil && m.GetCounter().GetValue() > 0
		}},
		{"users high watermark", func() bool {
			m := find("korvet_partition_high_watermark", "topic", "users", "partition", "0")
			return m != nil && m.GetGauge().GetValue() == 40
		}},
		{"log start", func() bool {
			return find("korvet_partition_log_start_offset", "topic", "orders", "partition", "2") != nil
		}},
		{"billing lag", func() bool {
			m := find("korvet_group_lag", "group", "billing", "topic", "orders", "partition", "2")
			return m != nil && m.GetGauge().GetValue() > 0
		}},
		{"schema subjects", func() bool {
			s, v := find("korvet_schema_subjects"), find("korvet_schema_versions")
			return s != nil && s.GetGauge().GetValue() == 2 && v != nil && v.GetGauge().GetValue() == 3
		}},
		{"Redis up", func() bool { m := find("korvet_redis_up"); return m != nil && m.GetGauge().GetValue() == 1 }},
		{"Redis round trip", func() bool {
			m := find("korvet_redis_round_trip_seconds")
			return m != nil && m.GetGauge().GetValue() > 0
		}},
		{"Redis shards", func() bool {
			c, n := find("korvet_redis_cluster"), find("korvet_redis_shards")
			return c != nil && c.GetGauge().GetValue() == 0 && n != nil && n.GetGauge().GetValue() == 1
		}},
		{"Redis shard slots", func() bool {
			m := find("korvet_redis_shard_slots")
			return m != nil && m.GetGauge().GetValue() == 16384
		}},
		{"Redis node memory", func() bool {
			m := find("korvet_redis_node_used_memory_bytes", "role", "master")
			return m != nil && m.GetGauge().GetValue() > 0
		}},
		{"connections", func() bool { m := find("korvet_kafka_connections"); return m != nil && m.GetGauge().GetValue() >= 2 }},
		{"build info", func() bool { return find("korvet_build_info", "version", testVersion) != nil }},
		{"Go runtime", func() bool { return find("go_goroutines") != nil }},
		{"process", func() bool { return find("process_resident_memory_bytes") != nil }},
	}
	for _, c := range checks {
		if !c.ok() {
			missing = append(missing, c.what)
		}
	}
	return missing
}

func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: apt-get install chromium (scripts/test.sh installs it)")
	return ""
}

// artifactDir is $KORVET_ARTIFACTS when set (kept after the test), else
// a temp dir.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KORVET_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(abs, 0o755)
	}
	if err != nil {
		t.Fatalf("KORVET_ARTIFACTS: %v", err)
	}
	return abs
}

// runChromium runs headless Chromium once and returns its stdout. The
// virtual time budget lets the page's fetches and a few refreshes run
// before the DOM is dumped or the screenshot taken.
func runChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(home, "profile"), "--virtual-time-budget=8000"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	// Chromium forks helpers: its own process group lets the test end
	// all of them, and only them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestStatusPageMemory: the topics table shows what a topic takes in
// Redis per record and how long Redis holds it, and the page shows a
// banner when Redis nears its maxmemory (stronger from 95%).
func TestStatusPageMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and a browser")
	}
	chromium := findChromium(t)
	p := startKorvet(t, `redis.memory_sample_interval = "1s"`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": ptr("259200000")}, "sensors"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var recs []*kgo.Record
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Topic: "sensors", Value: fmt.Appendf(nil, `{"sensor": "s-%d", "temp": %d.5, "unit": "C"}`, i%50, i%40)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	var topics []struct {
		Name         string   `json:"name"`
		PerRecord    *float64 `json:"redis_bytes_per_record"`
		HotRetention *float64 `json:"hot_retention_seconds"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body, err := httpGet(hc, p.httpBase+"/api/v1/topics")
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &topics) == nil &&
			len(topics) == 1 && topics[0].PerRecord != nil && topics[0].HotRetention != nil && *topics[0].HotRetention == 259200 {
			break // nothing arrives any more: Redis holds the 3 days of retention.ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("no memory figures for sensors projecting its 3 days: %d %s %v", code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	rc, err := resp.New(p.redis.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	setMax := func(pct int64) {
		t.Helper()
		used := redisMemory(t, rc, "used_memory")
		if rep, err := rc.Do(ctx, "CONFIG", "SET", "maxmemory", used*100/pct); err != nil || rep.Err() != nil {
			t.Fatalf("CONFIG SET maxmemory: %v %v", err, rep.Err())
		}
	}
	dom := runChromium(t, chromium, "--dump-dom", p.httpBase+"/")
	for _, want := range []string{`data-topic="sensors"`, "B/record", "the record", "~3.0 days in Redis"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "of its maxmemory") {
		t.Errorf("memory banner without maxmemory")
	}
	setMax(87)
	dom = runChromium(t, chromium, "--dump-dom", p.httpBase+"/")
	for _, want := range []string{`data-level="warn"`, "of its maxmemory", "raise maxmemory", "shorten local.retention.ms", "enable the cold tier", "korvet.storage.compression=zstd"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page DOM at ~87%% of maxmemory lacks %q", want)
		}
	}
	setMax(98)
	dom = runChromium(t, chromium, "--dump-dom", p.httpBase+"/")
	for _, want := range []string{`class="banner error"`, `data-level="critical"`, "Redis is nearly full"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page DOM at ~98%% of maxmemory lacks %q", want)
		}
	}
	out := filepath.Join(artifactDir(t), "status-page-memory.png")
	runChromium(t, chromium, "--screenshot="+out, "--window-size=1280,900", "--hide-scrollbars", p.httpBase+"/")
	t.Logf("screenshot: %s", out)
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
	if _, err := rc.Do(ctx, "CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
}
