package kafkawire_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/kafkawire/batch"
)

// Several brokers over one Redis, in one test process: each its own engine
// (node ids 1, 2, 3) and Kafka server on its own loopback port.

// startCluster starts n brokers on one redis-server, with topics (name:
// partitions) created on the first before the others open (so each loads
// them from Redis), and waits until each sees all of them. While engine
// membership is the single-broker stub of the issue 14 contract (each
// engine sees itself only), it skips: these tests need the real registry.
func startCluster(t *testing.T, n int, opts engine.Options, topics map[string]int32) []*broker {
	t.Helper()
	r := testbed.StartRedis(t)
	bs := make([]*broker, n)
	for i := range bs {
		bs[i] = startClusterBroker(t, r, int32(i+1), opts)
		if i > 0 {
			continue
		}
		for name, partitions := range topics {
			if _, err := bs[0].eng.CreateTopic(context.Background(), name, partitions, nil, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		all, alone := true, true
		for _, b := range bs {
			seen := len(b.eng.Brokers())
			all = all && seen == n
			alone = alone && seen == 1
		}
		if all {
			return bs
		}
		if time.Now().After(deadline) {
			if alone {
				t.Skip("every engine sees only itself: engine membership (engine/brokers.go) is still the single-broker stub")
			}
			for _, b := range bs {
				t.Logf("broker %d sees %+v", b.eng.NodeID(), b.eng.Brokers())
			}
			t.Fatalf("the %d brokers do not all see each other", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startClusterBroker starts broker id on r, its listener registered as
// PLAINTEXT at its loopback address.
func startClusterBroker(t *testing.T, r *testbed.Redis, id int32, opts engine.Options) *broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	opts.NodeID = id
	opts.Listeners = []engine.ListenerAddr{{Name: kafkawire.ListenerPlaintext, Host: "127.0.0.1", Port: port}}
	if opts.Logger == nil {
		opts.Logger = testbed.Logger().With("node", id)
	}
	eng, rc := enginetest.Open(t, r, opts)
	kopts := kafkawire.Options{NodeID: id, AdvertisedHost: "127.0.0.1", AdvertisedPort: port, MaxRequestBytes: 8 << 20, Logger: opts.Logger}
	srv := kafkawire.NewServer(eng, kopts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeListeners(ctx, 5*time.Second, kafkawire.Listener{Listener: ln, AdvertisedHost: "127.0.0.1", AdvertisedPort: port})
	}()
	b := &broker{t: t, redis: r, rc: rc, eng: eng, srv: srv, addr: ln.Addr().String(), cancel: cancel, done: done, opts: opts, kopts: kopts}
	t.Cleanup(b.stop)
	return b
}

// ask sends req on a new connection to addr and returns the answer.
func ask(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(request(1, req)); err != nil {
		t.Fatal(err)
	}
	return readResponse(t, c, req)
}

func metadata(t *testing.T, addr string, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return ask(t, addr, req).(*kmsg.MetadataResponse)
}

// leaders maps each partition of topic to its leader and epoch in a
// Metadata answer.
func leaders(t *testing.T, m *kmsg.MetadataResponse, topic string) map[int32][2]int32 {
	t.Helper()
	out := map[int32][2]int32{}
	for _, mt := range m.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		for _, p := range mt.Partitions {
			out[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
		}
	}
	return out
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	fmt.Sscan(p, &port)
	return port
}

func createTopic(t *testing.T, b *broker, topic string, partitions int32) {
	t.Helper()
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// settledLeaders waits until every broker's Metadata names the same live
// leader, with the same epoch, for each partition of topic, and returns
// them.
func settledLeaders(t *testing.T, bs []*broker, topic string, partitions int) map[int32][2]int32 {
	t.Helper()
	var got map[int32][2]int32
	testbed.WaitFor(t, 15*time.Second, "every broker names the same live leaders of "+topic+", and each leads", func() bool {
		var first map[int32][2]int32
		for _, b := range bs {
			m := metadata(t, b.addr, topic)
			l := leaders(t, m, topic)
			if len(l) != partitions {
				return false
			}
			for part, le := range l {
				// Metadata names a leader as soon as its claim is seen; the
				// leader takes appends once it has loaded the partition.
				if le[0] < 1 || int(le[0]) > len(bs) {
					return false
				}
				if lt := bs[le[0]-1].eng.Topic(topic); lt == nil || !lt.Partition(part).IsLeader() {
					return false
				}
				// A leader that is not the preferred one is about to
				// hand the partition over (a broker that joined late).
				if lt := b.eng.Topic(topic); lt == nil || lt.Partition(part).PreferredLeader() != le[0] {
					return false
				}
			}
			if first == nil {
				first = l
			} else if !mapsEqual(first, l) {
				return false
			}
		}
		got = first
		return true
	})
	return got
}

func mapsEqual(a, b map[int32][2]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Metadata from every broker lists all three, each at its own address, the
// lowest node id as controller, and the same leaders with replicas = ISR =
// the leader; DescribeCluster agrees.
func TestClusterMetadata(t *testing.T) {
	bs := startCluster(t, 3, engine.Options{}, map[string]int32{"spread": 6})
	settledLeaders(t, bs, "spread", 6)
	wantBrokers := make([]kmsg.MetadataResponseBroker, len(bs))
	for i, b := range bs {
		wantBrokers[i] = kmsg.MetadataResponseBroker{NodeID: int32(i + 1), Host: "127.0.0.1", Port: portOf(t, b.addr)}
	}
	for _, b := range bs {
		m := metadata(t, b.addr, "spread")
		got := slices.Clone(m.Brokers)
		for i := range got {
			got[i].UnknownTags = kmsg.Tags{}
		}
		if !slices.EqualFunc(got, wantBrokers, func(a, b kmsg.MetadataResponseBroker) bool {
			return a.NodeID == b.NodeID && a.Host == b.Host && a.Port == b.Port && a.Rack == nil
		}) {
			t.Errorf("broker %d lists brokers %+v, want %+v", b.eng.NodeID(), got, wantBrokers)
		}
		if m.ControllerID != 1 {
			t.Errorf("broker %d: controller %d, want 1", b.eng.NodeID(), m.ControllerID)
		}
		for _, p := range m.Topics[0].Partitions {
			if p.ErrorCode != 0 || !slices.Equal(p.Replicas, []int32{p.Leader}) || !slices.Equal(p.ISR, []int32{p.Leader}) {
				t.Errorf("broker %d: partition %+v", b.eng.NodeID(), p)
			}
		}
		dreq := kmsg.NewPtrDescribeClusterRequest()
		dreq.Version = 1
		dreq.EndpointType = 1
		d := ask(t, b.addr, dreq).(*kmsg.DescribeClusterResponse)
		var ids []int32
		for _, db := range d.Brokers {
			ids = append(ids, db.NodeID)
			if db.Port != portOf(t, bs[db.NodeID-1].addr) {
				t.Errorf("DescribeCluster on %d: broker %d at port %d", b.eng.NodeID(), db.NodeID, db.Port)
			}
		}
		if !slices.Equal(ids, []int32{1, 2, 3}) || d.ControllerID != 1 {
			t.Errorf("DescribeCluster on %d: brokers %v, controller %d", b.eng.NodeID(), ids, d.ControllerID)
		}
	}
}

// A kgo producer seeded with one broker writes to a topic whose six
// partitions are led across three brokers (it routes by leader); every
// record comes back byte-exact and in order per partition, read through
// another broker as seed.
func TestClusterProduceConsume(t *testing.T) {
	bs := startCluster(t, 3, engine.Options{}, map[string]int32{"routed": 6})
	settledLeaders(t, bs, "routed", 6)
	ctx := ctxT(t, 60*time.Second)
	prod := bs[0].client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[int32][]string{}
	for i := range 300 {
		p := int32(i % 6)
		v := fmt.Sprintf("record %d of partition %d \x00\xff", i, p)
		want[p] = append(want[p], v)
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "routed", Partition: p, Key: []byte{byte(i)}, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons := bs[2].client(kgo.ConsumeTopics("routed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32][]string{}
	n := 0
	for n < 300 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 300: %v", n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			if r.Offset != int64(len(got[r.Partition])-1) {
				t.Errorf("partition %d: record at offset %d, want %d", r.Partition, r.Offset, len(got[r.Partition])-1)
			}
			n++
		})
	}
	for p := range int32(6) {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("partition %d: got %d records, want %d (first diff in %q)", p, len(got[p]), len(want[p]), got[p])
		}
	}
}

// oneBatch is a record batch of one record.
func oneBatch(t *testing.T, v string) []byte {
	t.Helper()
	b, err := batch.AppendBatch(nil, []record.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(v)}}, batch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fetchReq(version int16, topic string, id [16]byte, partition, currentEpoch int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.PartitionMaxBytes = partition, currentEpoch, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// A broker that does not lead a partition refuses produce, fetch, list
// offsets, offsets for leader epoch and delete records on it with
// NOT_LEADER_OR_FOLLOWER, naming the leader (KIP-951) where the version
// can; the leader checks the client's current leader epoch.
func TestClusterLeaderOnly(t *testing.T) {
	bs := startCluster(t, 3, engine.Options{}, map[string]int32{"led": 3})
	ls := settledLeaders(t, bs, "led", 3)
	le := ls[0]
	leader, epoch := bs[le[0]-1], le[1]
	other := bs[le[0]%3]
	if epoch < 1 {
		t.Fatalf("partition 0 led by %d at epoch %d: a claim bumps the epoch, so it is at least 1", le[0], epoch)
	}
	topicID := leader.eng.Topic("led").ID()

	// Produce to the leader works; to another broker it is refused, with
	// the leader named from v10.
	pr := produceReq("led", map[int32][]byte{0: oneBatch(t, "one")}, 0)
	pr.Version = 11
	if p := ask(t, leader.addr, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce to the leader: %+v", p)
	}
	resp := ask(t, other.addr, pr).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != le[0] || p.CurrentLeader.LeaderEpoch != epoch {
		t.Errorf("produce v11 to broker %d: %+v, want NOT_LEADER_OR_FOLLOWER naming %d at epoch %d", other.eng.NodeID(), p, le[0], epoch)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != le[0] || resp.Brokers[0].Port != portOf(t, leader.addr) {
		t.Errorf("produce v11 node endpoints %+v, want broker %d at %s", resp.Brokers, le[0], leader.addr)
	}
	pr.Version = 9
	p = ask(t, other.addr, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 {
		t.Errorf("produce v9 to broker %d: %+v, want NOT_LEADER_OR_FOLLOWER without a leader hint", other.eng.NodeID(), p)
	}
	if hw := leader.eng.Topic("led").Partition(0).HighWatermark(); hw != 1 {
		t.Errorf("high watermark %d after one accepted record, want 1", hw)
	}

	// Fetch: leader only, and the epoch is checked.
	for _, tc := range []struct {
		b     *broker
		epoch int32
		code  int16
	}{
		{leader, -1, 0},
		{leader, epoch, 0},
		{leader, epoch - 1, kerr.FencedLeaderEpoch.Code},
		{leader, epoch + 1, kerr.UnknownLeaderEpoch.Code},
		{other, -1, kerr.NotLeaderForPartition.Code},
	} {
		f := ask(t, tc.b.addr, fetchReq(16, "", topicID, 0, tc.epoch, 0)).(*kmsg.FetchResponse)
		fp := f.Topics[0].Partitions[0]
		if fp.ErrorCode != tc.code {
			t.Errorf("fetch from %d with current epoch %d: error %d, want %d", tc.b.eng.NodeID(), tc.epoch, fp.ErrorCode, tc.code)
		}
		if tc.code == 0 && len(fp.RecordBatches) == 0 {
			t.Errorf("fetch from the leader with current epoch %d: no records", tc.epoch)
		}
		if tc.code == kerr.NotLeaderForPartition.Code && (fp.CurrentLeader.LeaderID != le[0] || fp.CurrentLeader.LeaderEpoch != epoch || len(f.Brokers) != 1 || f.Brokers[0].NodeID != le[0]) {
			t.Errorf("fetch v16 from %d: leader hint %+v, endpoints %+v", tc.b.eng.NodeID(), fp.CurrentLeader, f.Brokers)
		}
	}

	// ListOffsets and OffsetForLeaderEpoch answer on the leader with its
	// epoch.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 7, -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "led"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, -1, epoch
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if r := ask(t, leader.addr, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 || r.Offset != 1 || r.LeaderEpoch != epoch {
		t.Errorf("list offsets on the leader: %+v, want offset 1 at epoch %d", r, epoch)
	}
	if r := ask(t, other.addr, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("list offsets on %d: %+v, want NOT_LEADER_OR_FOLLOWER", other.eng.NodeID(), r)
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version, oe.ReplicaID = 4, -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "led"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, epoch, epoch
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	if r := ask(t, leader.addr, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 || r.LeaderEpoch != epoch || r.EndOffset != 1 {
		t.Errorf("offset for the current epoch on the leader: %+v, want epoch %d ending at 1", r, epoch)
	}
	if r := ask(t, other.addr, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("offset for leader epoch on %d: %+v, want NOT_LEADER_OR_FOLLOWER", other.eng.NodeID(), r)
	}
	oe.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch - 1
	if r := ask(t, leader.addr, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; r.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("offset for leader epoch with a stale current epoch: %+v, want FENCED_LEADER_EPOCH", r)
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version = 2
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "led"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, 1
	dt.Partitions = append(dt.Partitions, dp)
	dr.Topics = append(dr.Topics, dt)
	if r := ask(t, other.addr, dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("delete records on %d: %+v, want NOT_LEADER_OR_FOLLOWER", other.eng.NodeID(), r)
	}
	if start := leader.eng.Topic("led").Partition(0).LogStart(); start != 0 {
		t.Errorf("log start %d after a refused delete, want 0", start)
	}
}

// FindCoordinator from every broker names the same live coordinator for
// each group, at its address; the group APIs on any other broker answer
// NOT_COORDINATOR, and each broker lists only the groups it coordinates.
func TestClusterCoordinators(t *testing.T) {
	bs := startCluster(t, 3, engine.Options{}, map[string]int32{"commits": 1})
	var groups []string
	for i := range 12 {
		groups = append(groups, fmt.Sprintf("group-%d", i))
	}
	coord := map[string]int32{}
	for _, b := range bs {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 4
		req.CoordinatorKeys = groups
		resp := ask(t, b.addr, req).(*kmsg.FindCoordinatorResponse)
		for _, co := range resp.Coordinators {
			if co.ErrorCode != 0 || co.NodeID < 1 || co.NodeID > 3 || co.Port != portOf(t, bs[co.NodeID-1].addr) {
				t.Fatalf("FindCoordinator on %d for %s: %+v", b.eng.NodeID(), co.Key, co)
			}
			if prev, ok := coord[co.Key]; ok && prev != co.NodeID {
				t.Errorf("%s: broker %d names coordinator %d, another named %d", co.Key, b.eng.NodeID(), co.NodeID, prev)
			}
			coord[co.Key] = co.NodeID
		}
	}
	spread := map[int32]bool{}
	for _, id := range coord {
		spread[id] = true
	}
	if len(spread) < 2 {
		t.Errorf("12 groups all coordinated by one broker: %v", coord)
	}

	// Commit through kadm (which finds the coordinator) for every group.
	adm := kadm.NewClient(bs[0].client())
	ctx := ctxT(t, 30*time.Second)
	for _, g := range groups {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "commits", Partition: 0, At: 0, LeaderEpoch: -1})
		if r, err := adm.CommitOffsets(ctx, g, os); err != nil || r.Error() != nil {
			t.Fatalf("commit for %s: %v %v", g, err, r.Error())
		}
	}
	for _, g := range groups {
		for _, b := range bs {
			hb := kmsg.NewPtrOffsetFetchRequest()
			hb.Version = 5
			hb.Group = g
			r := ask(t, b.addr, hb).(*kmsg.OffsetFetchResponse)
			want := int16(0)
			if b.eng.NodeID() != coord[g] {
				want = kerr.NotCoordinator.Code
			}
			if r.ErrorCode != want {
				t.Errorf("OffsetFetch of %s on %d (coordinator %d): error %d, want %d", g, b.eng.NodeID(), coord[g], r.ErrorCode, want)
			}
		}
	}
	// Share groups too: created on their coordinators, known to every
	// broker (share groups reach the others through events), listed by
	// their coordinator only.
	var shareGroups []string
	for i := range 6 {
		g := fmt.Sprintf("share-%d", i)
		shareGroups = append(shareGroups, g)
		co := findCoordinator(t, bs[0], g)
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = g
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = "commits"
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = 0, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		for _, b := range bs {
			r := ask(t, b.addr, req).(*kmsg.AlterShareGroupOffsetsResponse)
			want := kerr.NotCoordinator.Code
			if b.eng.NodeID() == co {
				want = 0
			}
			if r.ErrorCode != want {
				t.Fatalf("AlterShareGroupOffsets of %s on %d (coordinator %d): error %d, want %d", g, b.eng.NodeID(), co, r.ErrorCode, want)
			}
		}
		coord[g] = co
	}
	testbed.WaitFor(t, 10*time.Second, "every broker knows the share groups", func() bool {
		for _, b := range bs {
			for _, g := range shareGroups {
				if !b.eng.IsShareGroup(g) {
					return false
				}
			}
		}
		return true
	})
	// ListGroups: each broker its own, together all.
	var listed []string
	for _, b := range bs {
		lg := kmsg.NewPtrListGroupsRequest()
		lg.Version = 4
		for _, g := range ask(t, b.addr, lg).(*kmsg.ListGroupsResponse).Groups {
			if coord[g.Group] != b.eng.NodeID() {
				t.Errorf("broker %d lists %s, coordinated by %d", b.eng.NodeID(), g.Group, coord[g.Group])
			}
			listed = append(listed, g.Group)
		}
	}
	slices.Sort(listed)
	if all := sortedCopy(append(slices.Clone(groups), shareGroups...)); !slices.Equal(listed, all) {
		t.Errorf("the brokers list %v together, want %v", listed, all)
	}

	// A heartbeat elsewhere than at the coordinator is NOT_COORDINATOR
	// (the member is unknown at the coordinator).
	for _, b := range bs {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, groups[0], "m", 1
		want := kerr.NotCoordinator.Code
		if b.eng.NodeID() == coord[groups[0]] {
			want = kerr.UnknownMemberID.Code
		}
		if r := ask(t, b.addr, hb).(*kmsg.HeartbeatResponse); r.ErrorCode != want {
			t.Errorf("Heartbeat of %s on %d (coordinator %d): error %d, want %d", groups[0], b.eng.NodeID(), coord[groups[0]], r.ErrorCode, want)
		}
	}
	// DeleteGroups on one broker deletes the groups it coordinates and
	// answers NOT_COORDINATOR for the others, which stay.
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version, dg.Groups = 2, groups
	for _, g := range ask(t, bs[0].addr, dg).(*kmsg.DeleteGroupsResponse).Groups {
		want := kerr.NotCoordinator.Code
		if coord[g.Group] == 1 {
			want = 0
		}
		if g.ErrorCode != want {
			t.Errorf("DeleteGroups of %s on 1 (coordinator %d): error %d, want %d", g.Group, coord[g.Group], g.ErrorCode, want)
		}
	}
	for _, g := range groups {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = 5, g
		r := ask(t, bs[coord[g]-1].addr, of).(*kmsg.OffsetFetchResponse)
		n := 0
		for _, rt := range r.Topics {
			n += len(rt.Partitions)
		}
		if deleted := n == 0; r.ErrorCode != 0 || deleted != (coord[g] == 1) {
			t.Errorf("%s (coordinator %d) after DeleteGroups on 1: error %d, %d committed partitions", g, coord[g], r.ErrorCode, n)
		}
	}
}

// findCoordinator asks b for group's coordinator.
func findCoordinator(t *testing.T, b *broker, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	req.CoordinatorKeys = []string{group}
	co := ask(t, b.addr, req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	if co.ErrorCode != 0 {
		t.Fatalf("FindCoordinator %s: %+v", group, co)
	}
	return co.NodeID
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// On one broker the leader checks hold too: the current leader epoch from
// Metadata fetches, a newer one is UNKNOWN_LEADER_EPOCH (an older one
// FENCED_LEADER_EPOCH once epochs move), OffsetForLeaderEpoch ends the
// current epoch at the high watermark, and fetched batches carry no
// leader epoch.
func TestLeaderEpochChecks(t *testing.T) {
	b := startBroker(t, engine.Options{})
	createTopic(t, b, "epochs", 1)
	pr := produceReq("epochs", map[int32][]byte{0: oneBatch(t, "x")}, 0)
	if p := ask(t, b.addr, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("produce: %+v", p)
	}
	m := metadata(t, b.addr, "epochs")
	le := leaders(t, m, "epochs")[0]
	if le[0] != b.eng.NodeID() || m.ControllerID != b.eng.NodeID() || len(m.Brokers) != 1 || m.Brokers[0].Port != portOf(t, b.addr) {
		t.Fatalf("metadata: leader %v, brokers %+v, controller %d", le, m.Brokers, m.ControllerID)
	}
	epoch := le[1]
	id := b.eng.Topic("epochs").ID()
	cases := map[int32]int16{-1: 0, epoch: 0, epoch + 1: kerr.UnknownLeaderEpoch.Code}
	if epoch > 0 {
		cases[epoch-1] = kerr.FencedLeaderEpoch.Code
	}
	for cur, want := range cases {
		fp := ask(t, b.addr, fetchReq(13, "", id, 0, cur, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if fp.ErrorCode != want {
			t.Errorf("fetch with current epoch %d (partition at %d): error %d, want %d", cur, epoch, fp.ErrorCode, want)
		}
		if want != 0 {
			continue
		}
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(fp.RecordBatches); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		if kb.PartitionLeaderEpoch != -1 {
			t.Errorf("fetched batch has partition leader epoch %d, want -1 (unknown)", kb.PartitionLeaderEpoch)
		}
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version, oe.ReplicaID = 4, -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "epochs"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, epoch, epoch
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	if r := ask(t, b.addr, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; r.ErrorCode != 0 || r.LeaderEpoch != epoch || r.EndOffset != 1 {
		t.Errorf("offset for the current epoch %d: %+v, want it to end at 1", epoch, r)
	}
	oe.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch + 1
	if r := ask(t, b.addr, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; r.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("offset for leader epoch with a newer current epoch: %+v, want UNKNOWN_LEADER_EPOCH", r)
	}
}
