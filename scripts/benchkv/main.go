// Command benchkv drives the KV view benchmarks of scripts/bench-kv.sh
// against a running korvet.
//
//	benchkv -mode produce -brokers 127.0.0.1:9092 -topic t -partitions 2 -keys 1000000 -size 256
//	benchkv -mode read -http http://127.0.0.1:8080 -redis redis://127.0.0.1:6379/0 -topic t -keys 100000
//	benchkv -mode flush -redis redis://127.0.0.1:6379/0
//	benchkv -mode quiesce -redis redis://127.0.0.1:6379/0
//	benchkv -mode xrange -redis redis://127.0.0.1:6379/0 -topic t
//	benchkv -mode serve -listen 127.0.0.1:8090 -size 256
//	benchkv -mode serve -listen 127.0.0.1:8091 -size 256 -xrange -redis redis://127.0.0.1:6379/0 -topic t
//
// produce creates a compacted topic and writes one record per key
// (-keyfmt, default k-%07d) with -size byte values. read first waits for
// the index to be ready, then measures -reads random sequential GETs of
// /v1/kv/{topic}/{key} (p50, p99), the same reads against a plain Redis
// GET of a materialized copy of the values (the floor), and throughput of
// both with -concurrency clients for -duration. Each prints a last line
// "RESULT key=value ..." for the script. With -ref, read also measures a
// minimal net/http handler (benchkv -mode serve: every request gets the
// same -size bytes) with the same load generator, the reference for
// korvet's HTTP path, and with -refx one that reads one entry of the
// topic with XRANGE before it answers (benchkv -mode serve -xrange), the
// least I/O and code a GET of the log can do, korvet's floor; with -cpu
// name=pid,... it prints the CPU time each
// of those processes (and this one) used during each throughput run; with
// -perf-pid it records a perf profile of that process during korvet's
// throughput run into -perf-out. -client picks the HTTP client of the
// read figures, the same for korvet and the reference: lean (default), a
// keep-alive HTTP/1.1 loop per client that allocates nothing (lean.go),
// or net/http's client, which costs several times the CPU of a small
// answer. xrange is the floor of an index rebuild: it reads every entry of the topic's streams with XRANGEs of
// 1000 entries, 6 in flight per stream (as the rebuild reads), the
// streams in parallel, and drops the replies unread.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/resp"
)

type options struct {
	mode        string
	brokers     []string
	httpURL     string
	redisURL    string
	topic       string
	partitions  int
	keys        int
	size        int
	keyfmt      string
	shuffle     bool
	reads       int
	concurrency int
	duration    time.Duration
	timeout     time.Duration
	listen      string
	refURL      string
	refXURL     string
	xrange      bool
	cpu         []cpuProc
	perfPID     int
	perfOut     string
	client      string
}

func main() {
	var o options
	var brokers string
	flag.StringVar(&o.mode, "mode", "read", "produce, read, flush, quiesce or xrange")
	flag.StringVar(&brokers, "brokers", "127.0.0.1:9092", "Kafka seed brokers (produce)")
	flag.StringVar(&o.httpURL, "http", "http://127.0.0.1:8080", "korvet's HTTP address (read)")
	flag.StringVar(&o.redisURL, "redis", "redis://127.0.0.1:6379/0", "the Redis korvet uses (read: the floor; flush)")
	flag.StringVar(&o.topic, "topic", "kv", "topic")
	flag.IntVar(&o.partitions, "partitions", 2, "partitions of the topic (produce)")
	flag.IntVar(&o.keys, "keys", 100_000, "number of keys")
	flag.IntVar(&o.size, "size", 256, "value size in bytes (produce; read: the floor's copies)")
	flag.StringVar(&o.keyfmt, "keyfmt", "k-%07d", "key format, applied to 0..keys-1")
	flag.BoolVar(&o.shuffle, "shuffle", false, "produce: the keys in a random order (the same each run), not 0..keys-1")
	flag.IntVar(&o.reads, "reads", 5000, "random sequential reads for the latency figures")
	flag.IntVar(&o.concurrency, "concurrency", 16, "clients for the throughput figures")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of each throughput run")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:8090", "address of the reference handler (serve)")
	flag.StringVar(&o.refURL, "ref", "", "base URL of a benchkv -mode serve, the reference handler (read)")
	flag.StringVar(&o.refXURL, "refx", "", "base URL of a benchkv -mode serve -xrange, the reference handler that reads one entry first (read)")
	flag.BoolVar(&o.xrange, "xrange", false, "serve: read one entry of -topic's streams from -redis with XRANGE before each answer")
	var cpu string
	flag.StringVar(&cpu, "cpu", "", "name=pid,... of processes whose CPU time to report per throughput run (read)")
	flag.IntVar(&o.perfPID, "perf-pid", 0, "record a perf profile of this process during korvet's throughput run (read)")
	flag.StringVar(&o.perfOut, "perf-out", "perf.data", "where -perf-pid writes its profile")
	flag.StringVar(&o.client, "client", "lean", "HTTP client of the read figures: lean (a keep-alive HTTP/1.1 loop, lean.go) or net/http")
	flag.Parse()
	o.brokers = strings.Split(brokers, ",")
	var err error
	if o.cpu, err = parseCPU(cpu); err != nil {
		fmt.Fprintf(os.Stderr, "benchkv: -cpu: %v\n", err)
		os.Exit(2)
	}
	if o.client != "lean" && o.client != "net/http" {
		fmt.Fprintf(os.Stderr, "benchkv: -client: want lean or net/http, got %q\n", o.client)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	switch o.mode {
	case "produce":
		err = produce(ctx, o)
	case "read":
		err = read(ctx, o)
	case "flush":
		err = flush(ctx, o)
	case "quiesce":
		err = quiesce(ctx, o)
	case "xrange":
		err = xrange(ctx, o)
	case "serve":
		err = serve(ctx, o)
	default:
		err = fmt.Errorf("unknown mode %q", o.mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchkv: %v\n", err)
		os.Exit(1)
	}
}

func value(size, i int) []byte {
	v := make([]byte, size)
	for j := range v {
		v[j] = byte('a' + (i+j)%26)
	}
	return v
}

func produce(ctx context.Context, o options) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...), kgo.DefaultProduceTopic(o.topic),
		kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50_000),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopics(ctx, int32(o.partitions), 1, map[string]*string{"cleanup.policy": ptr("compact")}, o.topic)
	if err != nil {
		return err
	}
	if err := res[o.topic].Err; err != nil {
		return fmt.Errorf("create %s: %w", o.topic, err)
	}
	order := make([]int, o.keys)
	for i := range order {
		order[i] = i
	}
	if o.shuffle {
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for _, i := range order {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, o.keyfmt, i), Value: value(o.size, i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return *e
	}
	el := time.Since(start)
	fmt.Printf("produced %d keys of %d B to %s in %.1fs\n", o.keys, o.size, o.topic, el.Seconds())
	fmt.Printf("RESULT keys=%d rps=%.0f\n", o.keys, float64(o.keys)/el.Seconds())
	return nil
}

func ptr(s string) *string { return &s }

// quiesce waits until Redis is not rewriting its AOF or saving (after a
// big load it forks to rewrite the AOF, which would eat a core of the
// next measurement).
func quiesce(ctx context.Context, o options) error {
	rc, err := resp.New(o.redisURL, resp.Options{})
	if err != nil {
		return err
	}
	defer rc.Close()
	for {
		r, err := rc.Do(ctx, "INFO", "persistence")
		if err != nil {
			return err
		}
		info := string(r.Bytes())
		if !strings.Contains(info, "aof_rewrite_in_progress:1") && !strings.Contains(info, "rdb_bgsave_in_progress:1") &&
			!strings.Contains(info, "aof_rewrite_scheduled:1") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func flush(ctx context.Context, o options) error {
	rc, err := resp.New(o.redisURL, resp.Options{})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = rc.Do(ctx, "FLUSHALL")
	return err
}

// pct returns the q-quantile of sorted durations, in ms.
func pct(d []time.Duration, q float64) float64 {
	i := min(int(q*float64(len(d))), len(d)-1)
	return float64(d[i].Microseconds()) / 1000
}

func read(ctx context.Context, o options) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency + 1}, Timeout: 10 * time.Second}
	if err := waitReady(ctx, hc, o); err != nil {
		return err
	}
	keys := make([]string, o.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf(o.keyfmt, i)
	}
	rng := rand.New(rand.NewPCG(42, 7))
	order := make([]int, o.reads)
	for i := range order {
		order[i] = rng.IntN(o.keys)
	}
	// getFrom returns a maker of GET functions for the KV route of base
	// (korvet, or the reference handler): each reads key i and checks the
	// answer's status and size, and each client (goroutine) makes its
	// own. -client lean: one keep-alive connection per client, read
	// without allocating (lean.go); net/http: one shared http.Client.
	getFrom := func(base string) func() (func(i int) error, func()) {
		return func() (func(i int) error, func()) {
			check := func(i, status, n int) error {
				if status != 200 || n != o.size {
					return fmt.Errorf("GET %s from %s: %d, %d bytes", keys[i], base, status, n)
				}
				return nil
			}
			prefix := "/v1/kv/" + o.topic + "/"
			if o.client == "lean" {
				lc, err := newLeanConn(base, 10*time.Second)
				if err != nil {
					return func(int) error { return err }, func() {}
				}
				return func(i int) error {
					status, n, err := lc.get(prefix + keys[i])
					if err != nil {
						return err
					}
					return check(i, status, n)
				}, lc.close
			}
			return func(i int) error {
				res, err := hc.Get(base + prefix + keys[i])
				if err != nil {
					return err
				}
				n, err := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err != nil {
					return err
				}
				return check(i, res.StatusCode, int(n))
			}, func() {}
		}
	}
	get, closeGet := getFrom(o.httpURL)()
	defer closeGet()
	// Warm the connection and the caches a little, as a client would be.
	for i := range 200 {
		if err := get(order[i%len(order)]); err != nil {
			return err
		}
	}
	lat := make([]time.Duration, 0, o.reads)
	for _, i := range order {
		t0 := time.Now()
		if err := get(i); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	kp50, kp99 := pct(lat, 0.50), pct(lat, 0.99)
	fmt.Printf("korvet GET /v1/kv: %d random sequential reads of %d keys: p50 %.3f ms, p99 %.3f ms\n", o.reads, o.keys, kp50, kp99)
	stopPerf, err := startPerf(o)
	if err != nil {
		return err
	}
	cpu0 := cpuTimes(o.cpu)
	kRate, err := throughput(ctx, o, keyed(o, getFrom(o.httpURL)))
	cpu1 := cpuTimes(o.cpu)
	if perr := stopPerf(); err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return err
	}
	fmt.Printf("korvet GET /v1/kv with %d clients: %.0f reads/s\n", o.concurrency, kRate)
	printCPU("korvet GET throughput", o.cpu, cpu0, cpu1)

	// The references: the same load generator against a minimal net/http
	// handler answering the same number of bytes, and (-refx) one that
	// first reads one entry with XRANGE.
	measureRef := func(what, url string) (p50, p99, rate float64, err error) {
		refGet, closeRef := getFrom(url)()
		defer closeRef()
		for i := range 200 {
			if err := refGet(order[i%len(order)]); err != nil {
				return 0, 0, 0, err
			}
		}
		lat = lat[:0]
		for _, i := range order {
			t0 := time.Now()
			if err := refGet(i); err != nil {
				return 0, 0, 0, err
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		p50, p99 = pct(lat, 0.50), pct(lat, 0.99)
		fmt.Printf("%s: p50 %.3f ms, p99 %.3f ms\n", what, p50, p99)
		cpu0 := cpuTimes(o.cpu)
		if rate, err = throughput(ctx, o, keyed(o, getFrom(url))); err != nil {
			return 0, 0, 0, err
		}
		cpu1 := cpuTimes(o.cpu)
		fmt.Printf("%s with %d clients: %.0f reads/s\n", what, o.concurrency, rate)
		printCPU(what+" throughput", o.cpu, cpu0, cpu1)
		return p50, p99, rate, nil
	}
	var rp50, rp99, rRate, xp50, xp99, xRate float64
	if o.refURL != "" {
		if rp50, rp99, rRate, err = measureRef("reference net/http handler", o.refURL); err != nil {
			return err
		}
	}
	if o.refXURL != "" {
		if xp50, xp99, xRate, err = measureRef("reference handler with one XRANGE", o.refXURL); err != nil {
			return err
		}
	}

	// The floor: the same values materialized as plain Redis strings, read
	// with GET over one connection from a pool (what a cache would do).
	rc, err := resp.New(o.redisURL, resp.Options{PoolSize: o.concurrency + 1})
	if err != nil {
		return err
	}
	defer rc.Close()
	var pl resp.Pipeline
	for i, k := range keys {
		pl.Cmd("SET", "benchkv:floor:"+k, value(o.size, i))
		if pl.Len() == 1000 || i == len(keys)-1 {
			rs, err := rc.Exec(ctx, &pl)
			if err != nil {
				return err
			}
			rs.Release()
			pl.Reset()
		}
	}
	rget := func(i int) error {
		r, err := rc.Do(ctx, "GET", "benchkv:floor:"+keys[i])
		if err != nil {
			return err
		}
		if len(r.Bytes()) != o.size {
			return errors.New("floor: wrong value size")
		}
		return nil
	}
	lat = lat[:0]
	for _, i := range order {
		t0 := time.Now()
		if err := rget(i); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	fp50, fp99 := pct(lat, 0.50), pct(lat, 0.99)
	fmt.Printf("floor: Redis GET of a copy: p50 %.3f ms, p99 %.3f ms\n", fp50, fp99)
	fRate, err := throughput(ctx, o, func() (func(*rand.Rand) error, func()) {
		return func(rng *rand.Rand) error { return rget(rng.IntN(o.keys)) }, func() {}
	})
	if err != nil {
		return err
	}
	fmt.Printf("floor: Redis GET with %d clients: %.0f reads/s\n", o.concurrency, fRate)
	// Leave Redis as it was.
	for i, k := range keys {
		pl.Cmd("UNLINK", "benchkv:floor:"+k)
		if pl.Len() == 1000 || i == len(keys)-1 {
			if rs, err := rc.Exec(ctx, &pl); err == nil {
				rs.Release()
			}
			pl.Reset()
		}
	}
	fmt.Printf("RESULT p50_ms=%.3f p99_ms=%.3f floor_p50_ms=%.3f floor_p99_ms=%.3f rps=%.0f floor_rps=%.0f ref_p50_ms=%.3f ref_p99_ms=%.3f ref_rps=%.0f refx_p50_ms=%.3f refx_p99_ms=%.3f refx_rps=%.0f\n",
		kp50, kp99, fp50, fp99, kRate, fRate, rp50, rp99, rRate, xp50, xp99, xRate)
	return nil
}

// keyed turns a maker of GET functions of key i into one of random GETs.
func keyed(o options, mk func() (func(i int) error, func())) func() (func(*rand.Rand) error, func()) {
	return func() (func(*rand.Rand) error, func()) {
		get, done := mk()
		return func(rng *rand.Rand) error { return get(rng.IntN(o.keys)) }, done
	}
}

// throughput runs o.concurrency clients for o.duration, each calling its
// own fn (made by mk) in a loop.
func throughput(ctx context.Context, o options, mk func() (fn func(*rand.Rand) error, done func())) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	fns := make([]func(*rand.Rand) error, o.concurrency)
	for w := range fns {
		fn, done := mk()
		defer done()
		fns[w] = fn
	}
	start := time.Now()
	for w, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for ctx.Err() == nil {
				if err := fn(rng); err != nil {
					if ctx.Err() == nil {
						failed.CompareAndSwap(nil, &err)
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return 0, *e
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// waitReady polls the topic's index figures until it has caught up.
func waitReady(ctx context.Context, hc *http.Client, o options) error {
	for {
		res, err := hc.Get(o.httpURL + "/v1/kv/" + o.topic)
		if err == nil {
			var st struct{ Ready bool }
			err = json.NewDecoder(res.Body).Decode(&st)
			res.Body.Close()
			if res.StatusCode == 200 && err == nil && st.Ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("index of %s not ready: %v", o.topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// xrange reads the topic's streams as a rebuild does, without indexing:
// the Redis side of a rebuild, which no client work can beat.
func xrange(ctx context.Context, o options) error {
	rc, err := resp.New(o.redisURL, resp.Options{})
	if err != nil {
		return err
	}
	defer rc.Close()
	var streams []string
	for cursor := "0"; ; {
		r, err := rc.Do(ctx, "SCAN", cursor, "MATCH", "*:storage:local:"+o.topic+":*", "TYPE", "stream", "COUNT", 1000)
		if err != nil {
			return err
		}
		el := r.Elems(nil)
		if len(el) != 2 {
			return fmt.Errorf("SCAN: reply of %d elements", len(el))
		}
		cursor = string(el[0].Bytes())
		for _, k := range el[1].Elems(nil) {
			streams = append(streams, string(k.Bytes()))
		}
		if cursor == "0" {
			break
		}
	}
	if len(streams) == 0 {
		return fmt.Errorf("no stream of topic %q", o.topic)
	}
	const count, ahead = 1000, 6
	start := time.Now()
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(streams))
	for _, key := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Entry ids are offset-sequence and offsets are dense in a
			// fresh topic: windows of count offsets from the first.
			first, err := rc.Do(ctx, "XRANGE", key, "-", "+", "COUNT", 1)
			if err != nil || first.Len() != 1 {
				errs <- fmt.Errorf("first entry of %s: %v", key, err)
				return
			}
			id := string(first.Elems(nil)[0].Elems(nil)[0].Bytes())
			base, err := strconv.ParseInt(id[:strings.IndexByte(id, '-')], 10, 64)
			if err != nil {
				errs <- fmt.Errorf("entry id %q of %s: %w", id, key, err)
				return
			}
			n, err := rc.Do(ctx, "XLEN", key)
			if err != nil {
				errs <- err
				return
			}
			size, _ := n.Int()
			sem := make(chan struct{}, ahead)
			var inner sync.WaitGroup
			for at := base; at < base+size; at += count {
				sem <- struct{}{}
				inner.Add(1)
				go func() {
					defer func() { <-sem; inner.Done() }()
					var pl resp.Pipeline
					pl.Cmd("XRANGE", key, at, at+count-1, "COUNT", count)
					rs, err := rc.Exec(ctx, &pl)
					if err != nil {
						errs <- err
						return
					}
					total.Add(int64(rs.At(0).Len()))
					rs.Release()
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	took := time.Since(start)
	rate := float64(total.Load()) / took.Seconds()
	fmt.Printf("read %d entries of %d streams in %v (%.0f entries/s)\n", total.Load(), len(streams), took.Round(time.Millisecond), rate)
	fmt.Printf("RESULT entries=%d rate=%.0f\n", total.Load(), rate)
	return nil
}
