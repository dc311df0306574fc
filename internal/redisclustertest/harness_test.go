package redisclustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbed.RemoveKorvetBuild()
	os.Exit(code)
}

// keyspace is redis.keyspace in these tests (korvet's default).
const keyspace = "korvet"

// lease is kafka.broker_session_timeout where several brokers run.
const lease = 2 * time.Second

// env is korvet on a Redis Cluster of 3 masters + 3 replicas.
type env struct {
	t       *testing.T
	rc      *testbed.RedisCluster
	redis   *resp.Client // a cluster client of our own, to look at what korvet wrote
	brokers []*testbed.Korvet
	adm     *kadm.Client
}

// needRedisCluster skips t under -short and while this checkout's korvet
// cannot use a Redis Cluster (no redis.cluster key yet).
func needRedisCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a Redis Cluster and korvet brokers")
	}
	if !testbed.KorvetKnows(t, "redis", "cluster") {
		t.Skip("this korvet has no redis.cluster key yet")
	}
	needClient(t, "redis-cli", "redis-cli", "--version")
}

// needClient skips t when a client program is missing, but fails it in
// CI, where scripts/test.sh installs them.
func needClient(t *testing.T, what string, cmd ...string) {
	t.Helper()
	if err := exec.Command(cmd[0], cmd[1:]...).Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing in CI: %v", what, err)
		}
		t.Skipf("%s is not installed: %v", what, err)
	}
}

// clusterConfig is the korvet config (dotted keys) that points a broker
// at rc: the first master as redis.url, every node as a seed.
func clusterConfig(rc *testbed.RedisCluster) string {
	quoted := make([]string, len(rc.Seeds))
	for i, s := range rc.Seeds {
		quoted[i] = strconv.Quote(s)
	}
	return fmt.Sprintf("redis.cluster = true\nredis.seeds = [%s]\n", strings.Join(quoted, ", "))
}

// startEnv starts a 3+3 Redis Cluster and n korvet brokers (node ids
// 1..n) on it, each with extra (dotted keys) in its config.
func startEnv(t *testing.T, n int, extra string) *env {
	t.Helper()
	rc := testbed.StartRedisCluster(t, 3, 1)
	rcl, err := resp.New(rc.URL, resp.Options{Cluster: true, Seeds: rc.Seeds, PoolSize: 4, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("cluster client: %v", err)
	}
	t.Cleanup(func() { rcl.Close() })
	e := &env{t: t, rc: rc, redis: rcl}
	for i := range n {
		o := testbed.KorvetOptions{RedisURL: rc.URL, NodeID: int32(i + 1), Extra: clusterConfig(rc) + extra}
		if n > 1 {
			o.SessionTimeout = lease
		}
		e.brokers = append(e.brokers, testbed.StartKorvet(t, o))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e.adm = kadm.NewClient(cl)
	return e
}

func (e *env) seeds() []string {
	s := make([]string, len(e.brokers))
	for i, k := range e.brokers {
		s[i] = k.KafkaAddr
	}
	return s
}

// createTopic creates topic and waits until every partition has a leader.
func (e *env) createTopic(topic string, partitions int32, configs map[string]*string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		e.t.Fatalf("create topic %s: %v", topic, err)
	}
	e.waitLeaders(topic, partitions, 30*time.Second, func(map[int32]int32) bool { return true })
}

// leaders asks the brokers who leads each partition of topic.
func (e *env) leaders(topic string) (map[int32]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := e.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	out := map[int32]int32{}
	for p, d := range td.Partitions {
		if d.Err == nil && d.Leader >= 0 {
			out[p] = d.Leader
		}
	}
	return out, nil
}

// waitLeaders waits until every partition of topic has a leader and ok
// holds for the leader map, and returns that map.
func (e *env) waitLeaders(topic string, partitions int32, within time.Duration, ok func(map[int32]int32) bool) map[int32]int32 {
	e.t.Helper()
	var last map[int32]int32
	eventually(e.t, within, "leaders of "+topic, func() (bool, string) {
		m, err := e.leaders(topic)
		last = m
		return err == nil && len(m) == int(partitions) && ok(m), fmt.Sprintf("leaders %v, error %v", m, err)
	})
	return last
}

// eventually polls cond until it holds, failing the test with cond's
// last word on the state when within passes first.
func eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, within, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// partitionTag is the hash tag korvet's cluster key layout gives a
// partition's keys ({topic:partition}, engine/keys).
func partitionTag(topic string, p int32) string { return fmt.Sprintf("{%s:%d}", topic, p) }

// partitionSlot is the hash slot of a partition's keys.
func partitionSlot(topic string, p int32) int { return resp.Slot(partitionTag(topic, p)) }

// shards is the cluster's slot map now, from our own cluster client.
func (e *env) shards() []resp.Shard {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sh, err := e.redis.Shards(ctx)
	if err != nil {
		e.t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	if len(sh) == 0 {
		e.t.Fatal("the cluster client sees no shards")
	}
	return sh
}

// masterOf is the master serving slot in shards ("" if none does).
func masterOf(shards []resp.Shard, slot int) string {
	for _, s := range shards {
		for _, r := range s.Slots {
			if slot >= r[0] && slot <= r[1] {
				return s.Master
			}
		}
	}
	return ""
}

// nodeKeys lists the keys matching pattern on the node at addr.
func (e *env) nodeKeys(addr, pattern string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := e.redis.DoNode(ctx, addr, "KEYS", pattern)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("KEYS %s on %s: %w", pattern, addr, err)
	}
	var out []string
	r.ForEach(func(k resp.Reply) bool {
		out = append(out, string(k.Bytes()))
		return true
	})
	return out, nil
}

// segmentStreams lists, per master address, korvet's segment streams of
// topic (every topic if topic is "") on that master.
func (e *env) segmentStreams(topic string) (map[string][]string, error) {
	pattern := keyspace + ":storage:local:*"
	if topic != "" {
		pattern = keyspace + ":storage:local:{" + topic + ":*"
	}
	out := map[string][]string{}
	for _, s := range e.shards() {
		ks, err := e.nodeKeys(s.Master, pattern)
		if err != nil {
			return nil, err
		}
		slices.Sort(ks)
		out[s.Master] = ks
	}
	return out, nil
}

// record is what a test produced and expects back, byte for byte.
type record struct {
	Partition int32
	Key       []byte // nil: a null key
	Value     []byte
	Headers   []kgo.RecordHeader
}

func (r record) String() string {
	return fmt.Sprintf("p%d key %q value %q (%d bytes) headers %v", r.Partition, r.Key, trim(r.Value), len(r.Value), r.Headers)
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func sameRecord(a, b record) bool {
	if a.Partition != b.Partition || !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// checkRecords compares what was read with what was produced, per
// partition and in order: bytes in == bytes out.
func checkRecords(t *testing.T, who string, got, want []record) {
	t.Helper()
	byP := func(rs []record) map[int32][]record {
		m := map[int32][]record{}
		for _, r := range rs {
			m[r.Partition] = append(m[r.Partition], r)
		}
		return m
	}
	g, w := byP(got), byP(want)
	bad := 0
	for p, ws := range w {
		gs := g[p]
		if len(gs) != len(ws) {
			t.Errorf("%s: partition %d holds %d records, want %d", who, p, len(gs), len(ws))
		}
		for i := range min(len(gs), len(ws)) {
			if !sameRecord(gs[i], ws[i]) {
				if bad++; bad <= 5 {
					t.Errorf("%s: partition %d record %d is %v, want %v", who, p, i, gs[i], ws[i])
				}
			}
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			t.Errorf("%s: %d records in partition %d, where none were produced", who, len(g[p]), p)
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d records differ from what was produced", who, bad)
	}
}

// endOffsets lists the end offset of each partition of topic, asking
// again while leadership settles.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			return out
		}
		if !retriable(err) || time.Now().After(deadline) {
			t.Fatalf("list end offsets of %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retriable tells whether a kadm error, which may wrap several shard
// errors, is one a client retries.
func retriable(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !kerr.IsRetriable(e.Err) {
				return false
			}
		}
		return true
	}
	return kerr.IsRetriable(err)
}

// readAll reads every partition of topic from offset 0 up to the end
// offsets as they are now, with a fresh franz-go consumer, and returns
// the records in the order read (per partition: offset order).
func readAll(t *testing.T, seeds []string, adm *kadm.Client, topic string, within time.Duration) []*kgo.Record {
	t.Helper()
	ends := endOffsets(t, adm, topic)
	total := int64(0)
	for _, o := range ends {
		total += o
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	next := map[int32]int64{}
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s back: %d of %d records within %v", topic, len(out), total, within)
		}
		for _, fe := range fs.Errors() {
			if !kerr.IsRetriable(fe.Err) {
				t.Fatalf("read %s back: partition %d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Errorf("read %s back: partition %d offset %d after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			out = append(out, r)
		})
	}
	return out
}

func asRecords(rs []*kgo.Record) []record {
	out := make([]record, len(rs))
	for i, r := range rs {
		out[i] = record{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	return out
}

// ack is one acknowledged record of a loadProducer.
type ack struct {
	seq       int
	partition int32
	offset    int64
	at        time.Time // when the acknowledgement came
}

// loadProducer produces numbered, keyed records (value "seq=N") with
// franz-go's idempotent acks=all producer, retrying without limit, and
// notes every error franz-go saw on the way, retried or not.
type loadProducer struct {
	cl   *kgo.Client
	log  *errorLog
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	acked  []ack
	failed []error
	sent   int
}

func startLoad(t *testing.T, seeds []string, topic string, extra ...kgo.Opt) *loadProducer {
	t.Helper()
	el := &errorLog{retried: map[string]int{}}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(2000), kgo.MetadataMinAge(100 * time.Millisecond), kgo.WithLogger(el),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	lp := &loadProducer{cl: cl, log: el, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(lp.done)
		for seq := 0; ; seq++ {
			select {
			case <-lp.stop:
				return
			default:
			}
			lp.produce(seq)
			if seq%20 == 19 {
				time.Sleep(5 * time.Millisecond) // a steady stream, not a flood
			}
		}
	}()
	return lp
}

func (lp *loadProducer) produce(seq int) {
	lp.mu.Lock()
	lp.sent++
	lp.mu.Unlock()
	rec := &kgo.Record{Key: fmt.Appendf(nil, "key-%03d", seq%200), Value: fmt.Appendf(nil, "seq=%d", seq)}
	lp.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if err != nil {
			lp.failed = append(lp.failed, fmt.Errorf("seq %d: %w", seq, err))
			return
		}
		lp.acked = append(lp.acked, ack{seq: seq, partition: r.Partition, offset: r.Offset, at: time.Now()})
	})
}

func (lp *loadProducer) ackedCount() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.acked)
}

// waitMore waits until n more records than now are acknowledged.
func (lp *loadProducer) waitMore(t *testing.T, n int, within time.Duration) {
	t.Helper()
	want := lp.ackedCount() + n
	testbed.WaitFor(t, within, fmt.Sprintf("%d acknowledged records", want), func() bool { return lp.ackedCount() >= want })
}

// finish stops producing, waits until every record sent is answered and
// returns the acknowledgements: no record may fail, and franz-go may have
// seen only retriable errors.
func (lp *loadProducer) finish(t *testing.T) []ack {
	t.Helper()
	close(lp.stop)
	<-lp.done
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := lp.cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if len(lp.failed) > 0 {
		t.Errorf("%d of %d records failed (franz-go retries retriable errors without limit, so none should); first: %v", len(lp.failed), lp.sent, lp.failed[0])
	}
	lp.log.check(t)
	return slices.Clone(lp.acked)
}

// errorLog is a kgo.Logger that keeps what a producer's log says about
// errors: the retried produce errors by name (from the debug line
// "produced", whose "to" holds "retrying@OFFSET,N(ERR)") and every line
// at warn or error level or about a failed batch.
type errorLog struct {
	mu      sync.Mutex
	retried map[string]int
	bad     []string
}

func (l *errorLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *errorLog) Log(level kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case msg == "produced":
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] != "to" {
				continue
			}
			s := fmt.Sprint(kv[i+1])
			for {
				j := strings.Index(s, "retrying@")
				if j < 0 {
					break
				}
				s = s[j:]
				a, b := strings.IndexByte(s, '('), strings.IndexByte(s, ')')
				if a < 0 || b < a {
					break
				}
				l.retried[s[a+1:b]]++
				s = s[b:]
			}
		}
	case msg == "batch in a produce request failed", level <= kgo.LogLevelWarn && level > kgo.LogLevelNone:
		l.bad = append(l.bad, fmt.Sprintf("%v %s %v", level, msg, kv))
	}
}

// summary is the retried errors so far, and the last warning.
func (l *errorLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprint(l.retried)
	if len(l.bad) > 0 {
		s += "; last warning: " + l.bad[len(l.bad)-1]
	}
	return s
}

// check fails t for a non-retriable produce error and logs the retried
// ones.
func (l *errorLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	warned := map[string]int{}
	for _, b := range l.bad {
		if strings.Contains(b, "batch in a produce request failed") {
			t.Errorf("producer: %s", b)
		} else {
			warned[b]++
		}
	}
	for w, n := range warned {
		t.Logf("producer (%d times): %s", n, w)
	}
	t.Logf("producer: produce errors franz-go retried: %v", l.retried)
}

// checkLog reads every partition of topic from the start and checks that
// each acknowledged record is in the log exactly once, at the offset it
// was acknowledged with, that offsets are dense and that each partition
// holds the producer's records in the order sent.
func checkLog(t *testing.T, seeds []string, adm *kadm.Client, topic string, acked []ack) {
	t.Helper()
	type pos struct {
		p int32
		o int64
	}
	at := map[pos]int{}
	seen := map[int]int{}
	lastSeq := map[int32]int{}
	recs := readAll(t, seeds, adm, topic, 90*time.Second)
	for _, r := range recs {
		seq, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "seq="))
		if err != nil || !strings.HasPrefix(string(r.Value), "seq=") {
			t.Errorf("%d/%d: record %q that nobody produced", r.Partition, r.Offset, r.Value)
			continue
		}
		if last, ok := lastSeq[r.Partition]; ok && seq <= last {
			t.Errorf("partition %d offset %d: seq %d after seq %d (duplicate or out of order)", r.Partition, r.Offset, seq, last)
		}
		lastSeq[r.Partition] = seq
		at[pos{r.Partition, r.Offset}] = seq
		seen[seq]++
	}
	missing := 0
	for _, a := range acked {
		got, ok := at[pos{a.partition, a.offset}]
		switch {
		case !ok || got != a.seq:
			if missing++; missing <= 10 {
				t.Errorf("acknowledged seq %d at %d/%d: the log has %d there (present: %v)", a.seq, a.partition, a.offset, got, ok)
			}
		case seen[a.seq] != 1:
			t.Errorf("acknowledged seq %d is in the log %d times", a.seq, seen[a.seq])
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged records are not where korvet said", missing, len(acked))
	}
	t.Logf("log of %s: %d records; %d acknowledged records checked", topic, len(recs), len(acked))
}

// tailConsumer reads topic from the start without a group, as records
// arrive, and notes each partition/offset it got.
type tailConsumer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	got  map[int32]map[int64]string
	errs []string
}

func startTail(t *testing.T, seeds []string, topic string) *tailConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tc := &tailConsumer{cancel: cancel, done: make(chan struct{}), got: map[int32]map[int64]string{}}
	go func() {
		defer close(tc.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			tc.mu.Lock()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
					tc.errs = append(tc.errs, fmt.Sprintf("%s[%d]: %v", topic, p, err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if tc.got[r.Partition] == nil {
					tc.got[r.Partition] = map[int64]string{}
				}
				if prev, ok := tc.got[r.Partition][r.Offset]; ok && prev != string(r.Value) {
					tc.errs = append(tc.errs, fmt.Sprintf("partition %d offset %d read as %q, then as %q", r.Partition, r.Offset, prev, r.Value))
				}
				tc.got[r.Partition][r.Offset] = string(r.Value)
			})
			tc.mu.Unlock()
		}
	}()
	t.Cleanup(tc.stop)
	return tc
}

func (tc *tailConsumer) stop() {
	tc.cancel()
	<-tc.done
}

// waitAll waits until the consumer got every acknowledged record, each
// at its acknowledged offset.
func (tc *tailConsumer) waitAll(t *testing.T, acked []ack, within time.Duration) {
	t.Helper()
	eventually(t, within, "the consumer gets every acknowledged record", func() (bool, string) {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		missing := 0
		for _, a := range acked {
			if tc.got[a.partition][a.offset] != fmt.Sprintf("seq=%d", a.seq) {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d missing", missing, len(acked))
	})
	tc.stop()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, e := range tc.errs {
		t.Error("consumer: " + e)
	}
}
