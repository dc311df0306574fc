package kafkawire_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
)

func consumerOpts(session, interval time.Duration) engine.Options {
	return engine.Options{
		AutoCreateTopics:           true,
		GroupInitialRebalanceDelay: 100 * time.Millisecond,
		ConsumerGroups:             group.ConsumerOptions{SessionTimeout: session, HeartbeatInterval: interval},
	}
}

// rawMember is a raw KIP-848 member: it sends ConsumerGroupHeartbeats by hand.
type rawMember struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	id     string
	epoch  int32
	owned  map[[16]byte][]int32
	topics []string
	regex  *string
	inst   *string
}

func newMember(t *testing.T, b *broker, grp, id string, topics ...string) *rawMember {
	return &rawMember{t: t, cl: b.client(), group: grp, id: id, topics: topics, owned: map[[16]byte][]int32{}}
}

// send sends one heartbeat: full (subscription and owned partitions)
// when full, else a bare keepalive.
func (m *rawMember) send(epoch int32, full bool) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, epoch
	req.RebalanceTimeoutMillis = -1
	req.InstanceID = m.inst
	if full {
		req.RebalanceTimeoutMillis = 10000
		if m.regex != nil {
			req.SubscribedTopicRegex = m.regex
		} else {
			req.SubscribedTopicNames = m.topics
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for id, ps := range m.owned {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = id, ps
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(context.Background(), m.cl)
	if err != nil {
		m.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

// beat heartbeats at its epoch with what it owns and adopts the answer;
// it fails the test on an error code.
func (m *rawMember) beat() *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	resp := m.send(m.epoch, true)
	if resp.ErrorCode != 0 {
		m.t.Fatalf("member %s: heartbeat at epoch %d: %v %s", m.id, m.epoch, kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = map[[16]byte][]int32{}
		for _, t := range resp.Assignment.Topics {
			m.owned[t.TopicID] = t.Partitions
		}
	}
	return resp
}

func (m *rawMember) count() int {
	n := 0
	for _, ps := range m.owned {
		n += len(ps)
	}
	return n
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// disjoint fails the test if two members own the same partition.
func disjoint(t *testing.T, ms ...*rawMember) {
	t.Helper()
	seen := map[string]string{}
	for _, m := range ms {
		for id, ps := range m.owned {
			for _, p := range ps {
				k := fmt.Sprintf("%x/%d", id[:4], p)
				if o, ok := seen[k]; ok {
					t.Fatalf("partition %s owned by %s and %s", k, o, m.id)
				}
				seen[k] = m.id
			}
		}
	}
}

func createTopics(t *testing.T, b *broker, partitions int32, names ...string) {
	t.Helper()
	rs, err := b.admin().CreateTopics(ctxT(t, 10*time.Second), partitions, 1, nil, names...)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func describeConsumerGroup(t *testing.T, b *broker, grp string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{grp}
	resp, err := req.RequestWith(ctxT(t, 5*time.Second), b.client())
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("describe: %v %v", resp, err)
	}
	return resp.Groups[0]
}

// TestConsumerGroupReconciliation drives KIP-848's epochs by hand: a
// partition reaches a new owner only after its old owner revoked it;
// epochs ahead or unknown members are fenced; commits check epochs;
// ListGroups, DescribeGroups and ConsumerGroupDescribe answer as Kafka's;
// a restart keeps the state.
func TestConsumerGroupReconciliation(t *testing.T) {
	b := startBroker(t, consumerOpts(45*time.Second, time.Second))
	createTopics(t, b, 4, "rec")
	a := newMember(t, b, "g848", "member-a", "rec")
	if r := a.beat(); a.epoch != 1 || a.count() != 4 || r.HeartbeatIntervalMillis != 1000 {
		t.Fatalf("first member: epoch %d, %d partitions, interval %d; want 1, 4, 1000", a.epoch, a.count(), r.HeartbeatIntervalMillis)
	}
	a.beat()
	c := newMember(t, b, "g848", "member-c", "rec")
	c.beat()
	if c.epoch != 2 || c.count() != 0 {
		t.Fatalf("second member: epoch %d with %d partitions; want epoch 2 and nothing while a holds all", c.epoch, c.count())
	}
	if d := describeConsumerGroup(t, b, "g848"); d.State != "Reconciling" || d.Epoch != 2 || d.AssignmentEpoch != 2 || len(d.Members) != 2 {
		t.Fatalf("describe while reconciling: %+v", d)
	}
	// a is told to give up two partitions and stays at epoch 1 until it
	// has.
	a.beat()
	if a.epoch != 1 || a.count() != 2 {
		t.Fatalf("revoking member: epoch %d with %d partitions; want 1 and 2", a.epoch, a.count())
	}
	c.beat()
	if c.count() != 0 {
		t.Fatalf("unreleased partitions handed out before their revocation: %v", c.owned)
	}
	// Fenced: an epoch ahead of the member's, or an unknown member.
	if r := a.send(7, false); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v, want FENCED_MEMBER_EPOCH", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := newMember(t, b, "g848", "nobody", "rec").send(3, false); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	// a acknowledges by heartbeating without them, and moves to epoch 2.
	a.beat()
	if a.epoch != 2 {
		t.Fatalf("after revoking: epoch %d, want 2", a.epoch)
	}
	c.beat()
	if c.count() != 2 {
		t.Fatalf("after the revocation the new member has %d partitions, want 2", c.count())
	}
	disjoint(t, a, c)
	if d := describeConsumerGroup(t, b, "g848"); d.State != "Stable" || d.AssignorName != "uniform" {
		t.Fatalf("describe when reconciled: %+v", d)
	}

	// Commits: a member's epoch ahead is stale; its own is fine.
	commitPart := func(epoch, partition int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "g848", "member-a", epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "rec"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t, 5*time.Second), b.client())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	commit := func(epoch int32) int16 {
		for _, ps := range a.owned {
			return commitPart(epoch, ps[0])
		}
		t.Fatal("member-a owns nothing")
		return 0
	}
	if code := commit(5); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit ahead of the member's epoch: %v, want STALE_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := commit(a.epoch); code != 0 {
		t.Fatalf("commit at the member's epoch: %v", kerr.ErrorForCode(code))
	}

	// ListGroups v5 filters by type; DescribeGroups does not describe a
	// consumer group (Kafka: GROUP_ID_NOT_FOUND).
	list := func(types ...string) []kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = types
		resp, err := req.RequestWith(ctxT(t, 5*time.Second), b.client())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups
	}
	if gs := list("consumer"); len(gs) != 1 || gs[0].Group != "g848" || gs[0].GroupType != "consumer" || gs[0].GroupState != "Stable" || gs[0].ProtocolType != "consumer" {
		t.Fatalf("ListGroups type consumer: %+v", gs)
	}
	if gs := list("classic"); len(gs) != 0 {
		t.Fatalf("ListGroups type classic lists %+v", gs)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g848"}
	dresp, err := dg.RequestWith(ctxT(t, 5*time.Second), b.client())
	if err != nil || dresp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups of a consumer group: %+v %v", dresp, err)
	}

	// A restart keeps epochs and assignments: the members carry on.
	b.restart()
	a.cl, c.cl = b.client(), b.client()
	a.beat()
	c.beat()
	if a.epoch != 2 || c.epoch != 2 || a.count() != 2 || c.count() != 2 {
		t.Fatalf("after restart: a epoch %d (%d partitions), c epoch %d (%d); want both 2 with 2", a.epoch, a.count(), c.epoch, c.count())
	}
	if d := describeConsumerGroup(t, b, "g848"); d.State != "Stable" || d.Epoch != 2 || len(d.Members) != 2 {
		t.Fatalf("describe after restart: %+v", d)
	}

	// c leaves (-1): a gets everything at a new epoch.
	had := map[int32]bool{}
	for _, ps := range a.owned {
		for _, p := range ps {
			had[p] = true
		}
	}
	if r := c.send(-1, false); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	a.beat()
	if a.epoch != 3 || a.count() != 4 {
		t.Fatalf("after the leave: epoch %d with %d partitions, want 3 with 4", a.epoch, a.count())
	}
	// The epoch each partition was given at survives a restart: a commit
	// from epoch 2 is fine for a partition a held then, stale for one it
	// got at 3.
	b.restart()
	a.cl = b.client()
	for p := int32(0); p < 4; p++ {
		want := kerr.StaleMemberEpoch.Code
		if had[p] {
			want = 0
		}
		if code := commitPart(2, p); code != want {
			t.Fatalf("after a restart, a commit from epoch 2 for partition %d (held at 2: %v): %v, want %v", p, had[p], kerr.ErrorForCode(code), kerr.ErrorForCode(want))
		}
	}
	// A join must not claim partitions; an unknown assignor is refused.
	bad := newMember(t, b, "g848", "bad", "rec")
	bad.owned = a.owned
	if r := bad.send(0, true); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join owning partitions: %v, want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode))
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "g848", "x", 1000, []string{"rec"}
	sa := "cooperative-magic"
	req.ServerAssignor = &sa
	if r, err := req.RequestWith(ctxT(t, 5*time.Second), b.client()); err != nil || r.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Fatalf("unknown assignor: %+v %v", r, err)
	}
}

// TestConsumerGroupStaticMembers: a static member leaving with epoch -2
// keeps its partitions; its instance rejoining under a new member id takes
// them over; a second member with an instance id in use is refused.
func TestConsumerGroupStaticMembers(t *testing.T) {
	b := startBroker(t, consumerOpts(45*time.Second, time.Second))
	createTopics(t, b, 3, "stat")
	inst := "instance-1"
	a := newMember(t, b, "gs", "static-a", "stat")
	a.inst = &inst
	a.beat()
	a.beat()
	if a.count() != 3 {
		t.Fatalf("static member has %d partitions", a.count())
	}
	other := newMember(t, b, "gs", "static-b", "stat")
	other.inst = &inst
	if r := other.send(0, true); r.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("second member with a live instance id: %v, want UNRELEASED_INSTANCE_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := a.send(-2, false); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	d := describeConsumerGroup(t, b, "gs")
	if len(d.Members) != 1 || len(d.Members[0].Assignment.TopicPartitions) != 1 {
		t.Fatalf("after a static leave the member should stay with its assignment: %+v", d)
	}
	if d.Members[0].MemberEpoch != -2 {
		t.Fatalf("a static member that left is described at epoch %d, want -2 as Kafka", d.Members[0].MemberEpoch)
	}
	epoch := d.Epoch
	other.epoch = 0
	other.beat()
	if other.count() != 3 {
		t.Fatalf("rejoined instance got %d partitions, want the 3 it had", other.count())
	}
	d = describeConsumerGroup(t, b, "gs")
	if len(d.Members) != 1 || d.Members[0].MemberID != "static-b" || d.Epoch != epoch {
		t.Fatalf("after the instance rejoined: %+v (epoch was %d; a takeover starts none)", d, epoch)
	}
	if r := a.send(1, false); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("replaced static member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestConsumerGroupRegexAndSessionTimeout: a regex subscription picks up
// topics created later (the group epoch moves on); a member that stops
// heartbeating is removed after the session timeout and its partitions
// go to the others.
func TestConsumerGroupRegexAndSessionTimeout(t *testing.T) {
	b := startBroker(t, consumerOpts(1500*time.Millisecond, 200*time.Millisecond))
	createTopics(t, b, 2, "rx-one")
	re := "rx-.*"
	a := newMember(t, b, "gr", "re-a")
	a.regex = &re
	a.beat()
	a.beat()
	if a.count() != 2 {
		t.Fatalf("regex member has %d partitions, want 2", a.count())
	}
	createTopics(t, b, 3, "rx-two", "other-topic")
	epoch := a.epoch
	a.beat()
	if a.count() != 5 || a.epoch <= epoch {
		t.Fatalf("after creating rx-two: %d partitions at epoch %d (was %d); want 5 at a later epoch", a.count(), a.epoch, epoch)
	}
	bad := "rx-("
	x := newMember(t, b, "gr", "re-x")
	x.regex = &bad
	if r := x.send(0, true); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Session timeout: c joins, then falls silent.
	c := newMember(t, b, "gr", "re-c")
	c.regex = &re
	c.beat()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a.beat()
		c.beat()
		if a.count()+c.count() == 5 && c.count() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no split between two members: a %v, c %v", a.owned, c.owned)
		}
		time.Sleep(50 * time.Millisecond)
	}
	disjoint(t, a, c)
	for {
		a.beat()
		if a.count() == 5 && len(describeConsumerGroup(t, b, "gr").Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("silent member not removed after its session timeout: a has %v", a.owned)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := c.send(c.epoch, false); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestConsumerGroupEmptiedDeleteAndCleanup: a consumer group whose last
// member left stays Empty (listed as a consumer group, across a restart)
// until deleted or cleaned up; one with members cannot be deleted; the
// cleanup leaves a group with commits alone.
func TestConsumerGroupEmptiedDeleteAndCleanup(t *testing.T) {
	opts := consumerOpts(45*time.Second, time.Second)
	opts.GroupCleanupInterval = time.Hour // the test runs the cleanup itself
	b := startBroker(t, opts)
	createTopics(t, b, 2, "ec")
	ctx := ctxT(t, 30*time.Second)
	adm := b.admin()
	joinAndLeave := func(grp string) *rawMember {
		m := newMember(t, b, grp, grp+"-m", "ec")
		m.beat()
		return m
	}
	listed := func(grp string) (string, string) {
		ls, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ls[grp].State, ls[grp].ProtocolType
	}
	a := joinAndLeave("ec-a")
	if dr, _ := adm.DeleteGroup(ctx, "ec-a"); !errors.Is(dr.Err, kerr.NonEmptyGroup) {
		t.Fatalf("deleting a consumer group with a member: %v, want NON_EMPTY_GROUP", dr.Err)
	}
	a.send(-1, false)
	if st, _ := listed("ec-a"); st != "Empty" {
		t.Fatalf("emptied consumer group listed as %q, want Empty", st)
	}
	if dr, err := adm.DeleteGroup(ctx, "ec-a"); err != nil || dr.Err != nil {
		t.Fatalf("deleting an emptied consumer group: %v %v", err, dr.Err)
	}
	if st, _ := listed("ec-a"); st != "" {
		t.Fatalf("deleted group still listed as %q", st)
	}
	joinAndLeave("ec-b").send(-1, false)
	c := joinAndLeave("ec-c")
	// c commits, then leaves: its group has commits and stays.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.MemberID, req.Generation = "ec-c", c.id, c.epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "ec"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, b.client()); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %+v %v", resp, err)
	}
	c.send(-1, false)

	b.restart()
	if st, pt := listed("ec-b"); st != "Empty" || pt != "consumer" {
		t.Fatalf("after a restart the emptied consumer group is %q (%q), want Empty consumer", st, pt)
	}
	n, err := b.eng.Groups().Cleanup(ctx)
	if err != nil || n != 1 {
		t.Fatalf("cleanup removed %d groups: %v; want only ec-b", n, err)
	}
	if st, _ := listed("ec-b"); st != "" {
		t.Fatalf("cleaned up group still listed as %q", st)
	}
	if st, _ := listed("ec-c"); st != "Empty" {
		t.Fatalf("group with commits is %q after the cleanup, want Empty", st)
	}
	r, err := b.rc.Do(ctx, "EXISTS", "korvet:group:ec-b:consumer")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Int(); err != nil || n != 0 {
		t.Fatalf("the cleaned-up group's Redis state is still there: %d %v", n, err)
	}
}
