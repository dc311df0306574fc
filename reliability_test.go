package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
	"github.com/korvet/korvet/resp"
)

// crashLoad is the produce load of these tests, from sequence number
// first on: franz-go's default producer (idempotent, acks=all, retrying
// without limit), backing off 100ms, with time to flush across a restart.
func crashLoad(first int) kafkaload.Options {
	return kafkaload.Options{FirstSeq: first, PauseEvery: 100, Backoff: 100 * time.Millisecond, FlushWithin: 120 * time.Second}
}

// groupConsumer consumes in a group and commits after every poll,
// remembering the offsets korvet accepted.
type groupConsumer struct {
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	committed map[int32]int64 // next offset to read, per partition
	commits   int
}

func startGroupConsumer(t *testing.T, addr, topic, group string) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupConsumer{cancel: cancel, done: make(chan struct{}), committed: map[int32]int64{}}
	go func() {
		defer close(g.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			err := cl.CommitRecords(cctx, recs...)
			ccancel()
			if err != nil {
				continue // korvet may be down; the commit may or may not have landed
			}
			g.mu.Lock()
			for _, r := range recs {
				g.committed[r.Partition] = max(g.committed[r.Partition], r.Offset+1)
			}
			g.commits++
			g.mu.Unlock()
		}
	}()
	return g
}

func (g *groupConsumer) snapshot() (map[int32]int64, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := make(map[int32]int64, len(g.committed))
	for p, o := range g.committed {
		m[p] = o
	}
	return m, g.commits
}

// waitCommits waits until the group has made n commits.
func (g *groupConsumer) waitCommits(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, c := g.snapshot(); c >= n {
			return
		}
		if time.Now().After(deadline) {
			_, c := g.snapshot()
			t.Fatalf("the group made %d commits in %v, want %d", c, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *groupConsumer) close() (map[int32]int64, int) {
	g.cancel()
	<-g.done
	return g.snapshot()
}

// checkCommits checks that korvet holds, for each partition, at least the
// offsets the group saw accepted.
func checkCommits(t *testing.T, ctx context.Context, adm *kadm.Client, topic, group string, want map[int32]int64, when string) kadm.OffsetResponses {
	t.Helper()
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("%s: fetch offsets: %v", when, err)
	}
	for p, o := range want {
		r, ok := got.Lookup(topic, p)
		switch {
		case !ok || r.Err != nil:
			t.Errorf("%s: group %s has no commit for partition %d (error %v), but a commit of %d was acknowledged", when, group, p, r.Err, o)
		case r.At < o:
			t.Errorf("%s: group %s partition %d committed at %d, but a commit of %d was acknowledged", when, group, p, r.At, o)
		}
	}
	return got
}

// TestCrashRecovery SIGKILLs korvet three times during a steady
// idempotent produce and a committing group consumer. After the restarts
// every acknowledged record is in the log exactly once, in order, where
// korvet said; the group's commits held; the KV index agrees with the log
// (over HTTP, and by `korvet index verify` once korvet stops).
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := startKorvet(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic, group = "crash", "crash-group"
	acl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"korvet.index.enable": kadm.StringPtr("true")}, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}

	lp := kafkaload.StartProducer(t, []string{p.kafkaAddr}, topic, crashLoad(0))
	gc := startGroupConsumer(t, p.kafkaAddr, topic, group)
	const kills = 3
	commitsSeen := 0
	for i := range kills {
		// The group commits in every round (it rejoins after each start),
		// so each kill has commits to keep; and the kill lands in the
		// middle of the produce stream.
		gc.waitCommits(t, commitsSeen+1, 2*time.Minute)
		lp.WaitMore(t, 3000, 2*time.Minute)
		before, commits := gc.snapshot()
		commitsSeen = commits
		p.kill(t)
		t.Logf("kill %d: %d records acknowledged, %d commits", i+1, lp.AckedCount(), commits)
		p.launch(t)
		checkCommits(t, ctx, adm, topic, group, before, fmt.Sprintf("after kill %d", i+1))
	}
	lp.WaitMore(t, 3000, 2*time.Minute)
	acked := lp.Finish(t)

	// The group resumes where its commits say.
	committed, commits := gc.close()
	got := checkCommits(t, ctx, adm, topic, group, committed, "after the run")
	resume := map[int32]int64{}
	got.Each(func(o kadm.OffsetResponse) { resume[o.Partition] = o.At })
	t.Logf("group made %d commits; committed offsets %v", commits, resume)
	// A tail of records so that every partition has some past the commits.
	tail := kafkaload.StartProducer(t, []string{p.kafkaAddr}, topic, crashLoad(lp.Sent()))
	tail.WaitMore(t, 600, time.Minute)
	acked = append(acked, tail.Finish(t)...)
	gcl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	first := map[int32]int64{}
	for len(first) < 3 {
		fs := gcl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group resume: saw partitions %v only", first)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	gcl.Close()
	for part, off := range first {
		if want, ok := resume[part]; ok && off != want || !ok && off != 0 {
			t.Errorf("group resumed partition %d at %d, committed %d (%v)", part, off, want, ok)
		}
	}

	last := kafkaload.CheckLog(t, []string{p.kafkaAddr}, adm, topic, kafkaload.Check{Acked: acked, Within: 2 * time.Minute})

	// The KV view converges on the log: every key reads as its last value.
	hc := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for key, want := range last {
		for {
			code, body, err := httpGet(hc, p.httpBase+"/v1/kv/"+topic+"/"+key)
			if err == nil && code == http.StatusOK && string(body) == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("KV %s: %d %q %v, want %q", key, code, body, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("KV view: all %d keys read as their last value", len(last))

	if _, err := p.stop(t, 30*time.Second); err != nil {
		t.Errorf("korvet exited with %v after SIGTERM", err)
	}
	out, err := exec.Command(p.bin, "index", "verify", "--config", p.cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": 0 differences") {
		t.Fatalf("korvet index verify: %v\n%s", err, out)
	}
	t.Logf("index verify: %s", strings.TrimSpace(string(out)))
}

// probeClient produces without idempotence and without retries, so a
// produce error reaches the test instead of being retried away.
func probeClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// expectStorageError checks that err is Kafka's retriable
// KAFKA_STORAGE_ERROR.
func expectStorageError(t *testing.T, err error, when string) {
	t.Helper()
	if !errors.Is(err, kerr.KafkaStorageError) || !kerr.IsRetriable(err) {
		t.Fatalf("%s: produce error %v, want the retriable KAFKA_STORAGE_ERROR", when, err)
	}
}

// alive fails the test when korvet has exited.
func (p *proc) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.exited:
		p.done = true
		t.Fatalf("korvet exited: %v", err)
	default:
	}
}

// waitStatus polls url until it answers code.
func waitStatus(t *testing.T, url string, code int, within time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(within)
	for {
		got, body, err := httpGet(hc, url)
		if err == nil && got == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s %v; want %d within %v", url, got, body, err, code, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisOutage stops Redis for about 10 s under produce load: korvet
// stays up, /readyz goes red and green again, produce gets a retriable
// error meanwhile, the producer carries on afterwards and nothing
// acknowledged is lost.
func TestRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := testbed.StartRedis(t) // AOF on, everysec
	p := startKorvetOn(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic = "outage"
	acl := probeClient(t, p.kafkaAddr)
	if _, err := kadm.NewClient(acl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	lp := kafkaload.StartProducer(t, []string{p.kafkaAddr}, topic, crashLoad(0))
	lp.WaitMore(t, 3000, 2*time.Minute)

	r.Stop()
	down := time.Now()
	atStop := lp.AckedCount()
	waitStatus(t, p.httpBase+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	err := acl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("during the outage")}).FirstErr()
	pcancel()
	expectStorageError(t, err, "Redis down")
	time.Sleep(time.Until(down.Add(10 * time.Second))) // the outage lasts 10s, on purpose
	p.alive(t)
	duringOutage := lp.AckedCount() - atStop

	r.Restart(t)
	up := time.Now()
	waitStatus(t, p.httpBase+"/readyz", http.StatusOK, time.Minute)
	ready := time.Since(up)
	lp.WaitMore(t, 3000, 2*time.Minute)
	acked := lp.Finish(t)
	t.Logf("Redis down %v; %d records acknowledged at the stop, %d more while down (in flight); /readyz green %v after Redis returned; %d acknowledged in all",
		up.Sub(down).Round(100*time.Millisecond), atStop, duringOutage, ready.Round(10*time.Millisecond), lp.AckedCount())
	kafkaload.CheckLog(t, []string{p.kafkaAddr}, nil, topic, kafkaload.Check{Acked: acked, Within: 2 * time.Minute})
	p.alive(t)
}

// TestRedisFull fills a Redis with maxmemory and noeviction: produce gets
// the retriable KAFKA_STORAGE_ERROR, consumers still read everything,
// the status page says why, and produce works again once Redis has room.
func TestRedisFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := testbed.StartRedis(t, "--maxmemory", "20mb", "--maxmemory-policy", "noeviction")
	p := startKorvetOn(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic = "full"
	cl := probeClient(t, p.kafkaAddr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	value := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
	acked := 0
	var err error
	for ; acked < 2000; acked++ {
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		err = cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", acked), Value: value}).FirstErr()
		pcancel()
		if err != nil {
			break
		}
	}
	if err == nil {
		t.Fatalf("%d records of 64 KiB went into a 20 MB Redis without an error", acked)
	}
	expectStorageError(t, err, "Redis full")
	t.Logf("Redis full after %d records of 64 KiB: %v", acked, err)
	p.alive(t)

	// Consumers keep reading: everything acknowledged, in order.
	cons, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for n := 0; n < acked; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", n, acked)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("consume with Redis full: %v", fe.Err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Offset != int64(n) || string(rec.Key) != fmt.Sprint(n) || len(rec.Value) != len(value) {
				t.Fatalf("record %d: offset %d key %q, %d bytes", n, rec.Offset, rec.Key, len(rec.Value))
			}
			n++
		})
	}

	// The status page says why.
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := httpGet(hc, p.httpBase+"/api/v1/status")
		if err == nil && code == http.StatusOK && strings.Contains(string(body), "maxmemory") && strings.Contains(string(body), "refuses writes") {
			t.Logf("status: %s", warningsOf(body))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/v1/status does not warn about Redis memory: %d %s %v", code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitStatus(t, p.httpBase+"/healthz", http.StatusOK, 10*time.Second)

	// Room again: produce goes through, after the failed appends' resync.
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if rep, err := rc.Do(ctx, "CONFIG", "SET", "maxmemory", "0"); err != nil || rep.Err() != nil {
		t.Fatalf("CONFIG SET maxmemory 0: %v %v", err, rep.Err())
	}
	retrying, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer retrying.Close()
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	res, err := retrying.ProduceSync(pctx, &kgo.Record{Topic: topic, Key: []byte("after"), Value: value}).First()
	if err != nil {
		t.Fatalf("produce once Redis has room: %v", err)
	}
	if res.Offset != int64(acked) {
		t.Errorf("record after the outage at offset %d, want %d (no gap, no lost offsets)", res.Offset, acked)
	}
	p.alive(t)
}

// warningsOf picks the warnings out of a status JSON for the log.
func warningsOf(body []byte) string {
	s := string(body)
	if i := strings.Index(s, `"warnings"`); i >= 0 {
		s = s[i:]
		if j := strings.Index(s, "]"); j >= 0 {
			return s[:j+1]
		}
	}
	return "(no warnings)"
}
