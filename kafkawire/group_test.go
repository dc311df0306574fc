package kafkawire_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// groupOpts are engine options for group tests: a short initial
// rebalance delay keeps joins quick.
func groupOpts() engine.Options {
	return engine.Options{AutoCreateTopics: true, GroupInitialRebalanceDelay: 100 * time.Millisecond}
}

type partOff struct {
	p int32
	o int64
}

// seenSet records consumed records by partition and offset.
type seenSet struct {
	mu     sync.Mutex
	seen   map[partOff]int
	unique atomic.Int64
	dups   atomic.Int64
	// After mark, redelivered records are noted by partition: the lowest
	// offset delivered a second time.
	marked     bool
	minRedeliv map[int32]int64
}

func newSeenSet() *seenSet { return &seenSet{seen: map[partOff]int{}, minRedeliv: map[int32]int64{}} }

func (s *seenSet) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := partOff{r.Partition, r.Offset}
	if s.seen[k] == 0 {
		s.unique.Add(1)
	} else {
		s.dups.Add(1)
		if o, ok := s.minRedeliv[r.Partition]; s.marked && (!ok || r.Offset < o) {
			s.minRedeliv[r.Partition] = r.Offset
		}
	}
	s.seen[k]++
}

func (s *seenSet) mark() {
	s.mu.Lock()
	s.marked = true
	s.mu.Unlock()
}

// member is one group consumer polling in its own goroutine.
type member struct {
	name    string
	cl      *kgo.Client
	cancel  context.CancelFunc
	done    chan struct{}
	revokes atomic.Int64
	// minOff and maxOff are the lowest and highest offsets this member
	// consumed per partition.
	mu             sync.Mutex
	minOff, maxOff map[int32]int64
}

func startMember(t *testing.T, b *broker, name, grp, topic string, seen *seenSet, opts ...kgo.Opt) *member {
	t.Helper()
	m := &member{name: name, done: make(chan struct{}), minOff: map[int32]int64{}, maxOff: map[int32]int64{}}
	base := []kgo.Opt{
		kgo.SeedBrokers(b.addr),
		kgo.ConsumerGroup(grp),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			m.revokes.Add(1)
			// Commit what was consumed before giving partitions up, so the
			// next owner starts where we stopped.
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Logf("%s: fetch %s/%d: %v", name, topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				seen.add(r)
				m.mu.Lock()
				if o, ok := m.minOff[r.Partition]; !ok || r.Offset < o {
					m.minOff[r.Partition] = r.Offset
				}
				m.maxOff[r.Partition] = max(m.maxOff[r.Partition], r.Offset)
				m.mu.Unlock()
			})
		}
	}()
	return m
}

// stop commits what the member consumed and leaves the group.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("%s: final commit: %v", m.name, err)
	}
	m.cl.Close()
}

// storedCommits reads a group's commits straight from Redis, for when
// korvet is down.
func storedCommits(t *testing.T, b *broker, grp, topic string) map[int32]int64 {
	t.Helper()
	rc, err := resp.New(b.redis.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := rc.Do(ctxT(t, 10*time.Second), "HGETALL", b.eng.Keyspace()+":group:"+grp+":offsets")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	var elems []resp.Reply
	elems = r.Elems(elems)
	for i := 0; i+1 < len(elems); i += 2 {
		var p int32
		var o int64
		if _, err := fmt.Sscanf(string(elems[i].Bytes()), topic+":%d", &p); err != nil {
			t.Fatalf("field %q: %v", elems[i].Bytes(), err)
		}
		if _, err := fmt.Sscanf(string(elems[i+1].Bytes()), "%d,", &o); err != nil {
			t.Fatalf("value %q: %v", elems[i+1].Bytes(), err)
		}
		out[p] = o
	}
	return out
}

// TestGroupChurnAndRestart runs three-odd members of a group, joining and
// leaving while 50k records flow over several partitions, with an eager
// and a cooperative balancer, and restarts korvet under them. Every record
// must be consumed (at least once), and records are redelivered only from
// the commits on: after the restart the members rejoin and resume at
// what was committed when korvet stopped.
func TestGroupChurnAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"eager-range", kgo.RangeBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testGroupChurn(t, tc.balancer)
		})
	}
}

func testGroupChurn(t *testing.T, balancer kgo.GroupBalancer) {
	const (
		topic      = "churn"
		grp        = "churn-g"
		partitions = 6
		total      = 50000
	)
	b := startBroker(t, groupOpts())
	adm := b.admin()
	if _, err := adm.CreateTopic(ctxT(t, 10*time.Second), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// The producer spreads records over the partitions in batches, slowly
	// enough that the membership changes below happen while they flow.
	produced := make(chan error, 1)
	go func() {
		p := b.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		ctx := context.Background()
		for sent := 0; sent < total; {
			var batch []*kgo.Record
			for i := 0; i < 500 && sent < total; i++ {
				batch = append(batch, &kgo.Record{Value: []byte(fmt.Sprintf("r%d", sent))})
				sent++
			}
			// Retried through the restart below.
			if err := p.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(30 * time.Millisecond) // a steady stream through the membership changes
		}
		produced <- nil
	}()

	seen := newSeenSet()
	opt := kgo.Balancers(balancer)
	consumed := func(n int64) func() bool { return func() bool { return seen.unique.Load() >= n } }
	m1 := startMember(t, b, "m1", grp, topic, seen, opt)
	testbed.WaitFor(t, 60*time.Second, "5k records", consumed(5000))
	m2 := startMember(t, b, "m2", grp, topic, seen, opt)
	m3 := startMember(t, b, "m3", grp, topic, seen, opt)
	testbed.WaitFor(t, 60*time.Second, "15k records", consumed(15000))
	m1.stop(t)
	testbed.WaitFor(t, 60*time.Second, "25k records", consumed(25000))
	m4 := startMember(t, b, "m4", grp, topic, seen, opt)
	testbed.WaitFor(t, 60*time.Second, "30k records", consumed(30000))

	// Restart korvet under the running members and read the commits
	// while it is down: the members must come back from those.
	addr := b.addr
	b.stop()
	atRestart := storedCommits(t, b, grp, topic)
	seen.mark()
	b.start(addr)
	testbed.WaitFor(t, 60*time.Second, "35k records", consumed(35000))
	m2.stop(t)
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	testbed.WaitFor(t, 90*time.Second, "all records", consumed(total))
	m3.stop(t)
	m4.stop(t)

	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	seen.mu.Lock()
	for p := int32(0); p < partitions; p++ {
		e, _ := ends.Lookup(topic, p)
		sum += e.Offset
		for o := int64(0); o < e.Offset; o++ {
			if seen.seen[partOff{p, o}] == 0 {
				t.Fatalf("record %d/%d never consumed", p, o)
			}
		}
		if o, ok := seen.minRedeliv[p]; ok && o < atRestart[p] {
			t.Fatalf("partition %d: record %d redelivered after the restart, below the commit %d", p, o, atRestart[p])
		}
	}
	seen.mu.Unlock()
	if sum < total {
		t.Fatalf("partitions end at %d records in all, want %d", sum, total)
	}
	t.Logf("%d records consumed, %d redelivered; commits at the restart %v", seen.unique.Load(), seen.dups.Load(), atRestart)

	// Everything was consumed and committed: the commits are the ends.
	committed, err := adm.FetchOffsets(ctxT(t, 10*time.Second), grp)
	if err != nil {
		t.Fatal(err)
	}
	before := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		c, ok := committed.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		if !ok || c.Err != nil || c.At != e.Offset {
			for _, m := range []*member{m1, m2, m3, m4} {
				m.mu.Lock()
				t.Logf("%s consumed partition %d from %d to %d", m.name, p, m.minOff[p], m.maxOff[p])
				m.mu.Unlock()
			}
			t.Fatalf("partition %d: committed %+v, want %d", p, c, e.Offset)
		}
		before[p] = c.At
	}

	b.restart()
	more := 2000
	var recs []*kgo.Record
	for i := 0; i < more; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("after%d", i))})
	}
	produceAll(t, b.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), recs)
	after := newSeenSet()
	m5 := startMember(t, b, "m5", grp, topic, after, opt)
	testbed.WaitFor(t, 60*time.Second, "records produced after the restart", func() bool { return after.unique.Load() >= int64(more) })
	m5.stop(t)
	m5.mu.Lock()
	defer m5.mu.Unlock()
	for p, o := range m5.minOff {
		if o < before[p] {
			t.Fatalf("after the restart partition %d was redelivered from %d, below its commit %d", p, o, before[p])
		}
	}
	if n := after.unique.Load(); n != int64(more) {
		t.Fatalf("after the restart consumed %d records, want %d", n, more)
	}
}

// TestGroupStaticMemberRejoin: a static member restarting within its
// session timeout takes its place back without a rebalance.
func TestGroupStaticMemberRejoin(t *testing.T) {
	const topic, grp = "static", "static-g"
	b := startBroker(t, groupOpts())
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 4, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	coord := b.eng.Groups()
	seen := newSeenSet()
	static := func(name string) *member {
		return startMember(t, b, name, grp, topic, seen, kgo.InstanceID(name), kgo.SessionTimeout(30*time.Second))
	}
	s1 := static("s1")
	s2 := static("s2")
	// Cooperative clients rebalance twice: the group has settled once it
	// is stable with partitions for both.
	testbed.WaitFor(t, 30*time.Second, "a stable group of two, each with partitions", func() bool {
		d, _ := coord.Describe(grp)
		if d.State.String() != "Stable" || len(d.Members) != 2 {
			return false
		}
		for _, m := range d.Members {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.Assignment) != nil || len(a.Topics) == 0 || len(a.Topics[0].Partitions) == 0 {
				return false
			}
		}
		return true
	})
	d, _ := coord.Describe(grp)
	gen := d.Generation
	s2revokes := s2.revokes.Load()
	oldIDs := map[string]string{}
	for _, m := range d.Members {
		oldIDs[m.InstanceID] = m.MemberID
	}

	// Closing a static member does not leave the group.
	s1.stop(t)
	d, _ = coord.Describe(grp)
	if len(d.Members) != 2 || d.Generation != gen {
		t.Fatalf("after closing s1: %d members at generation %d, want 2 at %d", len(d.Members), d.Generation, gen)
	}
	s1 = static("s1")
	defer s1.stop(t)
	defer s2.stop(t)
	testbed.WaitFor(t, 30*time.Second, "s1 to rejoin", func() bool {
		d, _ := coord.Describe(grp)
		for _, m := range d.Members {
			if m.InstanceID == "s1" && m.MemberID != oldIDs["s1"] {
				return d.State.String() == "Stable"
			}
		}
		return false
	})
	// The restarted s1 consumes its partitions again.
	n := seen.unique.Load()
	produceAll(t, b.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), []*kgo.Record{
		{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}, {Value: []byte("d")},
	})
	testbed.WaitFor(t, 30*time.Second, "records on every partition", func() bool { return seen.unique.Load() >= n+4 })
	d, _ = coord.Describe(grp)
	if d.Generation != gen {
		t.Fatalf("generation went from %d to %d: the static rejoin rebalanced", gen, d.Generation)
	}
	if r := s2.revokes.Load(); r != s2revokes {
		t.Fatalf("s2 had partitions revoked %d times during s1's restart", r-s2revokes)
	}
	if d.Members[0].MemberID == oldIDs[d.Members[0].InstanceID] && d.Members[1].MemberID == oldIDs[d.Members[1].InstanceID] {
		t.Fatalf("no member id changed: %+v", d.Members)
	}
}

// TestGroupOffsetsAdmin covers commits from outside the group (assign()
// and kadm), metadata, restart, the admin APIs and lag.
func TestGroupOffsetsAdmin(t *testing.T) {
	const topic, grp = "adm", "adm-g"
	opts := groupOpts()
	opts.AutoCreateTopics = false // kadm's metadata lookups would create no-such-topic
	b := startBroker(t, opts)
	adm := b.admin()
	ctx := ctxT(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < 90; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))})
	}
	produceAll(t, b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), recs)

	// A simple consumer: assign() a partition, read, commit with kadm
	// (generation -1, no member id).
	asg := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {1: kgo.NewOffset().AtStart()}}))
	var last *kgo.Record
	for last == nil || last.Offset < 29 {
		fs := asg.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { last = r })
	}
	// Commits name the epoch the records were written in (the single
	// broker claimed its partitions once: epoch 1), as a consumer's do: a
	// consumer starting from them checks that epoch with
	// OffsetForLeaderEpoch, and an epoch that did not write them would
	// look like lost records.
	_, ep := b.eng.Topic(topic).Partition(0).Leader()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: ep, Metadata: "p0 meta, with commas, ü"})
	os.Add(kadm.Offset{Topic: topic, Partition: 1, At: last.Offset + 1, LeaderEpoch: -1, Metadata: ""})
	os.Add(kadm.Offset{Topic: topic, Partition: 2, At: 20, LeaderEpoch: ep, Metadata: "p2"})
	os.Add(kadm.Offset{Topic: "no-such-topic", Partition: 0, At: 1})
	res, err := adm.CommitOffsets(ctx, grp, os)
	if err != nil {
		t.Fatal(err)
	}
	for tp, ps := range res {
		for p, r := range ps {
			switch {
			case tp == "no-such-topic" && r.Err == nil:
				t.Fatalf("commit to a missing topic succeeded")
			case tp != "no-such-topic" && r.Err != nil:
				t.Fatalf("commit %s/%d: %v", tp, p, r.Err)
			}
		}
	}
	check := func(when string) {
		t.Helper()
		got, err := adm.FetchOffsets(ctx, grp)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for _, want := range []kadm.Offset{
			{Topic: topic, Partition: 0, At: 10, LeaderEpoch: ep, Metadata: "p0 meta, with commas, ü"},
			{Topic: topic, Partition: 1, At: 30, LeaderEpoch: -1, Metadata: ""},
			{Topic: topic, Partition: 2, At: 20, LeaderEpoch: ep, Metadata: "p2"},
		} {
			g, ok := got.Lookup(want.Topic, want.Partition)
			if !ok || g.Err != nil || g.At != want.At || g.LeaderEpoch != want.LeaderEpoch || g.Metadata != want.Metadata {
				t.Fatalf("%s: %s/%d: got %+v, want %+v", when, want.Topic, want.Partition, g, want)
			}
		}
		if _, ok := got.Lookup("no-such-topic", 0); ok {
			t.Fatalf("%s: a commit to a missing topic was stored", when)
		}
	}
	check("before restart")
	lag, err := b.eng.Groups().Lag(ctx, grp)
	if err != nil || len(lag) != 3 || lag[0].Lag != 20 || lag[1].Lag != 0 || lag[2].Lag != 10 {
		t.Fatalf("lag: %+v, %v", lag, err)
	}

	b.restart()
	adm = b.admin()
	check("after restart")
	listed, err := adm.ListGroups(ctx)
	if err != nil || listed[grp].State != "Empty" {
		t.Fatalf("list groups after restart: %+v, %v", listed, err)
	}
	lag, err = b.eng.Groups().Lag(ctx, grp)
	if err != nil || len(lag) != 3 || lag[0].Lag != 20 || lag[0].HighWatermark != 30 {
		t.Fatalf("lag after restart: %+v, %v", lag, err)
	}

	// A group consumer starts from the commits.
	seen := newSeenSet()
	m := startMember(t, b, "m", grp, topic, seen)
	testbed.WaitFor(t, 30*time.Second, "the uncommitted records", func() bool { return seen.unique.Load() >= 30 })
	m.mu.Lock()
	if m.minOff[0] != 10 || m.minOff[2] != 20 {
		t.Fatalf("group consumer started at %v, want the commits 10 and 20", m.minOff)
	}
	if _, ok := m.minOff[1]; ok {
		t.Fatalf("partition 1 was fully committed but consumed from %d", m.minOff[1])
	}
	m.mu.Unlock()
	testbed.WaitFor(t, 10*time.Second, "a stable group", func() bool {
		d, _ := b.eng.Groups().Describe(grp)
		return d.State.String() == "Stable"
	})

	described, err := adm.DescribeGroups(ctx, grp)
	if err != nil {
		t.Fatal(err)
	}
	dg := described[grp]
	if dg.Err != nil || dg.State != "Stable" || dg.ProtocolType != "consumer" || len(dg.Members) != 1 {
		t.Fatalf("describe: %+v", dg)
	}
	if ca, ok := dg.Members[0].Assigned.AsConsumer(); !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 3 {
		t.Fatalf("describe: member assignment %+v", dg.Members[0].Assigned)
	}
	for _, states := range [][]string{{"Stable"}, {"stable", "Empty"}} {
		listed, err = adm.ListGroups(ctx, states...)
		if err != nil || listed[grp].State != "Stable" {
			t.Fatalf("list %v: %+v, %v", states, listed, err)
		}
	}
	if listed, err = adm.ListGroups(ctx, "Empty"); err != nil || len(listed) != 0 {
		t.Fatalf("list Empty: %+v, %v", listed, err)
	}

	// A group with members can neither be deleted nor lose offsets of a
	// topic it consumes.
	dels, err := adm.DeleteGroups(ctx, grp)
	if err != nil || !errors.Is(dels[grp].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete a live group: %+v, %v", dels, err)
	}
	od, err := adm.DeleteOffsets(ctx, grp, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := od.Lookup(topic, 0); !errors.Is(e, kerr.GroupSubscribedToTopic) {
		t.Fatalf("offset delete of a subscribed topic: %v", e)
	}
	m.stop(t)
	testbed.WaitFor(t, 10*time.Second, "an empty group", func() bool {
		d, _ := b.eng.Groups().Describe(grp)
		return d.State.String() == "Empty"
	})

	od, err = adm.DeleteOffsets(ctx, grp, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := od.Lookup(topic, 0); e != nil {
		t.Fatalf("offset delete: %v", e)
	}
	got, err := adm.FetchOffsets(ctx, grp)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); ok && o.At >= 0 {
		t.Fatalf("offset of partition 0 still there after OffsetDelete: %+v", o)
	}
	if o, ok := got.Lookup(topic, 2); !ok || o.At != 30 {
		t.Fatalf("partition 2: %+v, want the consumer's commit 30", o)
	}

	dels, err = adm.DeleteGroups(ctx, grp, "never-existed")
	if err != nil || dels[grp].Err != nil || !errors.Is(dels["never-existed"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("delete groups: %+v, %v", dels, err)
	}
	listed, err = adm.ListGroups(ctx)
	if _, ok := listed[grp]; err != nil || ok {
		t.Fatalf("deleted group still listed: %+v, %v", listed, err)
	}
	b.restart()
	adm = b.admin()
	got, err = adm.FetchOffsets(ctx, grp)
	if err != nil || len(got) != 0 {
		t.Fatalf("offsets of a deleted group after restart: %+v, %v", got, err)
	}
	if listed, err = adm.ListGroups(ctx); err != nil || len(listed) != 0 {
		t.Fatalf("groups after restart: %+v, %v", listed, err)
	}
}
