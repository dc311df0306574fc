package engine_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

// Several engines on one Redis, each a broker with its own node id, as
// several korvet processes would be.

const testLease = time.Second

// broker is one engine of a multi-broker test; stop closes it once.
type broker struct {
	e    *engine.Engine
	rc   *resp.Client
	once sync.Once
}

func (b *broker) stop(crash bool) {
	b.once.Do(func() {
		if crash {
			b.e.Crash()
		} else {
			b.e.Close()
		}
		b.rc.Close()
	})
}

func openBroker(t *testing.T, r *testbed.Redis, node int32, opts engine.Options) *broker {
	t.Helper()
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return openBrokerOn(t, rc, node, opts)
}

// openBrokerOn is openBroker on a client of its own, which it closes.
func openBrokerOn(t *testing.T, rc *resp.Client, node int32, opts engine.Options) *broker {
	t.Helper()
	opts.NodeID = node
	if opts.LeaseTime == 0 {
		opts.LeaseTime = testLease
	}
	if opts.Logger == nil {
		opts.Logger = testbed.Logger()
	}
	opts.GroupInitialRebalanceDelay = -1
	e, err := engine.Open(context.Background(), rc, opts)
	if err != nil {
		rc.Close()
		t.Fatalf("open broker %d: %v", node, err)
	}
	b := &broker{e: e, rc: rc}
	t.Cleanup(func() { b.stop(false) })
	return b
}

// leaders returns the node that leads each partition of topic according
// to the brokers themselves, or ok false unless exactly one broker leads
// each partition and it is the rendezvous winner among them.
func leaders(bs []*broker, topic string) (out []int32, ok bool) {
	var nodes []int32
	for _, b := range bs {
		nodes = append(nodes, b.e.NodeID())
	}
	t0 := bs[0].e.Topic(topic)
	if t0 == nil {
		return nil, false
	}
	for _, p := range t0.Partitions() {
		lead := int32(-1)
		for _, b := range bs {
			t := b.e.Topic(topic)
			if t == nil {
				return nil, false
			}
			if t.Partition(p.ID()).IsLeader() {
				if lead >= 0 {
					return nil, false
				}
				lead = b.e.NodeID()
			}
		}
		if lead < 0 || lead != engine.DesiredLeader(p, nodes) {
			return nil, false
		}
		out = append(out, lead)
	}
	return out, true
}

func waitSettled(t *testing.T, bs []*broker, topic string) []int32 {
	t.Helper()
	var out []int32
	testbed.WaitFor(t, 20*time.Second, "every partition of "+topic+" led by its desired broker alone", func() bool {
		var ok bool
		out, ok = leaders(bs, topic)
		return ok
	})
	return out
}

func epochs(b *broker, topic string) []int32 {
	var out []int32
	for _, p := range b.e.Topic(topic).Partitions() {
		_, ep := p.Leader()
		out = append(out, ep)
	}
	return out
}

func counts(lead []int32) map[int32]int {
	m := map[int32]int{}
	for _, n := range lead {
		m[n]++
	}
	return m
}

// Partitions spread evenly over the brokers; a third broker joining takes
// only partitions for itself (none moves between the other two), each
// move bumps the epoch, and when it leaves exactly those go back.
func TestLeadershipSpreadsEvenlyAndMovesLittle(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	const n = 60
	a := openBroker(t, r, 1, engine.Options{})
	if _, err := a.e.CreateTopic(ctx, "spread", n, nil, false); err != nil {
		t.Fatal(err)
	}
	if got := counts(waitSettled(t, []*broker{a}, "spread")); got[1] != n {
		t.Fatalf("a single broker leads %v, want all %d", got, n)
	}
	b := openBroker(t, r, 2, engine.Options{})
	two := waitSettled(t, []*broker{a, b}, "spread")
	for node, c := range counts(two) {
		if c < 18 || c > 42 {
			t.Errorf("two brokers: node %d leads %d of %d partitions", node, c, n)
		}
	}
	before := epochs(b, "spread")

	c := openBroker(t, r, 3, engine.Options{})
	three := waitSettled(t, []*broker{a, b, c}, "spread")
	moved := 0
	for node, k := range counts(three) {
		if k < 9 || k > 31 {
			t.Errorf("three brokers: node %d leads %d of %d partitions", node, k, n)
		}
	}
	testbed.WaitFor(t, 10*time.Second, "the brokers to see the moves' epochs", func() bool {
		after := epochs(a, "spread")
		for i := range n {
			if (three[i] != two[i]) != (after[i] > before[i]) {
				return false
			}
		}
		return true
	})
	for i := range n {
		if three[i] != two[i] {
			moved++
			if three[i] != 3 {
				t.Errorf("partition %d moved from %d to %d, not to the new broker", i, two[i], three[i])
			}
		}
	}
	t.Logf("a third broker took %d of %d partitions", moved, n)

	if err := c.e.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	back := waitSettled(t, []*broker{a, b}, "spread")
	if !slices.Equal(back, two) {
		t.Errorf("after the third broker left, leaders %v, want as before it came %v", back, two)
	}
}

// A broker that dies without handing over (its lease lapses) loses its
// partitions to the others within the lease and a check; producers there
// get a retriable ErrNotLeader until then.
func TestFailoverAfterCrash(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 1, engine.Options{})
	if _, err := a.e.CreateTopic(ctx, "fo", 8, nil, false); err != nil {
		t.Fatal(err)
	}
	b := openBroker(t, r, 2, engine.Options{})
	lead := waitSettled(t, []*broker{a, b}, "fo")
	i := slices.Index(lead, 1)
	if i < 0 {
		t.Fatalf("broker 1 leads nothing: %v", lead)
	}
	pa := a.e.Topic("fo").Partition(int32(i))
	if _, _, err := pa.Append(recs(3, 1, "before")).Wait(ctx); err != nil {
		t.Fatal(err)
	}

	crashed := time.Now()
	a.stop(true)
	pb := b.e.Topic("fo").Partition(int32(i))
	var took time.Duration
	for {
		_, _, err := pb.Append(recs(1, 2, "after")).Wait(ctx)
		if err == nil {
			took = time.Since(crashed)
			break
		}
		if !errors.Is(err, engine.ErrNotLeader) {
			t.Fatalf("append during failover: %v, want ErrNotLeader", err)
		}
		if time.Since(crashed) > 10*time.Second {
			t.Fatalf("no failover within 10s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("failover: first append accepted on a moved partition %v after the crash (lease %v)", took, testLease)
	if took > 2*testLease {
		t.Errorf("failover took %v, more than twice the lease %v", took, testLease)
	}
	waitSettled(t, []*broker{b}, "fo")
	got := readAll(t, pb)
	if len(got) != 4 || string(got[0].Key) != "before-0" || string(got[3].Key) != "after-0" {
		t.Errorf("log after failover: %d records", len(got))
	}
	if bs := b.e.Brokers(); len(bs) != 1 || bs[0].NodeID != 2 || !bs[0].Self {
		t.Errorf("live brokers after the crash: %+v", bs)
	}
}

// Leave hands every partition over (epoch bumped once), gives up the lease
// and the registry entry; the leaving broker's appends fail retriably.
func TestLeaveHandsEverythingOver(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 1, engine.Options{})
	if _, err := a.e.CreateTopic(ctx, "lv", 8, nil, false); err != nil {
		t.Fatal(err)
	}
	b := openBroker(t, r, 2, engine.Options{})
	lead := waitSettled(t, []*broker{a, b}, "lv")
	testbed.WaitFor(t, 5*time.Second, "b to see every epoch", func() bool { return slices.Equal(epochs(a, "lv"), epochs(b, "lv")) })
	before := epochs(b, "lv")
	if _, ok := b.e.Broker(1); !ok {
		t.Fatal("b does not list a")
	}
	started := time.Now()
	if err := a.e.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, []*broker{b}, "lv")
	t.Logf("leave: b leads everything %v after Leave began", time.Since(started))
	after := epochs(b, "lv")
	for i := range lead {
		want := before[i]
		if lead[i] == 1 {
			want++
		}
		if after[i] != want {
			t.Errorf("partition %d (led by %d): epoch %d, want %d", i, lead[i], after[i], want)
		}
	}
	i := int32(slices.Index(lead, 1))
	if _, _, err := a.e.Topic("lv").Partition(i).Append(recs(1, 1, "late")).Wait(ctx); !errors.Is(err, engine.ErrNotLeader) {
		t.Errorf("append on the broker that left: %v, want ErrNotLeader", err)
	}
	if _, _, err := b.e.Topic("lv").Partition(i).Append(recs(1, 1, "new")).Wait(ctx); err != nil {
		t.Errorf("append on the new leader: %v", err)
	}
	if n, _ := b.rc.Do(ctx, "EXISTS", "korvet:meta:broker:1"); mustInt(t, n) != 0 {
		t.Error("the lease of the broker that left is still there")
	}
	if n, _ := b.rc.Do(ctx, "HEXISTS", "korvet:meta:brokers", "1"); mustInt(t, n) != 0 {
		t.Error("the registry entry of the broker that left is still there")
	}
	testbed.WaitFor(t, 5*time.Second, "b to drop a from its live set", func() bool { return len(b.e.Brokers()) == 1 })
}

func mustInt(t *testing.T, r resp.Reply) int64 {
	t.Helper()
	n, err := r.Int()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A zombie: a leader stopped past its lease (SIGSTOP) still believes it
// leads when it wakes; its append is fenced by the epoch check and writes
// nothing, while the new leader's appends stand.
func TestZombieLeaderIsFenced(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 1, engine.Options{})
	if _, err := a.e.CreateTopic(ctx, "z", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	b := openBroker(t, r, 2, engine.Options{})
	lead := waitSettled(t, []*broker{a, b}, "z")
	i := int32(slices.Index(lead, 1))
	if i < 0 {
		t.Fatalf("broker 1 leads nothing: %v", lead)
	}
	pa, pb := a.e.Topic("z").Partition(i), b.e.Topic("z").Partition(i)
	if _, _, err := pa.Append(recs(2, 1, "a")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, oldEpoch := pa.Leader()

	a.e.Pause()
	paused := time.Now()
	testbed.WaitFor(t, 10*time.Second, "b to take the paused broker's partition", pb.IsLeader)
	t.Logf("takeover from a paused leader: %v", time.Since(paused))
	if _, _, err := pb.Append(recs(2, 2, "b")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !pa.IsLeader() {
		t.Fatal("the paused broker already stepped down; this test would not test fencing")
	}
	if _, ep := pb.Leader(); ep <= oldEpoch {
		t.Fatalf("new leader's epoch %d, not above the old %d", ep, oldEpoch)
	}
	_, _, err := pa.Append(recs(3, 3, "zombie")).Wait(ctx)
	if !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("zombie append: %v, want ErrNotLeader", err)
	}
	if pa.IsLeader() {
		t.Error("the zombie still thinks it leads after being fenced")
	}
	got := readAll(t, pb)
	var keys []string
	for _, rec := range got {
		keys = append(keys, string(rec.Key))
		if strings.HasPrefix(string(rec.Key), "zombie") {
			t.Errorf("the zombie's record %s is in the log", rec.Key)
		}
	}
	if want := []string{"a-0", "a-1", "b-0", "b-1"}; !slices.Equal(keys, want) {
		t.Errorf("log %q, want %q", keys, want)
	}
	if v, err := b.rc.Do(ctx, "HGET", "korvet:meta:partition:z:"+strconv.Itoa(int(i)), "next"); err != nil || string(v.Bytes()) != "4" {
		t.Errorf("partition counter next=%q after the zombie's append (%v), want 4", v.Bytes(), err)
	}
	streamKey := pb.StreamKey()
	if n, err := b.rc.Do(ctx, "XLEN", streamKey); err != nil || mustInt(t, n) != 4 {
		t.Errorf("%s holds %v entries, want 4", streamKey, n)
	}

	// Woken up, it registers again and gets its share back.
	a.e.Resume()
	waitSettled(t, []*broker{a, b}, "z")
	if _, _, err := pa.Append(recs(1, 4, "again")).Wait(ctx); err != nil {
		t.Errorf("append after the broker came back: %v", err)
	}
}

// A second live broker with the same node id waits one lease for the id to
// come free, then refuses to start and says why; a restart after a crash
// (the old lease still there) gets in once it lapses and claims anew.
func TestDuplicateNodeIDRefused(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 7, engine.Options{Listeners: []engine.ListenerAddr{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 19092}}})
	if _, err := a.e.CreateTopic(ctx, "d", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	_, ep := a.e.Topic("d").Partition(0).Leader()
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	started := time.Now()
	_, err = engine.Open(ctx, rc, engine.Options{NodeID: 7, LeaseTime: testLease, Logger: testbed.Logger()})
	if !errors.Is(err, engine.ErrDuplicateNode) {
		t.Fatalf("second broker with node id 7: %v, want ErrDuplicateNode", err)
	}
	for _, want := range []string{"kafka.node_id 7", "127.0.0.1:19092", "different kafka.node_id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if waited := time.Since(started); waited < testLease {
		t.Errorf("refused after %v, before the lease %v could lapse", waited, testLease)
	}
	if !a.e.Topic("d").Partition(0).IsLeader() {
		t.Error("the first broker lost its partition to a refused duplicate")
	}

	a.stop(true)
	again := openBroker(t, r, 7, engine.Options{})
	p := again.e.Topic("d").Partition(0)
	if !p.IsLeader() {
		t.Fatal("restarted broker does not lead its partition")
	}
	if _, ep2 := p.Leader(); ep2 != ep+1 {
		t.Errorf("epoch after restart %d, want %d (a restart claims anew)", ep2, ep+1)
	}
}

// A partition written by a korvet from before leadership (no leader
// fields) opens with its data and gets epoch 1.
func TestUpgradeFromPartitionWithoutLeader(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 0, engine.Options{})
	tp, err := a.e.CreateTopic(ctx, "old", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := recs(5, 1, "old")
	if _, _, err := tp.Partition(0).Append(want).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	a.stop(false)
	// What today's korvet leaves: no leadership fields at all.
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ks, err := rc.Do(ctx, "HKEYS", "korvet:meta:partition:old:0")
	if err != nil {
		t.Fatal(err)
	}
	del := []any{"HDEL", "korvet:meta:partition:old:0"}
	ks.ForEach(func(r resp.Reply) bool {
		if f := string(r.Bytes()); strings.HasPrefix(f, "leader") || strings.HasPrefix(f, "epoch:") {
			del = append(del, f)
		}
		return true
	})
	if len(del) < 5 {
		t.Fatalf("leader fields not found: %v", del)
	}
	if _, err := rc.Do(ctx, del...); err != nil {
		t.Fatal(err)
	}

	b := openBroker(t, r, 0, engine.Options{})
	p := b.e.Topic("old").Partition(0)
	if !p.IsLeader() {
		t.Fatal("upgraded partition has no leader")
	}
	if node, ep := p.Leader(); node != 0 || ep != 1 {
		t.Errorf("leader %d epoch %d, want 0 and 1", node, ep)
	}
	got := readAll(t, p)
	if len(got) != 5 || p.HighWatermark() != 5 {
		t.Fatalf("upgraded partition: %d records, high watermark %d, want 5", len(got), p.HighWatermark())
	}
	if v, err := rc.Do(ctx, "HGET", "korvet:meta:partition:old:0", "epoch:1"); err != nil || string(v.Bytes()) != "5" {
		t.Errorf("epoch 1 start %q (%v), want 5", v.Bytes(), err)
	}
	if ep, end := p.EpochEnd(1); ep != 1 || end != 5 {
		t.Errorf("EpochEnd(1) = %d, %d, want 1, 5", ep, end)
	}
	// The records written before epochs were kept are epoch 0's, which
	// ends where epoch 1 starts; an epoch from the future is unknown.
	if ep, end := p.EpochEnd(0); ep != 0 || end != 5 {
		t.Errorf("EpochEnd(0) = %d, %d, want 0, 5", ep, end)
	}
	if ep, end := p.EpochEnd(2); ep != -1 || end != -1 {
		t.Errorf("EpochEnd(2) = %d, %d, want -1, -1", ep, end)
	}
	if _, _, err := p.Append(recs(1, 2, "new")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// A leader that archived a segment (file written, Iceberg commit made) and
// lost the partition before marking it archived: the new leader archives
// the segment again, which finds it in the table and commits nothing, so
// there is one file and one commit.
func TestArchiveInterruptedByLeadershipMove(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	wh := enginetest.LocalWarehouse(t)
	storeA := enginetest.Cold(t, wh)
	a := openBroker(t, r, 1, engine.Options{Cold: storeA, TieringInterval: time.Hour})
	tp, err := a.e.CreateTopic(ctx, "arch", 1, tieredTopicConfig, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	want := tieredRecords(0, 200, time.Now().UnixMilli())
	appendAll(t, p, want)
	sg := p.Segments()[0]
	if sg.State != engine.SegmentSealed {
		t.Fatalf("segment 0 is %v, want sealed", sg.State)
	}
	// Broker 1's archiver: upload and commit, then the partition moves
	// before it marks the segment archived.
	from := sg.Base
	df, err := storeA.Archive(ctx, cold.SegmentRef{Topic: "arch", TopicID: tp.ID(), Partition: 0, Segment: sg.ID, BaseOffset: sg.Base, LastOffset: sg.Last},
		func() ([]record.Record, []record.Txn, error) {
			if from > sg.Last {
				return nil, nil, io.EOF
			}
			res, err := p.Read(ctx, from, 1<<20)
			if err != nil {
				return nil, nil, err
			}
			var out []record.Record
			for _, rec := range res.Records {
				if rec.Offset <= sg.Last {
					out = append(out, cloneRecord(rec))
				}
			}
			res.Release()
			if len(out) == 0 {
				return nil, nil, io.EOF
			}
			from = out[len(out)-1].Offset + 1
			return out, nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	metaBefore := countFiles(t, wh.Warehouse, ".metadata.json")
	a.stop(true)

	b := openBroker(t, r, 2, engine.Options{Cold: enginetest.Cold(t, wh), TieringInterval: 50 * time.Millisecond})
	pb := b.e.Topic("arch").Partition(0)
	// Archived and gone from Redis (local.retention.ms=0), as
	// waitTiered waits: reads race with a stream being dropped otherwise.
	testbed.WaitFor(t, 30*time.Second, "the new leader to archive every sealed segment", func() bool {
		segs := pb.Segments()
		for _, s := range segs[:len(segs)-1] {
			if s.State != engine.SegmentArchived || s.Local {
				return false
			}
		}
		return len(segs) > 1 && pb.IsLeader()
	})
	if got := pb.Segments()[0]; got.File != df.Path {
		t.Errorf("segment 0 archived as %s, want the first leader's %s", got.File, df.Path)
	}
	files, err := enginetest.Cold(t, wh).Files(ctx, "arch")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if f.Segment == sg.ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("segment %d has %d files in the table, want 1", sg.ID, n)
	}
	sealed := len(pb.Segments()) - 1
	if got := countFiles(t, wh.Warehouse, ".parquet"); got != sealed {
		t.Errorf("%d parquet files for %d sealed segments", got, sealed)
	}
	// One commit per segment the new leader archived itself: none for
	// segment 0 (snapshot expiry may write more metadata, never less).
	if got := countFiles(t, wh.Warehouse, ".metadata.json"); got < metaBefore || sealed == 1 && got != metaBefore {
		t.Errorf("metadata files %d after the new leader, %d before", got, metaBefore)
	}
	if pb.LogStart() != 0 || pb.HighWatermark() != int64(len(want)) {
		t.Fatalf("log start %d, high watermark %d, want 0 and %d; segments %+v", pb.LogStart(), pb.HighWatermark(), len(want), pb.Segments())
	}
	checkLog(t, pb, want)
}

func countFiles(t *testing.T, warehouse, suffix string) int {
	t.Helper()
	dir := strings.TrimPrefix(warehouse, "file://")
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, suffix) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A broker restarted after a crash from the same data_dir (LeaseFile)
// takes its previous run's lease over at once, and fences that run; a
// broker of another installation with the same node id is still refused.
func TestRestartAfterCrashTakesOwnLease(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "broker.lease")
	const lease = 3 * time.Second
	a := openBroker(t, r, 4, engine.Options{LeaseFile: file, LeaseTime: lease})
	if _, err := a.e.CreateTopic(ctx, "r", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	_, ep := a.e.Topic("r").Partition(0).Leader()
	a.stop(true) // the lease is left behind, as after SIGKILL

	started := time.Now()
	b := openBroker(t, r, 4, engine.Options{LeaseFile: file, LeaseTime: lease})
	if took := time.Since(started); took >= lease/2 {
		t.Errorf("restart from the same data_dir took %v; it should not wait for the old lease (%v)", took, lease)
	}
	p := b.e.Topic("r").Partition(0)
	if _, ep2 := p.Leader(); !p.IsLeader() || ep2 != ep+1 {
		t.Errorf("restarted broker: leader %v at epoch %d, want leader at epoch %d", p.IsLeader(), ep2, ep+1)
	}

	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	_, err = engine.Open(ctx, rc, engine.Options{NodeID: 4, LeaseTime: lease, LeaseFile: filepath.Join(t.TempDir(), "other.lease"), Logger: testbed.Logger()})
	if !errors.Is(err, engine.ErrDuplicateNode) {
		t.Fatalf("another installation with node id 4: %v, want ErrDuplicateNode", err)
	}
	if !p.IsLeader() {
		t.Error("the running broker lost its partition to a refused duplicate")
	}
}
