package kafkawire_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// sensorJSON is a ~690-byte JSON document as Python's json.dumps writes
// it (a space after ':' and ','), varying with i like a sensor feed.
func sensorJSON(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 11))
	var b strings.Builder
	fmt.Fprintf(&b, `{"sensor_id": "sensor-%04d", "site": "greenhouse-%d", "ts": "2026-12-02T07:%02d:%02d.%06dZ", `,
		i%500, i%7, i/60%60, i%60, rng.IntN(1000000))
	fmt.Fprintf(&b, `"temperature_c": %.2f, "humidity_pct": %.1f, "pressure_hpa": %.2f, "co2_ppm": %d, `,
		15+rng.Float64()*15, 30+rng.Float64()*50, 990+rng.Float64()*40, 400+rng.IntN(800))
	fmt.Fprintf(&b, `"battery": {"voltage": %.3f, "percent": %d, "charging": %t}, `, 3+rng.Float64(), rng.IntN(101), rng.IntN(2) == 0)
	fmt.Fprintf(&b, `"location": {"lat": %.6f, "lon": %.6f, "alt_m": %.1f}, `, 52+rng.Float64(), 13+rng.Float64(), 30+rng.Float64()*20)
	fmt.Fprintf(&b, `"unit_system": "metric", "model": "SHT45-AD1B", "vendor": "Sensirion AG", "gateway": "gw-%02d.lan", `, rng.IntN(8))
	fmt.Fprintf(&b, `"firmware": "v%d.%d.%d", "tags": ["indoor", "zone-%d", "calibrated"], `, 2, rng.IntN(5), rng.IntN(20), rng.IntN(12))
	fmt.Fprintf(&b, `"readings": [%.3f, %.3f, %.3f, %.3f, %.3f, %.3f], `, rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64())
	fmt.Fprintf(&b, `"status": "%s", "uptime_s": %d, "rssi_dbm": %d, "error_count": %d, "last_maintenance": "2026-%02d-%02d", `,
		[]string{"ok", "ok", "ok", "degraded"}[rng.IntN(4)], rng.IntN(10000000), -30-rng.IntN(60), rng.IntN(5), 1+rng.IntN(12), 1+rng.IntN(28))
	fmt.Fprintf(&b, `"notes": "routine reading from the %s bed, fan %s"}`, []string{"north", "south", "east", "west"}[rng.IntN(4)], []string{"on", "off"}[rng.IntN(2)])
	return []byte(b.String())
}

// sensorRecords are n sensor documents for topic, keyed by sensor (500
// sensors), with a header, numbered from first.
func sensorRecords(topic string, first, n int) []*kgo.Record {
	now := time.Now().Truncate(time.Millisecond)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		j := first + i
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "sensor-%04d", j%500), Value: sensorJSON(j), Timestamp: now,
			Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("test")}}}
	}
	return recs
}

// consumeAll is consumeN with a deadline for the thousands of records
// these tests read, which take a while under -race on a busy machine.
func consumeAll(t testing.TB, b *broker, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := b.client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxT(t, 3*time.Minute)
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	return got
}

func createTopicWith(t *testing.T, b *broker, name string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), partitions, 1, cfg, name); err != nil {
		t.Fatal(err)
	}
}

// streamKeys are the Redis keys of the local segments of topic's
// partition 0.
func streamKeys(b *broker, topic string) []string {
	var out []string
	for _, sg := range b.eng.Topic(topic).Partition(0).Segments() {
		if sg.Local {
			out = append(out, fmt.Sprintf("korvet:storage:local:%s:0:%d", topic, sg.ID))
		}
	}
	return out
}

// valueForms counts the value forms of the entries of topic's partition
// 0 from offset from on: field name ("__value", "__zstd.<v>", "{" when
// flattened) -> entries.
func valueForms(t *testing.T, b *broker, topic string, from int64) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, key := range streamKeys(b, topic) {
		r, err := b.rc.Do(ctxT(t, 10*time.Second), "XRANGE", key, fmt.Sprintf("%d-0", from), "+")
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range r.Elems(nil) {
			pair := ent.Elems(nil)
			fields := pair[1].Elems(nil)
			for i := 0; i+1 < len(fields); i += 2 {
				switch n := string(fields[i].Bytes()); {
				case n == "__value" || strings.HasPrefix(n, "__zstd."):
					out[n]++
				case !strings.HasPrefix(n, "__"):
					out["{"]++
					i = len(fields)
				}
			}
		}
	}
	return out
}

// memoryPerValue is the Redis memory of topic's local segment streams
// (MEMORY USAGE, every entry counted) over the value bytes of recs.
func memoryPerValue(t *testing.T, b *broker, topic string, recs []*kgo.Record) (ratio, perRecord float64) {
	t.Helper()
	var mem int64
	for _, key := range streamKeys(b, topic) {
		r, err := b.rc.Do(ctxT(t, 10*time.Second), "MEMORY", "USAGE", key, "SAMPLES", "0")
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.Int()
		if err != nil {
			t.Fatal(err)
		}
		mem += n
	}
	var vals int64
	for _, r := range recs {
		vals += int64(len(r.Value))
	}
	return float64(mem) / float64(vals), float64(mem) / float64(len(recs))
}

func alterConfig(t *testing.T, b *broker, topic, name, value string) {
	t.Helper()
	rs, err := b.admin().AlterTopicConfigs(ctxT(t, 10*time.Second), []kadm.AlterConfig{{Name: name, Value: &value}}, topic)
	if err == nil {
		_, err = rs.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("alter %s=%s: %v", name, value, err)
	}
}

// latestByKey is the last record of each key.
func latestByKey(recs []*kgo.Record) map[string]*kgo.Record {
	m := map[string]*kgo.Record{}
	for _, r := range recs {
		m[string(r.Key)] = r
	}
	return m
}

// TestZstdAtRest: a topic with korvet.storage.compression=zstd stores
// values compressed, trains its dictionary in the background from its own
// records and uses it for later ones; fetch, KV reads and compaction give
// every value back byte for byte, across config switches and a restart.
func TestZstdAtRest(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Index: engine.IndexOptions{Dir: t.TempDir()}})
	createTopicWith(t, b, "zs", 1, map[string]string{"korvet.storage.compression": "zstd", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	first := sensorRecords("zs", 0, 5000)
	for i := 0; i < len(first); i += 500 {
		produceAll(t, cl, first[i:i+500])
	}
	tp := b.eng.Topic("zs")
	testbed.WaitFor(t, 30*time.Second, "a trained dictionary", func() bool { return tp.ZstdDictVersion() >= 1 })
	more := sensorRecords("zs", 5000, 2000)
	produceAll(t, cl, more)
	forms := valueForms(t, b, "zs", 5000)
	if forms["__zstd.1"] != len(more) {
		t.Fatalf("records produced after the dictionary: value forms %v, want all %d in __zstd.1", forms, len(more))
	}
	all := append(append([]*kgo.Record(nil), first...), more...)
	checkConsumed(t, all, consumeAll(t, b, "zs", len(all)))
	// KV reads.
	for k, want := range latestByKey(all) {
		got, err := b.eng.KV().Get(ctxT(t, 10*time.Second), "zs", []byte(k))
		if err != nil || !bytes.Equal(got.Value, want.Value) || got.Offset != want.Offset {
			t.Fatalf("KV get %s: offset %d (want %d), value equal %v, %v", k, got.Offset, want.Offset, bytes.Equal(got.Value, want.Value), err)
		}
	}

	// Switching the config affects new records only; everything stays
	// readable.
	alterConfig(t, b, "zs", "korvet.storage.compression", "none")
	plain := sensorRecords("zs", 7000, 100)
	produceAll(t, cl, plain)
	alterConfig(t, b, "zs", "korvet.storage.compression", "zstd")
	again := sensorRecords("zs", 7100, 100)
	produceAll(t, cl, again)
	// Uncompressed, the Python-style documents are flattened with a
	// whitespace layout ("{" in valueForms).
	if f := valueForms(t, b, "zs", 7000); f["{"] != 100 || f["__zstd.1"] != 100 {
		t.Fatalf("after none then zstd: value forms %v, want 100 flattened ({) and 100 __zstd.1", f)
	}
	all = append(append(all, plain...), again...)
	checkConsumed(t, all, consumeAll(t, b, "zs", len(all)))

	// A restart: a fresh engine loads the dictionary from Redis when it
	// meets an entry naming it.
	b.restart()
	checkConsumed(t, all, consumeAll(t, b, "zs", len(all)))

	// Compaction keeps each key's latest record, byte for byte.
	res, err := b.eng.CompactTopic(ctxT(t, 60*time.Second), "zs")
	if err != nil {
		t.Fatal(err)
	}
	latest := latestByKey(all)
	if res.Deleted == 0 {
		t.Fatalf("compaction deleted nothing: %+v", res)
	}
	cc := b.client(kgo.ConsumeTopics("zs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t, 3*time.Minute)
	seen := map[string]bool{}
	for len(seen) < len(latest) {
		fs := cc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after compaction: %d of %d keys seen", len(seen), len(latest))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		for _, r := range fs.Records() {
			want := latest[string(r.Key)]
			if r.Offset == want.Offset {
				if !bytes.Equal(r.Value, want.Value) {
					t.Fatalf("compacted %s: value changed", r.Key)
				}
				seen[string(r.Key)] = true
			}
		}
	}
	for k, want := range latest {
		got, err := b.eng.KV().Get(ctxT(t, 10*time.Second), "zs", []byte(k))
		if err != nil || !bytes.Equal(got.Value, want.Value) {
			t.Fatalf("KV get %s after compaction and restart: %v", k, err)
		}
	}
}

// TestZstdAtRestMemory measures the Redis memory of 700-byte JSON records
// (keyed by sensor, no headers) stored raw, zstd without a dictionary and
// zstd with the topic's trained one, and holds the last below 0.35x of
// the value bytes.
func TestZstdAtRestMemory(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 5000
	sensorRecords := func(topic string, first, n int) []*kgo.Record {
		recs := sensorRecords(topic, first, n)
		for _, r := range recs {
			r.Headers = nil
		}
		return recs
	}
	createTopicWith(t, b, "mraw", 1, nil)
	raw := sensorRecords("mraw", 0, n)
	produceAll(t, cl, raw)
	rawRatio, rawPer := memoryPerValue(t, b, "mraw", raw)

	// Below the records a dictionary needs: no dictionary (version 0).
	createTopicWith(t, b, "mplain", 1, map[string]string{"korvet.storage.compression": "zstd"})
	plain := sensorRecords("mplain", 0, 900)
	produceAll(t, cl, plain)
	plainRatio, plainPer := memoryPerValue(t, b, "mplain", plain)

	// Train on a first batch, drop it, and measure what follows alone.
	createTopicWith(t, b, "mdict", 1, map[string]string{"korvet.storage.compression": "zstd"})
	produceAll(t, cl, sensorRecords("mdict", 100000, 2000))
	testbed.WaitFor(t, 30*time.Second, "a trained dictionary", func() bool { return b.eng.Topic("mdict").ZstdDictVersion() >= 1 })
	if _, err := b.eng.Topic("mdict").Partition(0).DeleteRecords(ctxT(t, 10*time.Second), 2000); err != nil {
		t.Fatal(err)
	}
	dict := sensorRecords("mdict", 0, n)
	produceAll(t, cl, dict)
	if f := valueForms(t, b, "mdict", 2000); f["__zstd.1"] != n {
		t.Fatalf("value forms %v, want all %d in __zstd.1", f, n)
	}
	dictRatio, dictPer := memoryPerValue(t, b, "mdict", dict)
	avg := 0
	for _, r := range dict {
		avg += len(r.Value)
	}
	t.Logf("Redis memory of %d-byte JSON records (key and timestamp included): raw %.0f B/record (%.2fx the value), zstd without dictionary %.0f B (%.2fx), zstd with dictionary %.0f B (%.2fx)",
		avg/n, rawPer, rawRatio, plainPer, plainRatio, dictPer, dictRatio)
	if dictRatio > 0.35 {
		t.Fatalf("zstd with a dictionary: %.2fx the value bytes, want <= 0.35x", dictRatio)
	}
	got := consumeAll(t, b, "mdict", n, kgo.ConsumeResetOffset(kgo.NewOffset().At(2000)))
	for i, g := range got[:n] {
		if g.Offset != dict[i].Offset || !bytes.Equal(g.Value, dict[i].Value) || !bytes.Equal(g.Key, dict[i].Key) {
			t.Fatalf("record at offset %d (want %d): key or value changed", g.Offset, dict[i].Offset)
		}
	}
}

// TestZstdAtRestCold: archived compressed segments hold the original
// value bytes in Parquet: consumers read them back exact from the cold
// tier once the streams are gone.
func TestZstdAtRestCold(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Cold: enginetest.Cold(t, enginetest.LocalWarehouse(t)), TieringInterval: 100 * time.Millisecond})
	createTopicWith(t, b, "zcold", 2, map[string]string{"korvet.storage.compression": "zstd", "remote.storage.enable": "true",
		"segment.bytes": "20000", "local.retention.ms": "0", "retention.ms": "-1"})
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := sensorRecords("zcold", 0, 200)
	for i, r := range recs {
		r.Partition = int32(i % 2)
	}
	produceAll(t, cl, recs[:100])
	if v, err := b.eng.TrainZstdDict(ctxT(t, 30*time.Second), "zcold"); err != nil || v != 1 {
		t.Fatalf("train: version %d, %v", v, err)
	}
	for i := 100; i < len(recs); i += 10 {
		produceAll(t, cl, recs[i:i+10])
	}
	if f := valueForms(t, b, "zcold", 50); f["__zstd.1"] == 0 {
		t.Fatalf("no record stored with the dictionary: %v", f)
	}
	waitLocalSegments(t, b, "zcold", 30*time.Second)
	checkConsumed(t, recs, consumeAll(t, b, "zcold", len(recs)))
	b.restart()
	checkConsumed(t, recs, consumeAll(t, b, "zcold", len(recs)))
}

// BenchmarkProduceZstdAtRest compares the produce rate of 700-byte JSON
// records (uncompressed on the wire, as most homelab producers send)
// into a topic stored raw and one stored with zstd and a trained
// dictionary, and reports Redis bytes per record of each.
func BenchmarkProduceZstdAtRest(b *testing.B) {
	br := startBroker(b, engine.Options{AutoCreateTopics: true})
	cl := br.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	for _, mode := range []string{"none", "zstd"} {
		topic := "bench-" + mode
		cfg := map[string]*string{"korvet.storage.compression": &mode}
		if _, err := br.admin().CreateTopic(ctxT(b, 10*time.Second), 1, 1, cfg, topic); err != nil {
			b.Fatal(err)
		}
		if mode == "zstd" {
			produceAll(b, cl, sensorRecords(topic, 1000000, 2000))
			if _, err := br.eng.TrainZstdDict(ctxT(b, 30*time.Second), topic); err != nil {
				b.Fatal(err)
			}
		}
	}
	recs := map[string][]*kgo.Record{}
	for _, mode := range []string{"none", "zstd"} {
		recs[mode] = sensorRecords("bench-"+mode, 0, 20000)
		for _, r := range recs[mode] {
			r.Headers = nil
		}
	}
	for _, mode := range []string{"none", "zstd"} {
		b.Run(mode, func(b *testing.B) {
			n := 0
			start := time.Now()
			for b.Loop() {
				rs := recs[mode]
				var failed atomic.Value
				for _, r := range rs {
					c := *r
					cl.Produce(context.Background(), &c, func(_ *kgo.Record, err error) {
						if err != nil {
							failed.Store(err)
						}
					})
				}
				if err := cl.Flush(ctxT(b, time.Minute)); err != nil {
					b.Fatal(err)
				}
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				n += len(rs)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// TestZstdAtRestKcat: librdkafka (kcat) produces to and consumes from a
// zstd topic, before and after its dictionary, byte for byte.
func TestZstdAtRestKcat(t *testing.T) {
	kcat := kcatPath(t)
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	createTopicWith(t, b, "kz", 1, map[string]string{"korvet.storage.compression": "zstd"})
	var want []string
	produce := func(first, n int, codec string) {
		var in bytes.Buffer
		for i := first; i < first+n; i++ {
			line := fmt.Sprintf("sensor-%04d\t%s", i%500, sensorJSON(i))
			want = append(want, line)
			in.WriteString(line + "\n")
		}
		testbed.RunCmd(t, 60*time.Second, in.Bytes(), kcat, "-P", "-b", b.addr, "-t", "kz", "-K", "\t", "-z", codec)
	}
	produce(0, 300, "none")
	if _, err := b.eng.TrainZstdDict(ctxT(t, 30*time.Second), "kz"); err != nil {
		t.Fatal(err)
	}
	produce(300, 300, "lz4")
	if f := valueForms(t, b, "kz", 300); f["__zstd.1"] != 300 {
		t.Fatalf("kcat's records after the dictionary: value forms %v", f)
	}
	out := testbed.RunCmd(t, 60*time.Second, nil, kcat, "-C", "-b", b.addr, "-t", "kz", "-o", "beginning", "-e", "-f", "%k\t%s\n")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("kcat consumed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: kcat read %q, want %q", i, got[i], want[i])
		}
	}
}

// TestZstdAtRestTwoBrokers: the dictionary one broker trains is read by
// another from Redis: after the first leaves, the second serves the
// first's compressed records exact and compresses new ones with it.
func TestZstdAtRestTwoBrokers(t *testing.T) {
	bs := startCluster(t, 2, engine.Options{}, map[string]int32{"zc": 1})
	alterConfig(t, bs[0], "zc", "korvet.storage.compression", "zstd")
	ls := settledLeaders(t, bs, "zc", 1)
	leader, other := bs[ls[0][0]-1], bs[ls[0][0]%2]
	testbed.WaitFor(t, 10*time.Second, "the config on both brokers", func() bool {
		return leader.eng.Topic("zc").ConfigValue("korvet.storage.compression") == "zstd" &&
			other.eng.Topic("zc").ConfigValue("korvet.storage.compression") == "zstd"
	})
	cl := leader.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := sensorRecords("zc", 0, 1200)
	produceAll(t, cl, recs)
	testbed.WaitFor(t, 30*time.Second, "the leader's trained dictionary", func() bool { return leader.eng.Topic("zc").ZstdDictVersion() == 1 })
	more := sensorRecords("zc", 1200, 300)
	produceAll(t, cl, more)
	if f := valueForms(t, leader, "zc", 1200); f["__zstd.1"] != len(more) {
		t.Fatalf("value forms %v, want %d in __zstd.1", f, len(more))
	}
	recs = append(recs, more...)
	if v := other.eng.Topic("zc").ZstdDictVersion(); v != 0 {
		t.Fatalf("the other broker uses dictionary %d before it leads", v)
	}

	leader.stop()
	testbed.WaitFor(t, 30*time.Second, "the other broker leading", func() bool { return other.eng.Topic("zc").Partition(0).IsLeader() })
	checkConsumed(t, recs, consumeAll(t, other, "zc", len(recs)))
	ocl := other.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, ocl, sensorRecords("zc", 1500, 10)) // its flush loop asks for the dictionary
	testbed.WaitFor(t, 30*time.Second, "the dictionary on the other broker", func() bool { return other.eng.Topic("zc").ZstdDictVersion() == 1 })
	last := sensorRecords("zc", 1510, 100)
	produceAll(t, ocl, last)
	if f := valueForms(t, other, "zc", 1510); f["__zstd.1"] != len(last) {
		t.Fatalf("records the other broker wrote: value forms %v, want %d in __zstd.1", f, len(last))
	}
}

// TestZstdAtRestShare: a share group acquires compressed records (read by
// its Lua script, decoded by the broker) byte for byte.
func TestZstdAtRestShare(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	createTopicWith(t, b, "zsh", 1, map[string]string{"korvet.storage.compression": "zstd"})
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := sensorRecords("zsh", 0, 200)
	produceAll(t, cl, recs[:100])
	if _, err := b.eng.TrainZstdDict(ctxT(t, 30*time.Second), "zsh"); err != nil {
		t.Fatal(err)
	}
	produceAll(t, cl, recs[100:])
	if f := valueForms(t, b, "zsh", 100); f["__zstd.1"] != 100 {
		t.Fatalf("value forms %v", f)
	}
	ctx := ctxT(t, 30*time.Second)
	if err := b.eng.IncrementalAlterGroupConfigs(ctx, "sg", []engine.ConfigOp{{Name: "share.auto.offset.reset", Value: "earliest"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: "sg", MemberID: "m", Topics: []string{"zsh"}}); err != nil {
		t.Fatal(err)
	}
	var got int
	for got < len(recs) {
		sr, err := b.eng.ShareAcquire(ctx, "sg", "m", b.eng.Topic("zsh").Partition(0), 500, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(sr.Records) == 0 {
			t.Fatalf("share acquire: nothing after %d of %d records", got, len(recs))
		}
		for _, r := range sr.Records {
			if want := recs[r.Offset]; !bytes.Equal(r.Value, want.Value) || !bytes.Equal(r.Key, want.Key) {
				t.Fatalf("share-acquired record %d: key or value changed", r.Offset)
			}
			got++
		}
		sr.Release()
	}
}

// BenchmarkProduceZstdShort compares the produce rate of 100-byte log
// lines into a raw topic, a zstd topic with the default
// korvet.storage.compression.min.bytes (the lines stay uncompressed) and
// one with min.bytes=0 (every line compressed with the trained
// dictionary), in alternating rounds so that a busy machine's swings hit
// every mode alike.
func BenchmarkProduceZstdShort(b *testing.B) {
	br := startBroker(b, engine.Options{AutoCreateTopics: true})
	cl := br.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	modes := map[string]map[string]*string{"none": nil, "zstd": {}, "zstd-all": {}}
	zstd, zero := "zstd", "0"
	modes["zstd"]["korvet.storage.compression"] = &zstd
	modes["zstd-all"]["korvet.storage.compression"] = &zstd
	modes["zstd-all"]["korvet.storage.compression.min.bytes"] = &zero
	line := func(i int) []byte {
		v := fmt.Appendf(nil, "2026-12-02T07:%02d:%02d.%03dZ INFO http GET /api/v1/items/%d 200 %dms ua=curl/8.5 req=%08x",
			i/60000%60, i/1000%60, i%1000, i*7919%100000, i%900+1, uint32(i)*2654435761)
		for len(v) < 100 {
			v = append(v, ' ')
		}
		return v[:100]
	}
	recs := func(topic string, first, n int) []*kgo.Record {
		out := make([]*kgo.Record, n)
		for i := range out {
			out[i] = &kgo.Record{Topic: topic, Value: line(first + i)}
		}
		return out
	}
	for _, mode := range []string{"none", "zstd", "zstd-all"} {
		topic := "short-" + mode
		if _, err := br.admin().CreateTopic(ctxT(b, 10*time.Second), 1, 1, modes[mode], topic); err != nil {
			b.Fatal(err)
		}
		if mode != "none" {
			produceAll(b, cl, recs(topic, 1000000, 3000))
			if _, err := br.eng.TrainZstdDict(ctxT(b, 30*time.Second), topic); err != nil {
				b.Fatal(err)
			}
		}
	}
	for round := range 3 {
		for _, mode := range []string{"none", "zstd", "zstd-all"} {
			b.Run(fmt.Sprintf("round%d/%s", round, mode), func(b *testing.B) {
				rs := recs("short-"+mode, 0, 30000)
				n := 0
				start := time.Now()
				for b.Loop() {
					var failed atomic.Value
					for _, r := range rs {
						c := *r
						cl.Produce(context.Background(), &c, func(_ *kgo.Record, err error) {
							if err != nil {
								failed.Store(err)
							}
						})
					}
					if err := cl.Flush(ctxT(b, time.Minute)); err != nil {
						b.Fatal(err)
					}
					if err, _ := failed.Load().(error); err != nil {
						b.Fatal(err)
					}
					n += len(rs)
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
			})
		}
	}
}
