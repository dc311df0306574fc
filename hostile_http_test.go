package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// Hostile HTTP clients against the real binary. Memory is measured from
// outside: korvet's own process_resident_memory_bytes on /metrics, and
// Redis's INFO memory.

// startKorvetHTTP is startKorvet with lines added to its [http] table.
func startKorvetHTTP(t *testing.T, lines string) *proc {
	t.Helper()
	return startKorvetWith(t, testbed.StartRedis(t), func(kafkaAddr, httpAddr string) string {
		return fmt.Sprintf("[kafka]\nlisten = %q\n[http]\nlisten = %q\n%s\n", kafkaAddr, httpAddr, lines)
	})
}

// memProbe reads korvet's and Redis's memory. Its HTTP client keeps one
// connection open, so that it can still scrape /metrics while other
// clients fill korvet's connection cap.
type memProbe struct {
	t    *testing.T
	base string
	hc   *http.Client
	rc   *resp.Client
}

func newMemProbe(t *testing.T, p *proc) *memProbe {
	t.Helper()
	rc, err := resp.New(p.redis.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: 10 * time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	return &memProbe{t: t, base: p.httpBase, hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, rc: rc}
}

// rss scrapes korvet's resident memory; ok is false when /metrics did not
// answer with it.
func (m *memProbe) rss() (int64, bool) {
	code, body, err := httpGet(m.hc, m.base+"/metrics")
	if err != nil || code != http.StatusOK {
		return 0, false
	}
	v, ok := parseMetrics(bytes.NewReader(body))["process_resident_memory_bytes"]
	return int64(v), ok
}

// korvet returns korvet's resident memory in bytes.
func (m *memProbe) korvet() int64 {
	m.t.Helper()
	n, ok := m.rss()
	if !ok {
		m.t.Fatal("/metrics did not answer with process_resident_memory_bytes")
	}
	return n
}

// redis returns Redis's used_memory_rss in bytes.
func (m *memProbe) redis() int64 {
	m.t.Helper()
	return redisMemory(m.t, m.rc, "used_memory_rss")
}

// peak samples korvet's resident memory every 50ms until stop is called,
// which returns the highest sample.
func (m *memProbe) peak() (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var top int64
		for {
			// Not m.korvet: t.Fatal is for the test's goroutine.
			if n, ok := m.rss(); ok {
				top = max(top, n)
			}
			select {
			case <-done:
				result <- top
				return
			case <-time.After(50 * time.Millisecond): // a sample every 50ms
			}
		}
	}()
	return func() int64 {
		close(done)
		return max(<-result, m.korvet())
	}
}

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/mib) }

// produceValues writes n records of size bytes to a new compacted topic,
// key fmt "k%04d", value i's bytes all byte(i).
func produceValues(t *testing.T, p *proc, topic string, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(4*int32(size)), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": ptr("compact"), "max.message.bytes": ptr(strconv.Itoa(8 * size)),
	}, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for i := 0; i < n; {
		var batch []*kgo.Record
		for ; i < n && len(batch) < 16; i++ {
			batch = append(batch, &kgo.Record{Key: fmt.Appendf(nil, "k%04d", i), Value: bytes.Repeat([]byte{byte(i)}, size)})
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

type mgetReply struct {
	Results []struct {
		Key    string `json:"key"`
		Status int    `json:"status"`
		Value  []byte `json:"value"`
	} `json:"results"`
	Truncated bool `json:"truncated"`
	Next      *int `json:"next"`
}

func postMget(hc *http.Client, base, topic string, keys []string) (int, mgetReply, error) {
	body, _ := json.Marshal(keys)
	res, err := hc.Post(base+"/v1/kv/"+topic+"/_mget", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, mgetReply{}, err
	}
	defer res.Body.Close()
	var a mgetReply
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, a, fmt.Errorf("_mget: %d %s", res.StatusCode, b)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Content-Security-Policy") != "sandbox" {
		return res.StatusCode, a, fmt.Errorf("_mget answer not marked as data: %v", res.Header)
	}
	err = json.NewDecoder(res.Body).Decode(&a)
	return res.StatusCode, a, err
}

// checkValue checks that a result is k%04d's value.
func checkValue(key string, value []byte, size int) error {
	i, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
	if err != nil || len(value) != size || value[0] != byte(i) || value[size-1] != byte(i) {
		return fmt.Errorf("key %s: %d bytes, want %d bytes of %d", key, len(value), size, byte(i))
	}
	return nil
}

// TestHostileMget: _mget of one 1 MiB value's key sent 1000 times, and of
// 1000 distinct 1 MiB keys (1 GiB asked for in one request): capped,
// continuable answers, with korvet's memory bounded by the cap rather
// than by keys times values.
func TestHostileMget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := testbed.StartRedis(t, "--appendonly", "no") // 1 GiB of values: no AOF to write
	p := startKorvetOn(t, r, "")
	const keys, size = 1000, 1 * mib
	began := time.Now()
	produceValues(t, p, "big", keys, size)
	t.Logf("produced %d values of 1 MiB in %v", keys, time.Since(began).Round(time.Second))
	// A fresh korvet, so that the produce's buffers are not counted.
	if _, err := p.stop(t, 30*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	p.launch(t)
	waitStatus(t, p.httpBase+"/v1/kv/big/k0999", http.StatusOK, time.Minute)

	m := newMemProbe(t, p)
	hc := &http.Client{Timeout: time.Minute}
	k0, r0 := m.korvet(), m.redis()
	stop := m.peak()

	// One key sent 1000 times: read once, answered once.
	same := make([]string, keys)
	for i := range same {
		same[i] = "k0007"
	}
	code, a, err := postMget(hc, p.httpBase, "big", same)
	if err != nil || len(a.Results) != 1 || a.Truncated || a.Results[0].Status != 200 || checkValue(a.Results[0].Key, a.Results[0].Value, size) != nil {
		t.Fatalf("one key 1000 times: %d, %d results, truncated %v: %v", code, len(a.Results), a.Truncated, err)
	}
	kSame := m.korvet() - k0

	// 1000 distinct keys: 16 MiB of values (kv_mget_max_bytes), then next.
	distinct := make([]string, keys)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("k%04d", i)
	}
	code, a, err = postMget(hc, p.httpBase, "big", distinct)
	if err != nil || len(a.Results) != 16 || !a.Truncated || a.Next == nil || *a.Next != 16 {
		t.Fatalf("1000 distinct keys: %d, %d results, truncated %v next %v: %v", code, len(a.Results), a.Truncated, a.Next, err)
	}
	for i, res := range a.Results {
		if err := checkValue(res.Key, res.Value, size); err != nil || res.Key != distinct[i] {
			t.Fatalf("result %d: %v", i, err)
		}
	}
	kDistinct := m.korvet() - k0

	// A client that follows next gets all 1000, 16 MiB at a time.
	got, requests := 0, 0
	for rest := distinct; len(rest) > 0; {
		if requests++; requests > keys {
			t.Fatal("no progress following next")
		}
		_, a, err := postMget(hc, p.httpBase, "big", rest)
		if err != nil {
			t.Fatalf("request %d: %v", requests, err)
		}
		for _, res := range a.Results {
			if err := checkValue(res.Key, res.Value, size); err != nil {
				t.Fatal(err)
			}
			got++
		}
		if !a.Truncated {
			break
		}
		rest = rest[*a.Next:]
	}
	if got != keys || requests != 63 {
		t.Fatalf("following next: %d values in %d requests, want %d in 63", got, requests, keys)
	}

	kSeq := stop() - k0

	// Four such clients at once.
	stop = m.peak()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, a, err := postMget(hc, p.httpBase, "big", distinct); err != nil || len(a.Results) != 16 {
				errs <- fmt.Errorf("concurrent _mget: %d results: %v", len(a.Results), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	kConc := stop() - k0
	rGrowth := m.redis() - r0
	t.Logf("korvet RSS at rest %s; after one key x1000: +%s; after 1000 distinct keys (a 16 MiB answer): +%s; peak over %d follow-next requests: +%s; peak with 4 concurrent 1000-key requests: +%s (1000 keys x 1 MiB would be 1000 MiB each); redis +%s",
		mibs(k0), mibs(kSame), mibs(kDistinct), requests, mibs(kSeq), mibs(kConc), mibs(rGrowth))
	// Bounds: one _mget holds about 4 MiB of values read ahead (each
	// read also allocates the Redis reply and a copy of the value: 2 GiB
	// of garbage over this test), and Go's heap may grow to twice what is
	// live before a collection. Building the answer in memory would take
	// over 2 GiB for one 1000-key request.
	if kSeq > 128*mib {
		t.Errorf("korvet RSS grew by %s serving _mget of 1 MiB values one at a time, want at most 128 MiB", mibs(kSeq))
	}
	if kConc > 192*mib {
		t.Errorf("korvet RSS grew by %s serving 4 _mget of 1 MiB values at once, want at most 192 MiB", mibs(kConc))
	}
	if rGrowth > 64*mib {
		t.Errorf("Redis RSS grew by %s serving reads", mibs(rGrowth))
	}
}

// waitClosed reads from c until the server closes it, within limit; it
// returns what was read and when the close came.
func waitClosed(c net.Conn, limit time.Duration) ([]byte, time.Time, error) {
	if err := c.SetReadDeadline(time.Now().Add(limit)); err != nil {
		return nil, time.Time{}, err
	}
	b, err := io.ReadAll(c)
	at := time.Now()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return b, at, fmt.Errorf("still open after %v", limit)
	}
	return b, at, nil // EOF or a reset: closed
}

// TestHostileSlowClients: slow headers (slowloris), a slow body, an idle
// keep-alive connection and a reader that stalls are all cut off by the
// [http] timeouts, and 100 slowloris connections cost korvet little.
func TestHostileSlowClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := startKorvetHTTP(t, `read_header_timeout = "1s"
read_timeout = "2s"
write_timeout = "2s"
idle_timeout = "2s"`)
	addr := strings.TrimPrefix(p.httpBase, "http://")
	produceValues(t, p, "vals", 24, mib)
	waitStatus(t, p.httpBase+"/v1/kv/vals/k0023", http.StatusOK, time.Minute)
	m := newMemProbe(t, p)
	k0, r0 := m.korvet(), m.redis()
	stop := m.peak()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// trickle writes one byte of s every 100ms until the server closes c.
	trickle := func(c net.Conn, head, s string) {
		if _, err := io.WriteString(c, head); err != nil {
			return
		}
		for i := 0; ; i = (i + 1) % len(s) {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// 100 slowloris connections: headers that never end.
	const slow = 100
	start := time.Now()
	closedAt := make([]time.Duration, slow)
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range slow {
		c := dial()
		go trickle(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n", "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, at, err := waitClosed(c, 20*time.Second)
			if err != nil {
				failed.Store(fmt.Errorf("slowloris connection %d: %w", i, err))
			}
			closedAt[i] = at.Sub(start)
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	first, last := closedAt[0], closedAt[0]
	for _, d := range closedAt {
		first, last = min(first, d), max(last, d)
	}
	if first < 900*time.Millisecond || last > 6*time.Second {
		t.Errorf("slowloris connections closed after %v to %v, want about read_header_timeout (1s)", first, last)
	}
	kSlowloris := stop() - k0

	// A slow body: the whole request must arrive within read_timeout.
	c := dial()
	start = time.Now()
	go trickle(c, "POST /v1/kv/vals/_mget HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[", `"k0001",`)
	answer, at, err := waitClosed(c, 20*time.Second)
	if err != nil {
		t.Fatalf("slow body: %v", err)
	}
	if d := at.Sub(start); d < 1800*time.Millisecond || d > 7*time.Second {
		t.Errorf("slow body cut off after %v, want about read_timeout (2s)", d)
	}
	status, _, _ := strings.Cut(string(answer), "\r\n")
	t.Logf("slowloris: %d connections closed %v to %v after they opened; slow body closed after %v (answer %q)",
		slow, first.Round(10*time.Millisecond), last.Round(10*time.Millisecond), at.Sub(start).Round(10*time.Millisecond), status)

	// An idle keep-alive connection is closed after idle_timeout.
	c = dial()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("keep-alive request: %v %v", res, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	start = time.Now()
	if err := c.SetReadDeadline(start.Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = br.ReadByte()
	idle := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || idle < 1800*time.Millisecond || idle > 7*time.Second {
		t.Errorf("idle keep-alive connection: %v after %v, want closed after about idle_timeout (2s)", err, idle)
	}

	// A reader that stalls: a 21 MiB _mget answer (16 values of 1 MiB in
	// base64), more than the sockets buffer, is cut off by write_timeout.
	c = dial()
	keys, _ := json.Marshal([]string{"k0000", "k0001", "k0002", "k0003", "k0004", "k0005", "k0006", "k0007", "k0008", "k0009", "k0010", "k0011", "k0012", "k0013", "k0014", "k0015", "k0016"})
	fmt.Fprintf(c, "POST /v1/kv/vals/_mget HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", len(keys), keys)
	start = time.Now()
	time.Sleep(5 * time.Second) // the client stalls, well past write_timeout
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got int64
	res, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		got, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("stalled reader: the answer neither ended nor was cut off within 20s (%s read)", mibs(got))
	}
	if err == nil {
		t.Errorf("a reader stalled for 5s still got the whole answer (%s): write_timeout did not cut it off", mibs(got))
	}
	t.Logf("idle keep-alive closed after %v; a reader stalled for 5s got %s of a 21 MiB answer before the close (%v)", idle.Round(10*time.Millisecond), mibs(got), err)

	rGrowth := m.redis() - r0
	t.Logf("korvet RSS at rest %s, +%s with %d slowloris connections; redis +%s", mibs(k0), mibs(kSlowloris), slow, mibs(rGrowth))
	if kSlowloris > 32*mib {
		t.Errorf("korvet RSS grew by %s with %d slowloris connections", mibs(kSlowloris), slow)
	}
	waitStatus(t, p.httpBase+"/healthz", http.StatusOK, 10*time.Second)
	p.alive(t)
}

// TestHostileConnections: past http.max_connections, connections wait
// in the kernel's accept queue at no cost to korvet, and are served once
// others close.
func TestHostileHTTPConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const limit, extra = 16, 1000
	p := startKorvetHTTP(t, fmt.Sprintf(`max_connections = %d
read_header_timeout = "30s"
read_timeout = "30s"
idle_timeout = "60s"`, limit))
	addr := strings.TrimPrefix(p.httpBase, "http://")
	// Start-up's health checks left keep-alive connections: not ours to count.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	m := newMemProbe(t, p)
	k0, r0 := m.korvet(), m.redis() // the probe's connection holds one slot from here on

	// Fill the cap: connections that have sent nothing yet.
	var holders []net.Conn
	for range limit - 1 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		holders = append(holders, c)
	}
	// 1000 more, each with a request written: they wait unanswered.
	var waiting []net.Conn
	refused := 0
	for range extra {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			refused++
			continue
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, c)
	}
	// The probe still gets through on its own connection; memory with
	// 1000 connections waiting:
	kWaiting := m.korvet() - k0
	// None of them is answered while the cap is full.
	for _, c := range []net.Conn{waiting[0], waiting[len(waiting)/2], waiting[len(waiting)-1]} {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := c.Read(make([]byte, 1)); n > 0 || err == nil {
			t.Fatalf("a connection past the cap of %d was answered", limit)
		}
	}
	// Free the cap: the waiting connections are served, 15 at a time.
	start := time.Now()
	for _, c := range holders {
		c.Close()
	}
	var wg sync.WaitGroup
	var served atomic.Int64
	var failed atomic.Value
	for _, c := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || res.StatusCode != 200 {
				failed.Store(fmt.Errorf("waiting connection: %v %v", res, err))
				return
			}
			res.Body.Close()
			c.Close()
			served.Add(1)
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	kAfter := m.korvet() - k0
	rGrowth := m.redis() - r0
	t.Logf("cap %d: %d more connections waited (%d refused), none answered while the cap was full, all %d served %v after the cap freed; korvet RSS at rest %s, +%s with them waiting, +%s after serving them; redis +%s",
		limit, len(waiting), refused, served.Load(), took.Round(time.Millisecond), mibs(k0), mibs(kWaiting), mibs(kAfter), mibs(rGrowth))
	if kWaiting > 8*mib {
		t.Errorf("korvet RSS grew by %s with %d connections waiting past the cap", mibs(kWaiting), len(waiting))
	}
	p.alive(t)
}
