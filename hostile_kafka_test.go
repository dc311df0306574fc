package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// These tests play a hostile Kafka client against the real binary and
// measure from outside: korvet's own /metrics (resident memory, Go heap),
// Redis INFO used_memory, and the answers on the wire.

const mib = 1 << 20

// footprint is what korvet and its Redis hold at one moment.
type footprint struct {
	rss, heap, stacks int64 // korvet: resident memory, Go heap in use, goroutine stacks
	redis             int64 // Redis used_memory
}

// metrics scrapes korvet's /metrics into name (with labels) -> value.
func metrics(t *testing.T, p *proc) map[string]float64 {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	res, err := hc.Get(p.httpBase + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", res.Status)
	}
	return parseMetrics(res.Body)
}

// parseMetrics reads Prometheus text into name (with labels) -> value.
func parseMetrics(r io.Reader) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// redisUsedMemory is Redis's INFO memory used_memory.
func redisUsedMemory(t *testing.T, rc *resp.Client) int64 {
	t.Helper()
	return redisMemory(t, rc, "used_memory")
}

// redisMemory is one field of Redis's INFO memory, in bytes.
func redisMemory(t *testing.T, rc *resp.Client, field string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := rc.Do(ctx, "INFO", "memory")
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		t.Fatalf("INFO memory: %v", err)
	}
	for _, line := range strings.Split(string(r.Bytes()), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", field, v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO memory has no %s:\n%s", field, r.Bytes())
	return 0
}

func measure(t *testing.T, p *proc, rc *resp.Client) footprint {
	t.Helper()
	m := metrics(t, p)
	return footprint{
		rss:    int64(m["process_resident_memory_bytes"]),
		heap:   int64(m["go_memstats_heap_inuse_bytes"]),
		stacks: int64(m["go_memstats_stack_inuse_bytes"]),
		redis:  redisUsedMemory(t, rc),
	}
}

// growth logs and checks how much korvet and Redis grew from before to
// after: korvet's RSS and its heap by at most korvetMax, Redis by at most
// redisMax.
func growth(t *testing.T, what string, before, after footprint, korvetMax, redisMax int64) {
	t.Helper()
	rss, heap, redis := after.rss-before.rss, after.heap-before.heap, after.redis-before.redis
	t.Logf("%s: korvet RSS %+.1f MiB, redis %+.2f MiB (korvet heap %+.1f MiB, stacks %+.1f MiB; RSS now %.1f MiB)",
		what, float64(rss)/mib, float64(redis)/mib, float64(heap)/mib, float64(after.stacks-before.stacks)/mib, float64(after.rss)/mib)
	if rss > korvetMax || heap > korvetMax {
		t.Errorf("%s: korvet grew by %.1f MiB RSS, %.1f MiB heap; the bound is %.1f MiB", what, float64(rss)/mib, float64(heap)/mib, float64(korvetMax)/mib)
	}
	if redis > redisMax {
		t.Errorf("%s: Redis grew by %.2f MiB; the bound is %.2f MiB", what, float64(redis)/mib, float64(redisMax)/mib)
	}
}

func redisClient(t *testing.T, r *testbed.Redis) *resp.Client {
	t.Helper()
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

// kafkaConn is a raw Kafka connection, framed by hand.
type kafkaConn struct {
	t    *testing.T
	nc   net.Conn
	corr int32
}

// dialKafka connects to addr from the loopback address from ("" for any).
func dialKafka(t *testing.T, addr, from string) *kafkaConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &kafkaConn{t: t, nc: nc}
}

// roundTrip sends req and reads its answer; an error is the connection's.
func (c *kafkaConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	c.corr++
	var f kmsg.RequestFormatter
	_ = c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.nc.Write(f.AppendRequest(nil, req, c.corr)); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return nil, err
	}
	body = body[4:] // correlation id
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // header tags
	}
	r := req.ResponseKind()
	if err := r.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return r, nil
}

// served reports whether korvet answers an ApiVersions on c.
func (c *kafkaConn) served() bool {
	_, err := c.roundTrip(kmsg.NewPtrApiVersionsRequest())
	return err == nil
}

// waitClosed waits, up to within, for korvet to close c, and returns how
// long that took.
func (c *kafkaConn) waitClosed(within time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.nc.SetReadDeadline(start.Add(within))
	_, err := c.nc.Read(make([]byte, 1))
	took := time.Since(start)
	if err == nil {
		return took, errors.New("korvet sent data instead of closing")
	}
	if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset") {
		return took, nil
	}
	return took, fmt.Errorf("not closed within %v: %w", within, err)
}

func produceV9(topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A zstd batch of a few KB that inflates to far more than the request's
// decompression budget is refused with MESSAGE_TOO_LARGE, nothing is
// stored, and korvet grows by about the budget at most, however often it
// comes.
func TestHostileZstdBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, tc := range []struct {
		name            string
		budget, inflate int
		config          string
	}{
		{"budget 4 MiB", 4 * mib, 64 * mib, "max_produce_decompressed_bytes = 4194304"},
		{"default budget 64 MiB", 64 * mib, 100 * mib, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testbed.StartRedis(t)
			p := startKorvetKafka(t, r, "", tc.config)
			rc := redisClient(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			adm := kadm.NewClient(newClient(t, p.kafkaAddr))
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bomb"); err != nil {
				t.Fatal(err)
			}
			bomb, err := testbed.ZstdBatch(tc.inflate)
			if err != nil {
				t.Fatal(err)
			}
			c := dialKafka(t, p.kafkaAddr, "")
			if !c.served() {
				t.Fatal("ApiVersions not answered")
			}
			before := measure(t, p, rc)
			const sends = 20
			for i := range sends {
				res, err := c.roundTrip(produceV9("bomb", 0, bomb))
				if err != nil {
					t.Fatalf("bomb %d: %v", i, err)
				}
				rp := res.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
				if rp.ErrorCode != kerr.MessageTooLarge.Code || rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "kafka.max_produce_decompressed_bytes") {
					t.Fatalf("bomb %d: error %d %v, want MESSAGE_TOO_LARGE naming kafka.max_produce_decompressed_bytes", i, rp.ErrorCode, rp.ErrorMessage)
				}
				if i == 0 {
					t.Logf("a %d byte batch inflating to %d MiB: %s", len(bomb), tc.inflate/mib, *rp.ErrorMessage)
				}
			}
			after := measure(t, p, rc)
			ends, err := adm.ListEndOffsets(ctx, "bomb")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := ends.Lookup("bomb", 0); o.Offset != 0 {
				t.Fatalf("%d records stored from refused batches", o.Offset)
			}
			// A payload that may inflate past the budget is inflated
			// first only counting: the cost is the zstd decoders' state
			// (an 8 MiB window at most) and the runtime's slack, whatever
			// the budget.
			growth(t, fmt.Sprintf("%d bombs of %d bytes (%d MiB inflated) under a %d MiB budget", sends, len(bomb), tc.inflate/mib, tc.budget/mib),
				before, after, 32*mib, 1*mib)
			// And the connection is still served.
			if !c.served() {
				t.Fatal("the connection was dropped")
			}
			p.alive(t)
		})
	}
}

// Topics and partitions past the broker's caps are refused with
// POLICY_VIOLATION naming the key, before anything reaches Redis.
func TestHostileCreateTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := testbed.StartRedis(t)
	p := startKorvetKafka(t, r, "", "max_partitions = 100")
	rc := redisClient(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, p.kafkaAddr)
	adm := kadm.NewClient(cl)
	topics := func() string {
		r, err := rc.Do(ctx, "HKEYS", "korvet:meta:topics")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		r.ForEach(func(e resp.Reply) bool { names = append(names, string(e.Bytes())); return true })
		return strings.Join(names, ",")
	}
	policy := func(what, key string, err error, msg string) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(msg, key) {
			t.Fatalf("%s: %v %q, want POLICY_VIOLATION with a message naming %s", what, err, msg, key)
		}
	}

	// 100000 partitions in one request.
	_ = cl.Ping(ctx)
	before, registry := measure(t, p, rc), topics()
	res, err := adm.CreateTopic(ctx, 100000, 1, nil, "wide")
	if err == nil {
		err = res.Err
	}
	policy("100000 partitions", "kafka.max_partitions_per_topic", err, res.ErrMessage)
	after := measure(t, p, rc)
	if now := topics(); now != registry {
		t.Fatalf("the refused topic reached Redis: topics %s, were %s", now, registry)
	}
	growth(t, "a refused 100000-partition CreateTopics", before, after, 8*mib, 256<<10)
	t.Logf("kadm: %s", res.ErrMessage)

	// Several topics that add up past max_partitions (100, with the
	// internal __consumer_offsets' 1): refused at the one that crosses it.
	created, err := adm.CreateTopics(ctx, 30, 1, nil, "t1", "t2", "t3", "t4")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t1", "t2", "t3"} {
		if r := created[name]; r.Err != nil {
			t.Fatalf("%s: %v %s", name, r.Err, r.ErrMessage)
		}
	}
	policy("the fourth topic of 30", "kafka.max_partitions", created["t4"].Err, created["t4"].ErrMessage)
	t.Logf("kadm: t4: %s", created["t4"].ErrMessage)
	grown, err := adm.UpdatePartitions(ctx, 40, "t1")
	if err != nil {
		t.Fatal(err)
	}
	policy("CreatePartitions past the total", "kafka.max_partitions", grown["t1"].Err, grown["t1"].ErrMessage)
	if _, err := adm.CreateTopic(ctx, 9, 1, nil, "fill"); err != nil { // 100 in all
		t.Fatal(err)
	}

	// Auto-creation past the cap: Produce answers with the message,
	// Metadata with the code.
	c := dialKafka(t, p.kafkaAddr, "")
	pres, err := c.roundTrip(produceV9("auto", 0, []byte{}))
	if err != nil {
		t.Fatal(err)
	}
	rp := pres.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	msg := ""
	if rp.ErrorMessage != nil {
		msg = *rp.ErrorMessage
	}
	policy("auto-create by Produce", "kafka.max_partitions", kerr.ErrorForCode(rp.ErrorCode), msg)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	md.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("auto")
	md.Topics = append(md.Topics, mt)
	mres, err := c.roundTrip(md)
	if err != nil {
		t.Fatal(err)
	}
	if code := mres.(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("auto-create by Metadata: error %d, want POLICY_VIOLATION", code)
	}
	if reg := topics(); strings.Contains(reg, "auto") || strings.Contains(reg, "t4") || strings.Contains(reg, "wide") {
		t.Fatalf("refused topics reached Redis: %s", reg)
	}
	p.alive(t)
}

// Connections: silent ones and ones that announce a 100 MB frame and
// stall cost korvet little; max_connections and max_connections_per_ip
// refuse at exactly the cap; the SASL deadline and the idle timeout close
// connections.
func TestHostileConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Run("silent and stalled", testSilentConnections)
	t.Run("caps", testConnectionCaps)
	t.Run("idle timeout", testIdleTimeout)
	t.Run("SASL deadline", testSASLDeadline)
}

func testSilentConnections(t *testing.T) {
	r := testbed.StartRedis(t)
	p := startKorvetKafka(t, r, "", "max_connections_per_ip = 2000")
	rc := redisClient(t, r)
	if c := dialKafka(t, p.kafkaAddr, ""); !c.served() {
		t.Fatal("ApiVersions not answered")
	}
	const silent, stalled = 1000, 100
	const announced = 100_000_000 // under max_request_bytes (100 MiB)
	before := measure(t, p, rc)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for i := range silent + stalled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.DialTimeout("tcp", p.kafkaAddr, 10*time.Second)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			if i >= silent {
				// A 100 MB frame's size and its first KB, then nothing.
				frame := binary.BigEndian.AppendUint32(nil, announced)
				if _, err := nc.Write(append(frame, make([]byte, 1024)...)); err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	// korvet has taken them all once its gauge says so; then let the
	// stalled ones' first KB arrive and be read.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := metrics(t, p)
		if m["korvet_kafka_connections"] >= silent+stalled+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("korvet counts %v connections, want %d", m["korvet_kafka_connections"], silent+stalled+1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := measure(t, p, rc)
	// Each connection costs its goroutines' stacks and a few small
	// structs: 32 KiB apiece is generous. Without the bounds each stalled
	// one held a 100 MB buffer and each silent one 128 KiB of buffers.
	growth(t, fmt.Sprintf("%d silent connections and %d that announced a %d MB frame and stalled", silent, stalled, announced/1_000_000),
		before, after, (silent+stalled)*32<<10, 1*mib)
	t.Logf("per connection: %.1f KiB RSS", float64(after.rss-before.rss)/(silent+stalled)/1024)
	if c := dialKafka(t, p.kafkaAddr, ""); !c.served() {
		t.Fatal("a new client is not served")
	}
	p.alive(t)
}

func testConnectionCaps(t *testing.T) {
	r := testbed.StartRedis(t)
	p := startKorvetKafka(t, r, "", "max_connections = 8\nmax_connections_per_ip = 5")
	accepted := func(from string) (*kafkaConn, bool) {
		c := dialKafka(t, p.kafkaAddr, from)
		return c, c.served()
	}
	var first []*kafkaConn
	for i := range 5 {
		c, ok := accepted("127.0.0.1")
		if !ok {
			t.Fatalf("connection %d from 127.0.0.1 refused under the per-IP cap of 5", i+1)
		}
		first = append(first, c)
	}
	if _, ok := accepted("127.0.0.1"); ok {
		t.Fatal("a 6th connection from 127.0.0.1 was served past max_connections_per_ip = 5")
	}
	for i := range 3 {
		if _, ok := accepted("127.0.0.2"); !ok {
			t.Fatalf("connection %d from 127.0.0.2 refused (%d open in all, max 8)", i+1, 5+i)
		}
	}
	if _, ok := accepted("127.0.0.2"); ok {
		t.Fatal("a 9th connection was served past max_connections = 8")
	}
	if _, ok := accepted("127.0.0.3"); ok {
		t.Fatal("a 9th connection (a new IP) was served past max_connections = 8")
	}
	// One leaves; once korvet has seen it go, there is room for one.
	first[0].nc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := accepted("127.0.0.3"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no room 30s after a connection closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	logs := p.waitLogs(10*time.Second, func(logs string) bool {
		return strings.Contains(logs, "connection refused: max_connections_per_ip reached") && strings.Contains(logs, "connection refused: max_connections reached")
	})
	t.Logf("refusals logged: %d per IP, %d total", strings.Count(logs, "max_connections_per_ip reached"), strings.Count(logs, "max_connections reached"))
	if !strings.Contains(logs, "connection refused: max_connections_per_ip reached") || !strings.Contains(logs, "connection refused: max_connections reached") {
		t.Errorf("refusals not logged:\n%s", logs)
	}
}

func testIdleTimeout(t *testing.T) {
	r := testbed.StartRedis(t)
	const idle = time.Second
	p := startKorvetKafka(t, r, "", `connections_max_idle = "1s"`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, p.kafkaAddr)).CreateTopic(ctx, 1, 1, nil, "quiet"); err != nil {
		t.Fatal(err)
	}

	// Silent after one request: closed once idle.
	c := dialKafka(t, p.kafkaAddr, "")
	if !c.served() {
		t.Fatal("ApiVersions not answered")
	}
	took, err := c.waitClosed(20 * time.Second)
	if err != nil {
		t.Fatalf("idle connection: %v", err)
	}
	if took < idle-100*time.Millisecond {
		t.Fatalf("closed %v after its last answer, before connections_max_idle (%v)", took, idle)
	}
	t.Logf("idle connection closed %v after its last answer (connections_max_idle %v)", took.Round(10*time.Millisecond), idle)

	// Waiting on a long poll is not idle: a fetch parked for 3 s is
	// answered on the same connection.
	c = dialKafka(t, p.kafkaAddr, "")
	fr := kmsg.NewPtrFetchRequest()
	fr.Version = 11
	fr.ReplicaID = -1
	fr.MaxWaitMillis = 3000
	fr.MinBytes = 1
	fr.MaxBytes = 1 << 20
	fr.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "quiet"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	fp.CurrentLeaderEpoch, fp.LogStartOffset = -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	start := time.Now()
	if _, err := c.roundTrip(fr); err != nil {
		t.Fatalf("a 3s long poll with connections_max_idle 1s: %v", err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the long poll came back after %v; the test needs it parked past the idle timeout", waited)
	}
	if !c.served() {
		t.Fatal("connection closed after a long poll")
	}
	if _, err := c.waitClosed(20 * time.Second); err != nil {
		t.Fatalf("idle after the long poll: %v", err)
	}
	idleCloses := func(logs string) int { return strings.Count(logs, "closing idle connection") }
	if n := idleCloses(p.waitLogs(10*time.Second, func(logs string) bool { return idleCloses(logs) >= 2 })); n < 2 {
		t.Errorf("%d idle closes logged, want 2 or more", n)
	}
}

func testSASLDeadline(t *testing.T) {
	r := testbed.StartRedis(t)
	const limit = time.Second
	p := startKorvetKafka(t, r, "", "auth = \"sasl\"\nsasl_auth_timeout = \"1s\"")
	add := exec.Command(p.bin, "user", "add", "--config", p.cfg, "alice")
	add.Stdin = strings.NewReader("alice-password\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("korvet user add: %v\n%s", err, out)
	}

	// Connected, asked for the API versions, never authenticated.
	c := dialKafka(t, p.kafkaAddr, "")
	if !c.served() {
		t.Fatal("ApiVersions not answered before authentication")
	}
	took, err := c.waitClosed(20 * time.Second)
	if err != nil {
		t.Fatalf("unauthenticated connection: %v", err)
	}
	if took < limit/2 || took > limit+5*time.Second {
		t.Fatalf("closed after %v, sasl_auth_timeout is %v", took, limit)
	}
	// Mid-handshake counts the same.
	c = dialKafka(t, p.kafkaAddr, "")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = "SCRAM-SHA-256"
	if _, err := c.roundTrip(hs); err != nil {
		t.Fatalf("SaslHandshake: %v", err)
	}
	if _, err := c.waitClosed(20 * time.Second); err != nil {
		t.Fatalf("connection stuck after SaslHandshake: %v", err)
	}
	t.Logf("unauthenticated connection closed %v after connecting (sasl_auth_timeout %v)", took.Round(10*time.Millisecond), limit)

	// An authenticated client is not cut off at the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, p.kafkaAddr, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-password"}.AsSha256Mechanism()), kgo.AllowAutoTopicCreation(), kgo.DisableIdempotentWrite())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "authed", Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatalf("authenticated produce: %v", err)
	}
	time.Sleep(limit + time.Second) // past the deadline, on purpose
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "authed", Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatalf("authenticated produce after the deadline: %v", err)
	}
	deadlineCloses := func(logs string) int { return strings.Count(logs, "SASL authentication not completed in time") }
	if n := deadlineCloses(p.waitLogs(10*time.Second, func(logs string) bool { return deadlineCloses(logs) >= 2 })); n != 2 {
		t.Errorf("%d connections closed for the SASL deadline, want exactly the 2 that never authenticated", n)
	}
}
