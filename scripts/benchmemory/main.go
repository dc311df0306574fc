// Command benchmemory measures what records take in korvet's Redis, per
// workload and storage mode, with franz-go (and kcat for produce when
// -kcat names it). scripts/bench-memory.sh starts Redis and korvet and
// runs it.
//
//	go run ./scripts/benchmemory -brokers 127.0.0.1:9092 -redis 127.0.0.1:6379 -http 127.0.0.1:8080 -records 100000
//
// For each workload ((a) 1 KiB compact JSON, (b) ~700-byte JSON with
// spaces as Python's json.dumps writes it, (c) 256 random bytes, (d)
// 100-byte log lines, (e) ~1 KiB IoT JSON) and each mode (none: korvet.storage.compression=none,
// zstd: =zstd) it creates a topic, produces -warmup records (so that a
// zstd topic can train its dictionary; it waits for the dictionary), then
// measures over -records more: Redis's used_memory delta and the exact
// MEMORY USAGE delta of the topic's keys per record, korvet's own sampler
// figure (/api/v1/topics), the produce rate, then the fetch rate of the
// whole topic. The 100-byte log lines also run as zstd-all: zstd with
// korvet.storage.compression.min.bytes=0, every value compressed (with
// the default, 32, they are too; before it was 128 they were not). A mode korvet refuses as an unknown topic config prints
// "n/a". Prints a table and the targets next to the figures.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/resp"
)

type options struct {
	brokers  []string
	redis    string
	http     string
	keyspace string
	records  int
	warmup   int
	kcat     string
	only     string
	dictWait time.Duration
}

const (
	compressionConfig = "korvet.storage.compression"
	minBytesConfig    = "korvet.storage.compression.min.bytes"
)

func main() {
	var o options
	var brokers string
	flag.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flag.StringVar(&o.redis, "redis", "127.0.0.1:6379", "korvet's Redis, host:port")
	flag.StringVar(&o.http, "http", "127.0.0.1:8080", "korvet's HTTP listener, host:port (for its own per-record figure)")
	flag.StringVar(&o.keyspace, "keyspace", "korvet", "korvet's redis.keyspace")
	flag.IntVar(&o.records, "records", 100_000, "records measured per workload and mode")
	flag.IntVar(&o.warmup, "warmup", 3000, "records produced first (dictionary training), not measured")
	flag.StringVar(&o.kcat, "kcat", "", "path of kcat: also time producing the text workloads with it")
	flag.StringVar(&o.only, "workloads", "a,b,c,d,e", "which workloads to run")
	flag.DurationVar(&o.dictWait, "dict-wait", 60*time.Second, "how long to wait for a zstd topic's dictionary")
	flag.Parse()
	o.brokers = strings.Split(brokers, ",")
	if o.records < 1 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "benchmemory: -records must be positive, -warmup not negative")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchmemory:", err)
		os.Exit(1)
	}
}

type workload struct {
	id, name string
	gen      func(r *rand.Rand, i int) []byte
	text     bool // newline-free: kcat can produce it line by line
}

type result struct {
	w          workload
	mode       string
	na         string // why the mode could not run
	valueBytes float64
	usedPer    float64 // used_memory delta per record
	usagePer   float64 // MEMORY USAGE delta per record
	samplerPer float64 // korvet's /api/v1/topics figure; 0: none
	produceRPS float64
	fetchRPS   float64
	kcatRPS    float64
	dictNote   string
}

func run(ctx context.Context, o options) error {
	rc, err := resp.New("redis://"+o.redis+"/0", resp.Options{})
	if err != nil {
		return fmt.Errorf("redis client: %w", err)
	}
	defer rc.Close()
	adm, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)

	all := []workload{
		{"a", "1 KiB compact JSON", func(r *rand.Rand, i int) []byte { return sensorJSON(r, i, false, 1024) }, true},
		{"b", "700 B JSON, spaces", func(r *rand.Rand, i int) []byte { return sensorJSON(r, i, true, 700) }, true},
		{"c", "256 B random binary", func(r *rand.Rand, _ int) []byte {
			b := make([]byte, 256)
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			return b
		}, false},
		{"d", "100 B log lines", logLine, true},
		{"e", "1 KiB IoT JSON", iotJSON, true},
	}
	var results []result
	for _, w := range all {
		if !strings.Contains(o.only, w.id) {
			continue
		}
		modes := []string{"none", "zstd"}
		if w.id == "d" {
			modes = append(modes, "zstd-all") // short values: also with min.bytes=0
		}
		for _, mode := range modes {
			res, err := measure(ctx, o, rc, ka, w, mode)
			if err != nil {
				return fmt.Errorf("(%s) %s, %s: %w", w.id, w.name, mode, err)
			}
			results = append(results, res)
			printRow(res)
		}
	}
	printTable(o, results)
	return nil
}

func measure(ctx context.Context, o options, rc *resp.Client, ka *kadm.Client, w workload, mode string) (result, error) {
	res := result{w: w, mode: mode}
	topic := fmt.Sprintf("mem-%s-%s-%d", w.id, mode, time.Now().Unix())
	cfg := map[string]*string{compressionConfig: &mode}
	if mode == "zstd-all" {
		z, zero := "zstd", "0"
		cfg = map[string]*string{compressionConfig: &z, minBytesConfig: &zero}
	}
	cr, err := ka.CreateTopic(ctx, 1, 1, cfg, topic)
	if err == nil {
		err = cr.Err
	}
	if err != nil {
		if !errors.Is(err, kerr.InvalidConfig) && !strings.Contains(err.Error(), compressionConfig) {
			return res, fmt.Errorf("create topic: %w", err)
		}
		if mode != "none" {
			res.na = "n/a (needs " + compressionConfig + ")"
			return res, nil
		}
		// A korvet without the config stores raw (or flattened) anyway.
		if cr, err = ka.CreateTopic(ctx, 1, 1, nil, topic); err == nil {
			err = cr.Err
		}
		if err != nil {
			return res, fmt.Errorf("create topic: %w", err)
		}
		res.mode = "none (no config)"
	}
	rng := rand.New(rand.NewPCG(1, uint64(w.id[0])))
	values := make([][]byte, o.warmup+o.records)
	var total int
	for i := range values {
		values[i] = w.gen(rng, i)
		if i >= o.warmup {
			total += len(values[i])
		}
	}
	res.valueBytes = float64(total) / float64(o.records)

	if _, err := produce(ctx, o, topic, values[:o.warmup]); err != nil {
		return res, err
	}
	if mode != "none" {
		res.dictNote = waitDict(ctx, o, rc, topic)
	}
	usedBefore, err := usedMemory(ctx, rc)
	if err != nil {
		return res, err
	}
	usageBefore, err := memoryUsage(ctx, o, rc, topic)
	if err != nil {
		return res, err
	}
	d, err := produce(ctx, o, topic, values[o.warmup:])
	if err != nil {
		return res, err
	}
	done := time.Now()
	res.produceRPS = float64(o.records) / d.Seconds()
	usedAfter, err := usedMemory(ctx, rc)
	if err != nil {
		return res, err
	}
	usageAfter, err := memoryUsage(ctx, o, rc, topic)
	if err != nil {
		return res, err
	}
	res.usedPer = float64(usedAfter-usedBefore) / float64(o.records)
	res.usagePer = float64(usageAfter-usageBefore) / float64(o.records)
	res.samplerPer = samplerFigure(ctx, o, topic, done)

	n := len(values)
	start := time.Now()
	if err := consume(ctx, o, topic, n); err != nil {
		return res, err
	}
	res.fetchRPS = float64(n) / time.Since(start).Seconds()

	if o.kcat != "" && w.text {
		res.kcatRPS, err = kcatProduce(ctx, o, topic, values[o.warmup:])
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// produce sends values with one franz-go client (acks=all, no client
// compression: most home producers send uncompressed) and returns how
// long until every record was acknowledged.
func produce(ctx context.Context, o options, topic string, values [][]byte) (time.Duration, error) {
	if len(values) == 0 {
		return 0, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	start := time.Now()
	errc := make(chan error, 1)
	for _, v := range values {
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	select {
	case err := <-errc:
		return 0, fmt.Errorf("produce: %w", err)
	default:
	}
	return time.Since(start), nil
}

// consume reads n records of topic from its start.
func consume(ctx context.Context, o options, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(4<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consume: %d of %d records: %w", got, n, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return fmt.Errorf("consume: %w", errs[0].Err)
		}
		got += fs.NumRecords()
	}
	return nil
}

// kcatProduce times kcat producing values (one per line) into topic.
func kcatProduce(ctx context.Context, o options, topic string, values [][]byte) (float64, error) {
	var in bytes.Buffer
	for _, v := range values {
		in.Write(v)
		in.WriteByte('\n')
	}
	cmd := exec.CommandContext(ctx, o.kcat, "-P", "-b", strings.Join(o.brokers, ","), "-t", topic,
		"-X", "compression.codec=none", "-X", "linger.ms=1")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("kcat: %w: %s", err, stderr.String())
	}
	return float64(len(values)) / time.Since(start).Seconds(), nil
}

func usedMemory(ctx context.Context, rc *resp.Client) (int64, error) {
	r, err := rc.Do(ctx, "INFO", "memory")
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(r.Bytes()))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory has no used_memory")
}

// memoryUsage sums MEMORY USAGE (exact: SAMPLES 0) of every key of the
// topic: its segment streams and partition keys.
func memoryUsage(ctx context.Context, o options, rc *resp.Client, topic string) (int64, error) {
	var sum int64
	cursor := "0"
	for {
		r, err := rc.Do(ctx, "SCAN", cursor, "MATCH", o.keyspace+":*"+topic+"*", "COUNT", 1000)
		if err != nil {
			return 0, fmt.Errorf("SCAN: %w", err)
		}
		parts := r.Elems(nil)
		if len(parts) != 2 {
			return 0, errors.New("SCAN: unexpected reply")
		}
		for _, k := range parts[1].Elems(nil) {
			u, err := rc.Do(ctx, "MEMORY", "USAGE", k.Bytes(), "SAMPLES", 0)
			if err != nil {
				return 0, fmt.Errorf("MEMORY USAGE: %w", err)
			}
			n, _ := u.Int()
			sum += n
		}
		cursor = string(parts[0].Bytes())
		if cursor == "0" {
			return sum, nil
		}
	}
}

// waitDict polls until a key of the topic's zstd dictionary holds one
// (korvet trains it in the background), and says how it went.
func waitDict(ctx context.Context, o options, rc *resp.Client, topic string) string {
	deadline := time.Now().Add(o.dictWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r, err := rc.Do(ctx, "SCAN", "0", "MATCH", o.keyspace+":*zdict*"+topic+"*", "COUNT", 100000)
		if err == nil {
			if parts := r.Elems(nil); len(parts) == 2 {
				for _, k := range parts[1].Elems(nil) {
					if n, err := rc.Do(ctx, "HLEN", k.Bytes()); err == nil {
						if l, _ := n.Int(); l > 1 {
							return "dictionary trained"
						}
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Sprintf("no dictionary after %s: plain zstd", o.dictWait)
}

// samplerFigure asks korvet for its own bytes per record of topic, once
// sampled after since; 0 when it does not say within 30 s.
func samplerFigure(ctx context.Context, o options, topic string, since time.Time) float64 {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if v, ok := topicFigure(hc, o, topic, since); ok {
			return v
		}
		time.Sleep(250 * time.Millisecond)
	}
	return 0
}

func topicFigure(hc *http.Client, o options, topic string, since time.Time) (float64, bool) {
	r, err := hc.Get("http://" + o.http + "/api/v1/topics")
	if err != nil {
		return 0, false
	}
	defer r.Body.Close()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil || r.StatusCode != http.StatusOK {
		return 0, false
	}
	var ts []struct {
		Name      string     `json:"name"`
		PerRecord *float64   `json:"redis_bytes_per_record"`
		At        *time.Time `json:"redis_sampled_at"`
	}
	if json.Unmarshal(body, &ts) != nil {
		return 0, false
	}
	for _, t := range ts {
		if t.Name == topic && t.PerRecord != nil && t.At != nil && t.At.After(since) {
			return *t.PerRecord, true
		}
	}
	return 0, false
}

func printRow(r result) {
	if r.na != "" {
		fmt.Printf("(%s) %-20s %-6s %s\n", r.w.id, r.w.name, r.mode, r.na)
		return
	}
	fmt.Printf("(%s) %-20s %-6s value %.0f B: used_memory %.0f B/rec, MEMORY USAGE %.0f B/rec, korvet %.0f B/rec; produce %.0f rec/s, fetch %.0f rec/s %s\n",
		r.w.id, r.w.name, r.mode, r.valueBytes, r.usedPer, r.usagePer, r.samplerPer, r.produceRPS, r.fetchRPS, r.dictNote)
}

func printTable(o options, rs []result) {
	fmt.Printf("\n== Redis bytes per record (%d records per row, after %d warm-up records; 1 partition; franz-go, acks=all, no client compression)\n", o.records, o.warmup)
	fmt.Printf("%-24s %-18s %8s %18s %18s %10s %12s %12s %12s\n", "workload", "mode", "value B", "used_memory B/rec", "MEMORY USAGE B/rec", "korvet", "produce/s", "fetch/s", "kcat prod/s")
	for _, r := range rs {
		label := "(" + r.w.id + ") " + r.w.name
		if r.na != "" {
			fmt.Printf("%-24s %-18s %s\n", label, r.mode, r.na)
			continue
		}
		kc := "-"
		if r.kcatRPS > 0 {
			kc = fmt.Sprintf("%.0f", r.kcatRPS)
		}
		fmt.Printf("%-24s %-18s %8.0f %10.0f (%4.2fx) %10.0f (%4.2fx) %10.0f %12.0f %12.0f %12s\n", label, r.mode, r.valueBytes,
			r.usedPer, r.usedPer/r.valueBytes, r.usagePer, r.usagePer/r.valueBytes, r.samplerPer, r.produceRPS, r.fetchRPS, kc)
	}
	fmt.Println("\n== targets (figures from this run)")
	by := map[string]map[string]result{}
	for _, r := range rs {
		if by[r.w.id] == nil {
			by[r.w.id] = map[string]result{}
		}
		m := r.mode
		if strings.HasPrefix(m, "none") {
			m = "none"
		}
		by[r.w.id][m] = r
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		none, okN := by[id]["none"]
		z, okZ := by[id]["zstd"]
		if !okN && !okZ {
			continue
		}
		name := "(" + id + ")"
		if okZ && z.na != "" || !okZ {
			fmt.Printf("%s zstd at rest: n/a (needs %s)\n", name, compressionConfig)
			continue
		}
		if id == "a" || id == "b" || id == "e" {
			ratio := z.usagePer / z.valueBytes
			fmt.Printf("%s JSON with zstd at rest: %.2fx the value (MEMORY USAGE; used_memory %.2fx) — target <= 0.30x: %s\n",
				name, ratio, z.usedPer/z.valueBytes, verdict(ratio <= 0.3))
		}
		if za, ok := by[id]["zstd-all"]; ok && za.na == "" && okN && none.na == "" {
			fmt.Printf("%s with min.bytes=0 (every value compressed): %.2fx the value (MEMORY USAGE), produce %.0f vs %.0f rec/s without zstd: %.2fx\n",
				name, za.usagePer/za.valueBytes, za.produceRPS, none.produceRPS, za.produceRPS/none.produceRPS)
		}
		if okN && none.na == "" {
			pr := z.produceRPS / none.produceRPS
			fmt.Printf("%s produce rate with zstd %.0f vs without %.0f rec/s: %.2fx — target >= 0.80x: %s; fetch %.0f vs %.0f rec/s (%.2fx)\n",
				name, z.produceRPS, none.produceRPS, pr, verdict(pr >= 0.8), z.fetchRPS, none.fetchRPS, z.fetchRPS/none.fetchRPS)
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// sensorJSON is a sensor document of about size bytes, compact or as
// Python's json.dumps writes it (", " and ": "); fields vary per record
// the way real readings do.
func sensorJSON(r *rand.Rand, i int, spaced bool, size int) []byte {
	type kv struct {
		k string
		v any
	}
	rooms := []string{"kitchen", "living-room", "bedroom-1", "bedroom-2", "garage", "attic", "cellar", "office"}
	doc := []kv{
		{"device_id", fmt.Sprintf("sensor-%04d", r.IntN(200))},
		{"ts", 1764660000000 + int64(i)*1000 + int64(r.IntN(1000))},
		{"room", rooms[r.IntN(len(rooms))]},
		{"temperature_c", float64(r.IntN(3000))/100 + 5},
		{"humidity_pct", float64(r.IntN(10000)) / 100},
		{"pressure_hpa", 980 + float64(r.IntN(5000))/100},
		{"battery_v", 2.5 + float64(r.IntN(100))/100},
		{"rssi_dbm", -30 - r.IntN(60)},
		{"firmware", "2.4." + strconv.Itoa(r.IntN(9))},
		{"status", []string{"ok", "ok", "ok", "low_battery", "calibrating"}[r.IntN(5)]},
	}
	enc := func(doc []kv, readings []float64) []byte {
		sep, col := ",", ":"
		if spaced {
			sep, col = ", ", ": "
		}
		var b bytes.Buffer
		b.WriteByte('{')
		for j, f := range doc {
			if j > 0 {
				b.WriteString(sep)
			}
			k, _ := json.Marshal(f.k)
			v, _ := json.Marshal(f.v)
			b.Write(k)
			b.WriteString(col)
			b.Write(v)
		}
		b.WriteString(sep)
		b.WriteString(`"readings"`)
		b.WriteString(col)
		b.WriteByte('[')
		for j, v := range readings {
			if j > 0 {
				b.WriteString(sep)
			}
			b.WriteString(strconv.FormatFloat(v, 'f', 2, 64))
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	// Pad with readings up to the size.
	var readings []float64
	for {
		next := append(readings, float64(r.IntN(4000))/100+10)
		if len(enc(doc, next)) > size {
			return enc(doc, readings)
		}
		readings = next
	}
}

// iotJSON is a ~1 KiB compact JSON document as IoT gateways send them:
// nested device, location and network metadata that repeats per device,
// and some twenty measurements, counters and stamps that vary per record.
// Unlike sensorJSON's array of ~130 independent random readings (about
// 12 bits of entropy per 6 bytes), most of its bytes are structure.
func iotJSON(r *rand.Rand, i int) []byte {
	dev := r.IntN(200)
	rooms := []string{"kitchen", "living-room", "bedroom-1", "bedroom-2", "garage", "attic", "cellar", "office"}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"schema":"home.sensor.v3","msg_id":"%08x-%04x","device":{"id":"sensor-%04d","model":"THS-%d","vendor":"Acme Sensing","firmware":"2.%d.%d","hw_rev":"C"},`,
		r.Uint32(), r.IntN(1<<16), dev, 100+dev%7, dev%5, dev%13)
	fmt.Fprintf(&b, `"location":{"site":"home","building":"main","floor":%d,"room":"%s","zone":"zone-%d"},`, dev%3, rooms[dev%len(rooms)], dev%6)
	fmt.Fprintf(&b, `"time":{"measured_at":"2026-12-02T%02d:%02d:%02d.%03dZ","received_at":"2026-12-02T%02d:%02d:%02d.%03dZ","seq":%d},`,
		(i/3600)%24, (i/60)%60, i%60, r.IntN(1000), (i/3600)%24, (i/60)%60, i%60, r.IntN(1000), i)
	fmt.Fprintf(&b, `"measurements":{"temperature":{"value":%.2f,"unit":"celsius"},"humidity":{"value":%.1f,"unit":"percent"},"pressure":{"value":%.2f,"unit":"hPa"},`,
		15+float64(r.IntN(1500))/100, 30+float64(r.IntN(400))/10, 990+float64(r.IntN(3000))/100)
	fmt.Fprintf(&b, `"co2":{"value":%d,"unit":"ppm"},"voc_index":{"value":%d,"unit":"index"},"pm2_5":{"value":%.1f,"unit":"ug/m3"},"illuminance":{"value":%d,"unit":"lux"}},`,
		400+r.IntN(1200), r.IntN(500), float64(r.IntN(500))/10, r.IntN(20000))
	fmt.Fprintf(&b, `"power":{"source":"battery","battery_v":%.3f,"battery_pct":%d,"charging":false},`, 2.5+float64(r.IntN(1000))/1000, r.IntN(101))
	fmt.Fprintf(&b, `"network":{"protocol":"zigbee","rssi_dbm":%d,"lqi":%d,"parent":"router-%02d","hops":%d},`, -40-r.IntN(60), r.IntN(256), dev%12, 1+dev%3)
	fmt.Fprintf(&b, `"status":{"state":"%s","uptime_s":%d,"errors":%d,"last_calibration":"2026-11-%02dT08:00:00Z"},`,
		[]string{"ok", "ok", "ok", "degraded"}[r.IntN(4)], 1000+i*10+r.IntN(10), r.IntN(3), 1+dev%28)
	b.WriteString(`"tags":["indoor","battery-powered","calibrated","home-assistant"],"gateway":{"id":"gw-01","version":"2026.11.3","region":"eu-central"}}`)
	return b.Bytes()
}

// logLine is a 100-byte access log line.
func logLine(r *rand.Rand, i int) []byte {
	methods := []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	paths := []string{"/api/v1/items/", "/api/v1/users/", "/static/app.js?v=", "/healthz?n=", "/api/v1/orders/"}
	codes := []int{200, 200, 200, 201, 204, 304, 404, 500}
	line := fmt.Sprintf("2026-12-02T07:%02d:%02d.%03dZ INFO http %s %s%d %d %dms ua=curl/8.5 req=%08x",
		(i/60000)%60, (i/1000)%60, i%1000, methods[r.IntN(len(methods))], paths[r.IntN(len(paths))], r.IntN(100000),
		codes[r.IntN(len(codes))], r.IntN(900)+1, r.Uint32())
	for len(line) < 100 {
		line += " "
	}
	return []byte(line[:100])
}
