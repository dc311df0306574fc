package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// /api/v1/topics and /metrics carry the memory sampler's figures, and the
// status answers with a memory warning from 80% of maxmemory, critical
// from 95%.
func TestTopicsMemory(t *testing.T) {
	eng, r := openEngineWith(t, engine.Options{MemorySampleInterval: 50 * time.Millisecond}, "--maxmemory", "1gb")
	fill(t, eng, "orders", 2, 500, "", 0)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})

	var topics []topicJSON
	testbed.WaitFor(t, 10*time.Second, "the sampler to measure orders", func() bool {
		topics = nil
		get(t, h, "/api/v1/topics", &topics)
		// Once a sample sees no new records, nothing grows: with 1000
		// records in 1 GiB of maxmemory and retention.ms of a day, the
		// projection is that day.
		return len(topics) == 1 && topics[0].RedisBytesPerRecord != nil && topics[0].RedisPartitions == 2 &&
			topics[0].HotRetentionSeconds != nil && *topics[0].HotRetentionSeconds == 86400
	})
	tj := topics[0]
	// {"v":1} with key "k": tiny records, so the entry's own overhead
	// dominates; still a few tens of bytes, not kilobytes.
	if *tj.RedisBytesPerRecord < 8 || *tj.RedisBytesPerRecord > 400 || *tj.RedisBytes < 1000*8 ||
		tj.RecordBytesPerRecord == nil || *tj.RecordBytesPerRecord < 8 || tj.RedisSampledAt == nil || tj.HotSpanSeconds == nil {
		t.Fatalf("orders in Redis: %+v", tj)
	}

	w := get(t, h, "/metrics", nil)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	one := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("/metrics: %s missing or not one series", name)
		}
		if name != "korvet_redis_maxmemory_bytes" && labelValue(f.Metric[0], "topic") != "orders" {
			t.Fatalf("/metrics: %s of topic %q", name, labelValue(f.Metric[0], "topic"))
		}
		return f.Metric[0].GetGauge().GetValue()
	}
	if v := one("korvet_topic_redis_bytes"); v < 8000 {
		t.Errorf("korvet_topic_redis_bytes %v", v)
	}
	if v := one("korvet_topic_redis_bytes_per_record"); v < 8 || v > 400 {
		t.Errorf("korvet_topic_redis_bytes_per_record %v", v)
	}
	if v := one("korvet_topic_hot_retention_seconds"); v != 86400 {
		t.Errorf("korvet_topic_hot_retention_seconds %v", v)
	}
	if v := one("korvet_redis_maxmemory_bytes"); v != 1<<30 {
		t.Errorf("korvet_redis_maxmemory_bytes %v", v)
	}

	// Lower maxmemory to just above what Redis uses: warn, then critical.
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	setMax := func(pct int64) {
		t.Helper()
		info, err := eng.RedisInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := rc.Do(context.Background(), "CONFIG", "SET", "maxmemory", info.UsedMemory*100/pct); err != nil || rep.Err() != nil {
			t.Fatalf("CONFIG SET maxmemory: %v %v", err, rep.Err())
		}
	}
	var st statusJSON
	get(t, h, "/api/v1/status", &st)
	if st.Memory != nil {
		t.Fatalf("memory warning at 1 GiB maxmemory: %+v", st.Memory)
	}
	setMax(87)
	get(t, h, "/api/v1/status", &st)
	if m := st.Memory; m == nil || m.Level != "warn" || m.Percent < 80 || m.Percent >= 95 ||
		!strings.Contains(m.Message, "raise maxmemory") || !strings.Contains(m.Message, "korvet.storage.compression=zstd") {
		t.Fatalf("memory warning at ~87%%: %+v", m)
	}
	setMax(98)
	get(t, h, "/api/v1/status", &st)
	if m := st.Memory; m == nil || m.Level != "critical" || m.Percent < 95 {
		t.Fatalf("memory warning at ~98%%: %+v", m)
	}
	if _, err := rc.Do(context.Background(), "CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	st = statusJSON{}
	get(t, h, "/api/v1/status", &st)
	if st.Memory != nil {
		t.Errorf("memory warning without maxmemory: %+v", st.Memory)
	}
}

func TestMemoryWarningLevels(t *testing.T) {
	for _, c := range []struct {
		used, max int64
		level     string
	}{
		{79, 100, ""}, {80, 100, "warn"}, {94, 100, "warn"}, {95, 100, "critical"}, {120, 100, "critical"},
		{1 << 40, 0, ""}, // no maxmemory: nothing to warn about here
	} {
		w := memoryWarning(c.used, c.max)
		got := ""
		if w != nil {
			got = w.Level
		}
		if got != c.level {
			t.Errorf("used %d of %d: level %q, want %q", c.used, c.max, got, c.level)
		}
	}
}
