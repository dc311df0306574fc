package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbed.RemoveKorvetBuild()
	os.Exit(code)
}

// lease is the brokers' kafka.broker_session_timeout in these tests.
const lease = 2 * time.Second

// cluster is n korvet brokers on one redis-server.
type cluster struct {
	t       *testing.T
	redis   *testbed.Redis
	brokers []*testbed.Korvet
	adm     *kadm.Client
}

// needCluster skips t under -short, and while this checkout cannot run
// several brokers on one Redis (issue 14: the broker lease config key
// kafka.broker_session_timeout comes with it).
func needCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs korvet brokers")
	}
	if !testbed.KorvetKnows(t, "kafka", "broker_session_timeout") {
		t.Skip("this korvet cannot run several brokers on one Redis yet (no kafka.broker_session_timeout)")
	}
}

// startCluster starts n brokers, node ids 1..n, and an admin client
// seeded with all of them.
func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	r := testbed.StartRedis(t)
	c := &cluster{t: t, redis: r, brokers: testbed.StartCluster(t, r.URL, n)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c.adm = kadm.NewClient(cl)
	return c
}

func (c *cluster) seeds() []string {
	s := make([]string, len(c.brokers))
	for i, k := range c.brokers {
		s[i] = k.KafkaAddr
	}
	return s
}

func (c *cluster) broker(node int32) *testbed.Korvet {
	for _, k := range c.brokers {
		if k.NodeID == node {
			return k
		}
	}
	c.t.Fatalf("no broker with node id %d", node)
	return nil
}

// createTopic creates topic with n partitions and the given configs.
func (c *cluster) createTopic(topic string, partitions int32, configs map[string]*string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	// Every partition has a leader before the test starts.
	c.waitLeaders(topic, partitions, 20*time.Second, func(map[int32]int32) bool { return true })
}

// leaders asks the cluster who leads each partition of topic and which
// brokers are live (the admin client skips dead brokers).
func (c *cluster) leaders(topic string) (map[int32]int32, []int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := c.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	out := map[int32]int32{}
	for p, d := range td.Partitions {
		if d.Err == nil && d.Leader >= 0 {
			out[p] = d.Leader
		}
	}
	var nodes []int32
	for _, b := range md.Brokers {
		nodes = append(nodes, b.NodeID)
	}
	slices.Sort(nodes)
	return out, nodes, nil
}

// waitLeaders waits until every partition of topic has a leader and ok
// holds for the leader map, and returns that map.
func (c *cluster) waitLeaders(topic string, partitions int32, within time.Duration, ok func(map[int32]int32) bool) map[int32]int32 {
	c.t.Helper()
	var last map[int32]int32
	eventually(c.t, within, "leaders of "+topic, func() (bool, string) {
		m, _, err := c.leaders(topic)
		last = m
		return err == nil && len(m) == int(partitions) && ok(m), fmt.Sprintf("leaders %v, error %v", m, err)
	})
	return last
}

// waitBrokers waits until Metadata lists exactly the given live brokers.
func (c *cluster) waitBrokers(topic string, want []int32, within time.Duration) {
	c.t.Helper()
	slices.Sort(want)
	testbed.WaitFor(c.t, within, fmt.Sprintf("metadata lists brokers %v", want), func() bool {
		_, nodes, err := c.leaders(topic)
		return err == nil && slices.Equal(nodes, want)
	})
}

// eventually polls cond until it holds, failing the test with cond's
// last word on the state when within passes first.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
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

// ledBy lists the partitions a node leads, sorted.
func ledBy(leaders map[int32]int32, node int32) []int32 {
	var ps []int32
	for p, n := range leaders {
		if n == node {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// ack is one acknowledged record: its sequence number, where korvet put
// it, when it was handed to the client and when it was acknowledged.
type ack struct {
	seq       int
	partition int32
	offset    int64
	sent      time.Time
	acked     time.Time
}

// loadProducer produces numbered, keyed records (value "seq=N", key
// key-NNN) with franz-go's idempotent acks=all producer, retrying without
// limit, seeded with every broker.
type loadProducer struct {
	cl     *kgo.Client
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	acked  []ack
	failed []error
	sent   int
}

func startLoad(t *testing.T, seeds []string, topic string, extra ...kgo.Opt) *loadProducer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(2000), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	lp := &loadProducer{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
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
	sent := time.Now()
	rec := &kgo.Record{Key: fmt.Appendf(nil, "key-%03d", seq%200), Value: fmt.Appendf(nil, "seq=%d", seq)}
	lp.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		now := time.Now()
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if err != nil {
			lp.failed = append(lp.failed, fmt.Errorf("seq %d: %w", seq, err))
			return
		}
		lp.acked = append(lp.acked, ack{seq: seq, partition: r.Partition, offset: r.Offset, sent: sent, acked: now})
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

// firstAckAfter is, per partition in ps, the first acknowledgement of a
// record handed to the client after t0 (so written after t0); ok false
// while one of them has none yet.
func (lp *loadProducer) firstAckAfter(t0 time.Time, ps []int32) (map[int32]time.Time, bool) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	first := map[int32]time.Time{}
	for _, a := range lp.acked {
		if !a.sent.After(t0) || !slices.Contains(ps, a.partition) {
			continue
		}
		if f, ok := first[a.partition]; !ok || a.acked.Before(f) {
			first[a.partition] = a.acked
		}
	}
	return first, len(first) == len(ps)
}

// finish stops producing, waits until every record sent is answered and
// returns the acknowledgements; no record may fail.
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
	return slices.Clone(lp.acked)
}

// measureFailover waits until every partition in moved took a record
// handed to the producer after t0, logs the time from t0 to the first and
// to the last such acknowledgement, and prints a line "failover: ...ms"
// for scripts.
func measureFailover(t *testing.T, lp *loadProducer, what string, t0 time.Time, moved []int32, within time.Duration) time.Duration {
	t.Helper()
	var first map[int32]time.Time
	testbed.WaitFor(t, within, fmt.Sprintf("a produce to each of partitions %v after %s", moved, what), func() bool {
		var ok bool
		first, ok = lp.firstAckAfter(t0, moved)
		return ok
	})
	var lo, hi time.Duration
	for _, at := range first {
		d := at.Sub(t0)
		if lo == 0 || d < lo {
			lo = d
		}
		hi = max(hi, d)
	}
	t.Logf("%s: first produce to a moved partition after %v, to all %d moved partitions %v after", what, lo.Round(time.Millisecond), len(moved), hi.Round(time.Millisecond))
	fmt.Printf("failover: %dms (%s, first moved partition; all %d after %dms)\n", lo.Milliseconds(), what, len(moved), hi.Milliseconds())
	return hi
}

// unanswered marks, in checkLog's extra, a record whose produce got no
// answer: it may be in the log, once.
const unanswered = -2

// checkLog reads every partition of topic from the start with a fresh
// consumer and checks that each acknowledged record is in the log exactly
// once, at the offset it was acknowledged with, that offsets are dense and
// that each partition holds the producer's records in the order sent. A
// value that is not "seq=N" must be in extra (value -> where it was
// acknowledged; offset -1: it must not be in the log at all; unanswered:
// at most once).
func checkLog(t *testing.T, seeds []string, topic string, acked []ack, extra map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	total, parts := int64(0), 0
	for _, end := range endOffsets(t, kadm.NewClient(acl), topic) {
		total += end
		parts++
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type pos struct {
		p int32
		o int64
	}
	at := map[pos]int{}        // seq at each offset
	seen := map[int]int{}      // times each seq is in the log
	lastSeq := map[int32]int{} // per partition, to check order
	next := map[int32]int64{}  // per partition, to check density
	read := int64(0)
	for read < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records: %v", read, total, ctx.Err())
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("read back: %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if r.Offset != next[r.Partition] {
				t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			seq, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "seq="))
			if err != nil || !strings.HasPrefix(string(r.Value), "seq=") {
				want, ok := extra[string(r.Value)]
				switch {
				case !ok:
					t.Errorf("%d/%d: record %q that nobody produced", r.Partition, r.Offset, r.Value)
				case want == unanswered:
					// Never answered: it may be in the log, once.
				case want < 0:
					t.Errorf("%d/%d: record %q is in the log, but its produce failed", r.Partition, r.Offset, r.Value)
				case want != r.Offset:
					t.Errorf("%d/%d: record %q acknowledged at offset %d", r.Partition, r.Offset, r.Value, want)
				}
				delete(extra, string(r.Value)) // a second copy is then "nobody produced"
				return
			}
			if last, ok := lastSeq[r.Partition]; ok && seq <= last {
				t.Errorf("partition %d offset %d: seq %d after seq %d (duplicate or out of order)", r.Partition, r.Offset, seq, last)
			}
			lastSeq[r.Partition] = seq
			at[pos{r.Partition, r.Offset}] = seq
			seen[seq]++
		})
	}
	for v, o := range extra {
		if o >= 0 {
			t.Errorf("record %q was acknowledged at offset %d but is not in the log", v, o)
		}
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
	t.Logf("log of %s: %d records in %d partitions; %d acknowledged records checked", topic, read, parts, len(acked))
}

// groupMembers is a consumer group of several kgo members that commit
// what they polled before they let a rebalance happen
// (BlockRebalanceOnPoll), so that a partition's next owner starts at or
// after every commit korvet accepted before it was assigned.
type groupMembers struct {
	t      *testing.T
	group  string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu           sync.Mutex
	committed    map[int32]int64         // highest accepted commit per partition
	consumed     map[int32]map[int64]int // times each offset was delivered
	fresh        map[int]map[int32]int64 // per member: newly assigned partitions -> commit floor
	starts       int                     // partitions (re)started after an assignment
	commits      int                     // accepted commits
	errs         []string                // violations seen by the members
	lastCommitAt map[int32]time.Time
}

// startGroup starts members kgo clients in group on topic; proto848 uses
// the KIP-848 consumer protocol instead of the classic one.
func startGroup(t *testing.T, seeds []string, topic, group string, members int, proto848 bool) *groupMembers {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupMembers{t: t, group: group, cancel: cancel, committed: map[int32]int64{},
		consumed: map[int32]map[int64]int{}, fresh: map[int]map[int32]int64{}, lastCommitAt: map[int32]time.Time{}}
	for m := range members {
		g.fresh[m] = map[int32]int64{}
		opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.MetadataMinAge(100 * time.Millisecond), kgo.SessionTimeout(10 * time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, as map[string][]int32) {
				g.mu.Lock()
				defer g.mu.Unlock()
				for _, p := range as[topic] {
					g.fresh[m][p] = g.committed[p]
				}
			}),
		}
		if proto848 {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer cl.Close()
			g.run(ctx, cl, m)
		}()
	}
	return g
}

func (g *groupMembers) run(ctx context.Context, cl *kgo.Client, m int) {
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 500)
		recs := fs.Records()
		g.mu.Lock()
		for _, r := range recs {
			if floor, ok := g.fresh[m][r.Partition]; ok {
				// The first record of a newly assigned partition: the
				// group resumes from its commits, not before them.
				delete(g.fresh[m], r.Partition)
				g.starts++
				if r.Offset < floor {
					g.errs = append(g.errs, fmt.Sprintf("member %d restarted partition %d at offset %d, below the commit %d korvet had accepted", m, r.Partition, r.Offset, floor))
				}
			}
			if g.consumed[r.Partition] == nil {
				g.consumed[r.Partition] = map[int64]int{}
			}
			g.consumed[r.Partition][r.Offset]++
		}
		g.mu.Unlock()
		if len(recs) > 0 {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			err := cl.CommitRecords(cctx, recs...)
			ccancel()
			if err == nil {
				g.mu.Lock()
				for _, r := range recs {
					g.committed[r.Partition] = max(g.committed[r.Partition], r.Offset+1)
					g.lastCommitAt[r.Partition] = time.Now()
				}
				g.commits++
				g.mu.Unlock()
			}
		}
		cl.AllowRebalance()
	}
}

func (g *groupMembers) commitCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commits
}

// waitCommits waits until the group made n more accepted commits.
func (g *groupMembers) waitCommits(t *testing.T, n int, within time.Duration) {
	t.Helper()
	want := g.commitCount() + n
	testbed.WaitFor(t, within, fmt.Sprintf("group %s: %d accepted commits", g.group, want), func() bool { return g.commitCount() >= want })
}

// waitConsumed waits until the group has delivered every acknowledged
// record at least once.
func (g *groupMembers) waitConsumed(t *testing.T, acked []ack, within time.Duration) {
	t.Helper()
	eventually(t, within, fmt.Sprintf("group %s delivers every acknowledged record", g.group), func() (bool, string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		missing := 0
		for _, a := range acked {
			if g.consumed[a.partition][a.offset] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d not delivered", missing, len(acked))
	})
}

// close stops the members and checks what they saw: no partition
// restarted below an accepted commit. It reports redeliveries.
func (g *groupMembers) close(t *testing.T) (committed map[int32]int64) {
	t.Helper()
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.errs {
		t.Error(e)
	}
	again := 0
	for _, offs := range g.consumed {
		for _, n := range offs {
			again += n - 1
		}
	}
	t.Logf("group %s: %d accepted commits, %d partition starts, %d redeliveries (the uncommitted tail at each move)", g.group, g.commits, g.starts, again)
	out := map[int32]int64{}
	for p, o := range g.committed {
		out[p] = o
	}
	return out
}

// commitWatch polls the group's committed offsets and records any that
// went backwards.
type commitWatch struct {
	stop chan struct{}
	done chan struct{}
	errs []string
	seen int
}

func watchCommits(adm *kadm.Client, topic, group string) *commitWatch {
	w := &commitWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		high := map[int32]int64{}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			got, err := adm.FetchOffsets(ctx, group)
			cancel()
			if err != nil {
				continue // a broker may be down: only answers count
			}
			w.seen++
			got.Each(func(o kadm.OffsetResponse) {
				if o.Topic != topic || o.Err != nil {
					return
				}
				if o.At < high[o.Partition] {
					w.errs = append(w.errs, fmt.Sprintf("group %s partition %d: committed offset went back from %d to %d", group, o.Partition, high[o.Partition], o.At))
				}
				high[o.Partition] = max(high[o.Partition], o.At)
			})
		}
	}()
	return w
}

func (w *commitWatch) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	for _, e := range w.errs {
		t.Error(e)
	}
	if w.seen == 0 {
		t.Error("the commit watcher never got an answer")
	}
}

// checkResume checks that korvet holds at least the commits the group saw
// accepted, and that a new member of the group starts each partition at
// exactly the committed offset.
func checkResume(t *testing.T, seeds []string, adm *kadm.Client, topic, group string, want map[int32]int64, ends map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	committed := map[int32]int64{}
	for p, o := range want {
		r, ok := got.Lookup(topic, p)
		switch {
		case !ok || r.Err != nil:
			t.Errorf("group %s has no commit for partition %d (%v), but a commit of %d was accepted", group, p, r.Err, o)
		case r.At < o:
			t.Errorf("group %s partition %d committed at %d, but a commit of %d was accepted", group, p, r.At, o)
		default:
			committed[p] = r.At
		}
	}
	// Resume: a member of the group starts where the commits say.
	todo := map[int32]bool{}
	for p, o := range committed {
		if o < ends[p] {
			todo[p] = true
		}
	}
	if len(todo) == 0 {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(todo) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s: no records from partitions %v after resuming", group, keys(todo))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !todo[r.Partition] {
				return
			}
			delete(todo, r.Partition)
			if r.Offset != committed[r.Partition] {
				t.Errorf("group %s resumed partition %d at %d, but its commit is %d", group, r.Partition, r.Offset, committed[r.Partition])
			}
		})
	}
}

func keys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// endOffsets lists the end offset of each partition of topic.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	// Leadership may still be settling (a broker just came back and takes
	// its partitions again): retriable answers are asked again until the
	// deadline.
	deadline := time.Now().Add(20 * time.Second)
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
			t.Fatalf("list end offsets: %v", err)
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
