package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// redisOf reads /api/v1/redis.
func redisOf(t *testing.T, h http.Handler) redisDeploymentJSON {
	t.Helper()
	var rd redisDeploymentJSON
	get(t, h, "/api/v1/redis", &rd)
	return rd
}

// metricValues parses /metrics into name{label=value,...} -> value, the
// labels in the order the exposition writes them (sorted by name).
func metricValues(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	w := get(t, h, "/metrics", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			key := name
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			}
		}
	}
	return out
}

// infoField reads one INFO field of the server at addr.
func infoField(t *testing.T, rc *resp.Client, addr, section, field string) string {
	t.Helper()
	r, err := rc.DoNode(context.Background(), addr, "INFO", section)
	if err != nil {
		t.Fatalf("INFO %s on %s: %v", section, addr, err)
	}
	for line := range strings.SplitSeq(string(r.Bytes()), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s on %s has no %s", section, addr, field)
	return ""
}

// infoCalls is how many INFO commands the server at addr has run.
func infoCalls(t *testing.T, rc *resp.Client, addr string) int {
	t.Helper()
	v := infoField(t, rc, addr, "commandstats", "cmdstat_info") // calls=12,usec=...
	n, err := strconv.Atoi(strings.TrimPrefix(strings.Split(v, ",")[0], "calls="))
	if err != nil {
		t.Fatalf("cmdstat_info %q: %v", v, err)
	}
	return n
}

// pause stops the redis-server at addr (SIGSTOP) until the test ends or
// the returned func resumes it: it keeps its connections and answers
// nothing, as a hung server does.
func pause(t *testing.T, rc *resp.Client, addr string) (resume func()) {
	t.Helper()
	pid, err := strconv.Atoi(infoField(t, rc, addr, "server", "process_id"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume = func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(resume)
	return resume
}

// A standalone Redis is one shard serving every slot, with every
// partition on it; /metrics says the same.
func TestAPIRedisStandalone(t *testing.T) {
	r := testbed.StartRedis(t)
	eng, rc := openOn(t, r, false)
	fill(t, eng, "orders", 2, 30, "", 0)
	fill(t, eng, "users", 1, 5, "", 0)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	parts := totalPartitions(eng) // orders, users and __consumer_offsets

	rd := redisOf(t, h)
	if rd.Cluster || rd.Error != "" || len(rd.Shards) != 1 || rd.Partitions != parts || parts != 4 || rd.Unserved != 0 || rd.At.IsZero() {
		t.Fatalf("redis = %+v; want one shard, %d partitions", rd, parts)
	}
	sh := rd.Shards[0]
	if sh.Master != r.Addr || sh.Slots != resp.SlotCount || sh.SlotRanges != "0-16383" || sh.Partitions != parts || len(sh.Nodes) != 1 {
		t.Errorf("shard = %+v", sh)
	}
	n := sh.Nodes[0]
	if n.Addr != r.Addr || n.Role != "master" || !n.Up || n.Error != "" || n.UsedMemory <= 0 || n.UsedMemoryPeak < n.UsedMemory/2 || n.Keys <= 0 {
		t.Errorf("node = %+v", n)
	}

	// The view is cached: a burst of page loads sends INFO a few times,
	// not once per request.
	before := infoCalls(t, rc, r.Addr)
	for range 30 {
		redisOf(t, h)
	}
	if n := infoCalls(t, rc, r.Addr) - before; n > 3 {
		t.Errorf("30 requests sent INFO %d times", n)
	}

	m := metricValues(t, h)
	shard, node := "shard="+r.Addr, "node="+r.Addr+",role=master"
	for key, want := range map[string]float64{
		"korvet_redis_cluster":                            0,
		"korvet_redis_shards":                             1,
		"korvet_redis_shard_slots{" + shard + "}":         resp.SlotCount,
		"korvet_redis_shard_partitions{" + shard + "}":    float64(parts),
		"korvet_redis_node_up{" + node + "}":              1,
		"korvet_redis_node_maxmemory_bytes{" + node + "}": 0,
		"korvet_redis_redirects_total{kind=moved}":        0,
		"korvet_redis_redirects_total{kind=ask}":          0,
		"korvet_redis_redirects_total{kind=tryagain}":     0,
		"korvet_redis_redirects_total{kind=clusterdown}":  0,
		"korvet_redis_slot_map_refreshes_total":           0,
	} {
		if got, ok := m[key]; !ok || got != want {
			t.Errorf("%s = %v (found %v), want %v", key, got, ok, want)
		}
	}
	if v := m["korvet_redis_node_used_memory_bytes{"+node+"}"]; v <= 0 {
		t.Errorf("korvet_redis_node_used_memory_bytes{%s} = %v", node, v)
	}
}

// A Redis that hangs does not hang the page: the last view is answered
// at once, then the error once the gather gives up.
func TestAPIRedisHung(t *testing.T) {
	r := testbed.StartRedis(t)
	eng, rc := openOn(t, r, false)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	if rd := redisOf(t, h); rd.Error != "" || len(rd.Shards) != 1 {
		t.Fatalf("redis = %+v", rd)
	}
	pause(t, rc, r.Addr)
	var rd redisDeploymentJSON
	testbed.WaitFor(t, 30*time.Second, "the shard map error", func() bool {
		start := time.Now()
		rd = redisOf(t, h)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("/api/v1/redis took %v with a view cached", d)
		}
		return rd.Error != ""
	})
	if len(rd.Shards) != 0 || !strings.Contains(rd.Error, "shard map") {
		t.Errorf("redis = %+v", rd)
	}
}

// openOn opens an engine on r, through a Redis Cluster client when
// cluster is set.
func openOn(t *testing.T, r *testbed.Redis, cluster bool) (*engine.Engine, *resp.Client) {
	t.Helper()
	rc, err := resp.New(r.URL, resp.Options{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), rc, engine.Options{Logger: quiet, GroupInitialRebalanceDelay: -1})
	if err != nil {
		rc.Close()
		t.Fatalf("open engine: %v", err)
	}
	t.Cleanup(func() { eng.Close(); rc.Close() })
	return eng, rc
}

// A Redis Cluster's nodes are warned about one by one; a standalone
// Redis's are left to the INFO warnings.
func TestClusterWarnings(t *testing.T) {
	node := func(addr, role string) engine.RedisNode {
		return engine.RedisNode{Addr: addr, Role: role, Health: "online", Up: true, UsedMemory: 10 << 20}
	}
	healthy := engine.RedisStatus{Cluster: true, Shards: []engine.RedisShard{
		{Master: "10.0.0.1:6379", Slots: 8192, Nodes: []engine.RedisNode{node("10.0.0.1:6379", "master"), node("10.0.0.4:6379", "replica")}},
		{Master: "10.0.0.2:6379", Slots: 8192, Nodes: []engine.RedisNode{node("10.0.0.2:6379", "master")}},
	}}
	if w := clusterWarnings(healthy); len(w) != 0 {
		t.Errorf("healthy cluster: %q", w)
	}
	sick := healthy
	sick.Shards = []engine.RedisShard{healthy.Shards[0], healthy.Shards[1]}
	sick.Shards[0].Nodes = []engine.RedisNode{node("10.0.0.1:6379", "master"), node("10.0.0.4:6379", "replica")}
	sick.Shards[0].Nodes[1].Up, sick.Shards[0].Nodes[1].Error, sick.Shards[0].Nodes[1].Health = false, "i/o timeout", "failed"
	sick.Shards[1].Nodes = []engine.RedisNode{node("10.0.0.2:6379", "master")}
	sick.Shards[1].Nodes[0].MaxMemory = 11 << 20
	sick.Unserved = 3
	w := clusterWarnings(sick)
	for i, want := range []string{"replica 10.0.0.4:6379 (shard of 10.0.0.1:6379) does not answer: i/o timeout", "master 10.0.0.2:6379 uses 90% of its maxmemory", "3 partitions are on slots no master serves"} {
		if len(w) != 3 || !strings.Contains(w[i], want) {
			t.Errorf("warnings %q; want [%d] to say %q", w, i, want)
		}
	}
	if w := clusterWarnings(engine.RedisStatus{Cluster: true, Error: "read the shard map: refused"}); len(w) != 1 || !strings.Contains(w[0], "refused") {
		t.Errorf("no shard map: %q", w)
	}
	sick.Cluster = false
	if w := clusterWarnings(sick); len(w) != 0 {
		t.Errorf("standalone: %q", w)
	}
}
