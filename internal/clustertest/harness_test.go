package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
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
	c.adm = kafkaload.Admin(t, c.seeds())
	return c
}

func (c *cluster) seeds() []string { return kafkaload.Seeds(c.brokers) }

func (c *cluster) broker(node int32) *testbed.Korvet {
	for _, k := range c.brokers {
		if k.NodeID == node {
			return k
		}
	}
	c.t.Fatalf("no broker with node id %d", node)
	return nil
}

// createTopic creates topic with n partitions and the given configs;
// every partition has a leader before the test starts.
func (c *cluster) createTopic(topic string, partitions int32, configs map[string]*string) {
	c.t.Helper()
	kafkaload.CreateTopic(c.t, c.adm, topic, partitions, configs, 20*time.Second)
}

// leaders asks the cluster who leads each partition of topic and which
// brokers are live.
func (c *cluster) leaders(topic string) (map[int32]int32, []int32, error) {
	return kafkaload.Leaders(c.adm, topic)
}

// waitLeaders waits until every partition of topic has a leader and ok
// holds for the leader map, and returns that map.
func (c *cluster) waitLeaders(topic string, partitions int32, within time.Duration, ok func(map[int32]int32) bool) map[int32]int32 {
	c.t.Helper()
	return kafkaload.WaitLeaders(c.t, c.adm, topic, partitions, within, ok)
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

// measureFailover waits until every partition in moved took a record
// handed to the producer after t0, logs the time from t0 to the first and
// to the last such acknowledgement, and prints a line "failover: ...ms"
// for scripts.
func measureFailover(t *testing.T, lp *kafkaload.Producer, what string, t0 time.Time, moved []int32, within time.Duration) time.Duration {
	t.Helper()
	var first map[int32]time.Time
	testbed.WaitFor(t, within, fmt.Sprintf("a produce to each of partitions %v after %s", moved, what), func() bool {
		var ok bool
		first, ok = lp.FirstAckAfter(t0, moved)
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
func (g *groupMembers) waitConsumed(t *testing.T, acked []kafkaload.Ack, within time.Duration) {
	t.Helper()
	testbed.Eventually(t, within, fmt.Sprintf("group %s delivers every acknowledged record", g.group), func() (bool, string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		missing := 0
		for _, a := range acked {
			if g.consumed[a.Partition][a.Offset] == 0 {
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
