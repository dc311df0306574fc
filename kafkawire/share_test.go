package kafkawire_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// shareMember drives one share group member with raw requests.
type shareMember struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	id     string
	epoch  int32 // member epoch
	sess   int32 // next share session epoch
	topic  [16]byte
	tname  string
	parts  []int32
	joined bool
}

func newShareMember(t *testing.T, b *broker, group, id, topic string) *shareMember {
	t.Helper()
	tp := b.eng.Topic(topic)
	if tp == nil {
		t.Fatalf("no topic %s", topic)
	}
	var parts []int32
	for _, p := range tp.Partitions() {
		parts = append(parts, p.ID())
	}
	return &shareMember{t: t, cl: b.client(), group: group, id: id, topic: tp.ID(), tname: topic, parts: parts}
}

func (m *shareMember) heartbeat() *kmsg.ShareGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = m.group, m.id, m.epoch
	if m.epoch == 0 {
		req.SubscribedTopicNames = []string{m.tname}
	}
	resp, err := req.RequestWith(ctxT(m.t, 10*time.Second), m.cl)
	if err != nil {
		m.t.Fatalf("heartbeat: %v", err)
	}
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
		m.joined = true
	}
	return resp
}

// ack is one acknowledgement batch with one type.
type ack struct {
	first, last int64
	typ         int8
}

// fetch sends a ShareFetch for every partition of the topic (acks on
// partition 0), moving the session epoch on when it succeeds.
func (m *shareMember) fetch(wait time.Duration, maxRecords int32, acks ...ack) *kmsg.ShareFetchResponse {
	m.t.Helper()
	resp := m.fetchEpoch(m.sess, wait, maxRecords, acks...)
	if resp.ErrorCode == 0 {
		m.sess++
	}
	return resp
}

func (m *shareMember) fetchEpoch(epoch int32, wait time.Duration, maxRecords int32, acks ...ack) *kmsg.ShareFetchResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = epoch
	req.MaxWaitMillis, req.MaxRecords, req.MaxBytes = int32(wait.Milliseconds()), maxRecords, 1<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topic
	for _, p := range m.parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		if p == 0 {
			rp.AcknowledgementBatches = ackBatches[kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch](acks, func(a ack) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
				b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
				b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
				return b
			})
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(m.t, 30*time.Second), m.cl)
	if err != nil {
		m.t.Fatalf("share fetch: %v", err)
	}
	return resp
}

func ackBatches[B any](acks []ack, mk func(ack) B) []B {
	var out []B
	for _, a := range acks {
		out = append(out, mk(a))
	}
	return out
}

// acknowledge sends a ShareAcknowledge for partition 0 and returns its
// partition error code (or the top-level one).
func (m *shareMember) acknowledge(acks ...ack) int16 {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.sess
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = m.topic
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = ackBatches[kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch](acks, func(a ack) kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, []int8{a.typ}
		return b
	})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(m.t, 10*time.Second), m.cl)
	if err != nil {
		m.t.Fatalf("share acknowledge: %v", err)
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	if m.sess > 0 {
		m.sess++
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition == 0 {
				return p.ErrorCode
			}
		}
	}
	m.t.Fatal("share acknowledge: partition 0 not in the answer")
	return 0
}

// acquired lists (offset, delivery count) of partition 0 in a response,
// checking that the records sent are those acquired,
// failing on any error.
func acquired(t *testing.T, resp *kmsg.ShareFetchResponse) map[int64]int16 {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[int64]int16{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
				t.Fatalf("partition %d: fetch %v, ack %v", p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
			}
			if p.Partition != 0 {
				continue
			}
			for _, ar := range p.AcquiredRecords {
				for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
					out[o] = ar.DeliveryCount
				}
			}
			if len(p.AcquiredRecords) > 0 && len(p.Records) == 0 {
				t.Fatalf("partition %d: acquired records without record data", p.Partition)
			}
		}
	}
	return out
}

// ackCode is partition 0's acknowledge error in a ShareFetch answer.
func ackCode(t *testing.T, resp *kmsg.ShareFetchResponse) int16 {
	t.Helper()
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Partition == 0 {
				return p.AcknowledgeErrorCode
			}
		}
	}
	t.Fatal("partition 0 not in the answer")
	return 0
}

// setGroupConfig sets share group configs with IncrementalAlterConfigs.
func setGroupConfig(t *testing.T, b *broker, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), b.client())
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("set %v on %s: %v", kv, group, err)
	}
}

// shareTopic creates a topic with n records in partition 0 ("v0".."vn-1").
func shareTopic(t *testing.T, b *broker, topic string, partitions int32, n int) {
	t.Helper()
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, b, topic, 0, n)
}

func produceN(t *testing.T, b *broker, topic string, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("v" + strconv.Itoa(i))})
	}
	produceAll(t, b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), recs)
}

// pendingEntry is one XPENDING entry.
type pendingEntry struct {
	offset     int64
	owner      string
	deliveries int64
}

// xpending runs XPENDING on a segment stream for a share group.
func xpending(t *testing.T, b *broker, topic string, segment int64, group string) []pendingEntry {
	t.Helper()
	key := b.eng.Keyspace() + ":storage:local:" + topic + ":0:" + strconv.FormatInt(segment, 10)
	r, err := b.rc.Do(context.Background(), "XPENDING", key, "share:"+group, "-", "+", 1000)
	if err != nil || r.Err() != nil {
		t.Fatalf("XPENDING %s: %v %v", key, err, r.Err())
	}
	var out []pendingEntry
	var ents []resp.Reply
	ents = r.Elems(ents)
	for _, e := range ents {
		var f []resp.Reply
		f = e.Elems(f)
		id := string(f[0].Bytes())
		off, _ := strconv.ParseInt(id[:len(id)-2], 10, 64)
		n, _ := f[3].Int()
		out = append(out, pendingEntry{off, string(f[1].Bytes()), n})
	}
	return out
}

func startShareBroker(t *testing.T, lock time.Duration) *broker {
	return startBroker(t, engine.Options{AutoCreateTopics: true, Share: engine.ShareOptions{LockDuration: lock}})
}

// RELEASE makes records available at once: the next fetch (by anyone)
// gets them with delivery count 2, and XPENDING agrees.
func TestShareReleaseRedeliversAtOnce(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	shareTopic(t, b, "rel", 1, 5)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	a, c := newShareMember(t, b, "g", "member-a", "rel"), newShareMember(t, b, "g", "member-c", "rel")
	a.heartbeat()
	c.heartbeat()
	got := acquired(t, a.fetch(time.Second, 0))
	if len(got) != 5 || got[0] != 1 || got[4] != 1 {
		t.Fatalf("first fetch acquired %v, want offsets 0-4 with delivery count 1", got)
	}
	if code := a.acknowledge(ack{1, 3, 2}); code != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(code))
	}
	pend := xpending(t, b, "rel", 0, "g")
	owners := map[int64]string{}
	for _, p := range pend {
		owners[p.offset] = p.owner
	}
	if owners[1] != "share:released" || owners[0] != "member-a" {
		t.Fatalf("XPENDING after release: %+v", pend)
	}
	start := time.Now()
	got = acquired(t, c.fetch(5*time.Second, 0))
	if len(got) != 3 || got[1] != 2 || got[2] != 2 || got[3] != 2 {
		t.Fatalf("after release, other member acquired %v, want 1-3 with delivery count 2", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("released records took %v to come back", d)
	}
	for _, p := range xpending(t, b, "rel", 0, "g") {
		want := map[int64]string{0: "member-a", 4: "member-a", 1: "member-c", 2: "member-c", 3: "member-c"}[p.offset]
		wantN := map[bool]int64{true: 2, false: 1}[p.offset >= 1 && p.offset <= 3]
		if p.owner != want || p.deliveries != wantN {
			t.Errorf("XPENDING entry %+v, want owner %s deliveries %d", p, want, wantN)
		}
	}
}

// REJECT archives a record: it is never delivered again, and leaves the
// PEL.
func TestShareRejectNeverRedelivered(t *testing.T) {
	b := startShareBroker(t, 2*time.Second)
	shareTopic(t, b, "rej", 1, 4)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	a := newShareMember(t, b, "g", "member-a", "rej")
	a.heartbeat()
	if got := acquired(t, a.fetch(time.Second, 0)); len(got) != 4 {
		t.Fatalf("acquired %v", got)
	}
	if code := ackCode(t, a.fetch(0, 0, ack{0, 1, 3}, ack{2, 3, 1})); code != 0 {
		t.Fatalf("reject/accept: %v", kerr.ErrorForCode(code))
	}
	if p := xpending(t, b, "rej", 0, "g"); len(p) != 0 {
		t.Fatalf("XPENDING after reject and accept: %+v", p)
	}
	// Past the lock duration nothing comes back.
	if got := acquired(t, a.fetch(3*time.Second, 0)); len(got) != 0 {
		t.Fatalf("rejected or accepted records delivered again: %v", got)
	}
	st, err := b.eng.ShareState(context.Background(), "g", b.eng.Topic("rej").Partition(0))
	if err != nil {
		t.Fatal(err)
	}
	if st.Rejected != 2 || st.Accepted != 2 || st.StartOffset != 4 || st.InFlight != 0 {
		t.Fatalf("share state %+v", st)
	}
}

// A record released or timed out delivery.count.limit times is archived.
func TestShareDeliveryLimitArchives(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	shareTopic(t, b, "lim", 1, 3)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "3")
	a := newShareMember(t, b, "g", "member-a", "lim")
	a.heartbeat()
	for round := 1; round <= 3; round++ {
		got := acquired(t, a.fetch(time.Second, 0))
		if len(got) != 3 || got[0] != int16(round) {
			t.Fatalf("round %d acquired %v", round, got)
		}
		if code := a.acknowledge(ack{0, 2, 2}); code != 0 {
			t.Fatalf("release round %d: %v", round, kerr.ErrorForCode(code))
		}
	}
	if got := acquired(t, a.fetch(500*time.Millisecond, 0)); len(got) != 0 {
		t.Fatalf("records past the delivery limit delivered: %v", got)
	}
	if p := xpending(t, b, "lim", 0, "g"); len(p) != 0 {
		t.Fatalf("XPENDING after archiving: %+v", p)
	}
	st, _ := b.eng.ShareState(context.Background(), "g", b.eng.Topic("lim").Partition(0))
	if st.ArchivedByLimit != 3 || st.Deliveries != 9 || st.Redeliveries != 6 {
		t.Fatalf("share state %+v", st)
	}
}

// Acknowledging what one does not hold is INVALID_RECORD_STATE and
// changes nothing.
func TestShareInvalidRecordState(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	shareTopic(t, b, "irs", 1, 5)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	a, c := newShareMember(t, b, "g", "member-a", "irs"), newShareMember(t, b, "g", "member-c", "irs")
	a.heartbeat()
	c.heartbeat()
	if got := acquired(t, a.fetch(time.Second, 0)); len(got) != 5 {
		t.Fatalf("acquired %v", got)
	}
	c.fetch(0, 0) // opens c's session; nothing left to acquire
	invalid := kerr.InvalidRecordState.Code
	if code := c.acknowledge(ack{0, 4, 1}); code != invalid {
		t.Errorf("accepting another member's records: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	if code := a.acknowledge(ack{3, 7, 1}); code != invalid {
		t.Errorf("accepting records never delivered: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	if n := len(xpending(t, b, "irs", 0, "g")); n != 5 {
		t.Fatalf("a refused acknowledgement changed the PEL: %d pending", n)
	}
	if code := a.acknowledge(ack{0, 4, 1}); code != 0 {
		t.Fatalf("accept: %v", kerr.ErrorForCode(code))
	}
	if code := a.acknowledge(ack{0, 0, 1}); code != invalid {
		t.Errorf("accepting twice: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	// Malformed batches are the request's fault.
	if code := a.acknowledge(ack{4, 2, 1}); code != kerr.InvalidRequest.Code {
		t.Errorf("batch with last < first: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if code := a.acknowledge(ack{0, 1 << 40, 1}); code != kerr.InvalidRequest.Code {
		t.Errorf("batch of 2^40 offsets: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
}

// Share sessions: epochs, unknown sessions, and closing with -1, which
// releases what the member held.
func TestShareSessionEpochs(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	shareTopic(t, b, "sess", 1, 3)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	a, c := newShareMember(t, b, "g", "member-a", "sess"), newShareMember(t, b, "g", "member-c", "sess")
	a.heartbeat()
	c.heartbeat()
	if r := a.fetchEpoch(1, 0, 0); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("incremental fetch without a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	a.sess = 1
	if code := a.acknowledge(ack{0, 0, 1}); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("acknowledge without a session: %v", kerr.ErrorForCode(code))
	}
	a.sess = 0
	if r := a.fetchEpoch(0, 0, 0, ack{0, 0, 1}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acknowledgements when opening a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := acquired(t, a.fetch(time.Second, 0)); len(got) != 3 {
		t.Fatalf("acquired %v", got)
	}
	if r := a.fetchEpoch(5, 0, 0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := acquired(t, a.fetch(0, 0, ack{0, 0, 1})); len(got) != 0 {
		t.Fatalf("second fetch acquired %v", got)
	}
	// Close with an acknowledgement: offset 1 accepted, 2 released.
	if r := a.fetchEpoch(-1, 0, 0, ack{1, 1, 1}); r.ErrorCode != 0 || ackCode(t, r) != 0 {
		t.Fatalf("close: %v / %v", kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(ackCode(t, r)))
	}
	if r := a.fetchEpoch(a.sess, 0, 0); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("fetch on a closed session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	got := acquired(t, c.fetch(time.Second, 0))
	if len(got) != 1 || got[2] != 2 {
		t.Fatalf("after close, other member acquired %v, want offset 2 with delivery count 2", got)
	}
}

// share.auto.offset.reset: latest (default) starts at the end, earliest
// at the log start; both take effect on the group's first fetch.
func TestShareAutoOffsetReset(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	shareTopic(t, b, "reset", 1, 3)
	setGroupConfig(t, b, "early", "share.auto.offset.reset", "earliest")
	late, early := newShareMember(t, b, "late", "m1", "reset"), newShareMember(t, b, "early", "m2", "reset")
	late.heartbeat()
	early.heartbeat()
	if got := acquired(t, late.fetch(200*time.Millisecond, 0)); len(got) != 0 {
		t.Fatalf("latest: acquired %v before anything new", got)
	}
	produceN(t, b, "reset", 3, 2)
	if got := acquired(t, late.fetch(2*time.Second, 0)); len(got) != 2 || got[3] != 1 || got[4] != 1 {
		t.Fatalf("latest: acquired %v, want 3-4", got)
	}
	if got := acquired(t, early.fetch(time.Second, 0)); len(got) != 5 {
		t.Fatalf("earliest: acquired %v, want 0-4", got)
	}
	// A bad value is refused with the key named.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "early"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("sometimes")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), b.client())
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Resources[0]; r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil {
		t.Fatalf("bad share.auto.offset.reset: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
}

// The offset admin APIs, ListGroups/DeleteGroups, and one namespace for
// share and classic group ids.
func TestShareGroupOffsetAdmin(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	shareTopic(t, b, "adm", 1, 10)
	ctx := ctxT(t, 30*time.Second)
	cl := b.client()
	alter := func(group string, off int64) (int16, int16) {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = "adm"
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.StartOffset = off
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) == 0 {
			return resp.ErrorCode, 0
		}
		return resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode
	}
	describe := func(group string) (int64, int64) {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range resp.Groups[0].Topics {
			for _, p := range tp.Partitions {
				return p.StartOffset, p.Lag
			}
		}
		return -1, -1
	}
	if g, p := alter("g", 6); g != 0 || p != 0 {
		t.Fatalf("alter: %v %v", kerr.ErrorForCode(g), kerr.ErrorForCode(p))
	}
	if start, lag := describe("g"); start != 6 || lag != 4 {
		t.Fatalf("describe after alter: start %d lag %d, want 6 and 4", start, lag)
	}
	m := newShareMember(t, b, "g", "m1", "adm")
	m.heartbeat()
	got := acquired(t, m.fetch(time.Second, 0))
	if len(got) != 4 || got[6] != 1 {
		t.Fatalf("acquired %v, want 6-9", got)
	}
	if start, _ := describe("g"); start != 6 {
		t.Fatalf("start with records in flight: %d, want 6", start)
	}
	if code := m.acknowledge(ack{6, 7, 1}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if start, lag := describe("g"); start != 8 || lag != 2 {
		t.Fatalf("start after accepting 6-7: %d lag %d, want 8 and 2", start, lag)
	}
	if g, _ := alter("g", 0); g != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(g))
	}
	// ListGroups shows it as a share group.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"share"}
	lresp, err := lg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != "g" || lresp.Groups[0].GroupType != "share" || lresp.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups share: %+v", lresp.Groups)
	}
	// A classic member may not take the share group's id, nor the other
	// way round.
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis = "g", "consumer", 10000
	jg.Protocols = append(jg.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range"})
	jresp, err := jg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if jresp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("JoinGroup on a share group id: %v", kerr.ErrorForCode(jresp.ErrorCode))
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g", -1
	oct := kmsg.NewOffsetCommitRequestTopic()
	oct.Topic = "adm"
	oct.Partitions = append(oct.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: 0, Offset: 1})
	oc.Topics = append(oc.Topics, oct)
	ocResp, err := oc.RequestWith(ctx, cl)
	if err != nil || ocResp.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("OffsetCommit on a share group id: %v %+v", err, ocResp)
	}
	// Leave, then delete offsets and the group.
	m.epoch = -1
	if r := m.heartbeat(); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	dreq := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	dreq.GroupID = "g"
	dreq.Topics = append(dreq.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: "adm"})
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || dresp.ErrorCode != 0 || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete offsets: %v %+v", err, dresp)
	}
	if start, _ := describe("g"); start != -1 {
		t.Fatalf("describe after delete offsets: start %d", start)
	}
	if g, _ := alter("g", 3); g != 0 {
		t.Fatalf("alter: %v", kerr.ErrorForCode(g))
	}
	key := b.eng.Keyspace() + ":storage:local:adm:0:0"
	groupsOn := func() int {
		r, err := b.rc.Do(ctx, "XINFO", "GROUPS", key)
		if err != nil || r.Err() != nil {
			t.Fatalf("XINFO GROUPS: %v %v", err, r.Err())
		}
		return r.Len()
	}
	if n := groupsOn(); n != 1 {
		t.Fatalf("%d consumer groups on the stream, want 1", n)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	delResp, err := del.RequestWith(ctx, cl)
	if err != nil || delResp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v %+v", err, delResp)
	}
	if n := groupsOn(); n != 0 {
		t.Fatalf("%d consumer groups on the stream after DeleteGroups, want 0", n)
	}
	if b.eng.IsShareGroup("g") {
		t.Fatal("share group still known after DeleteGroups")
	}
	// A classic group's id is refused to share members.
	cg := b.client(kgo.ConsumerGroup("classic"), kgo.ConsumeTopics("adm"))
	testbed.WaitFor(t, 20*time.Second, "classic group formed", func() bool {
		cg.PollFetches(ctxT(t, 200*time.Millisecond))
		_, ok := b.eng.Groups().Describe("classic")
		return ok
	})
	sm := newShareMember(t, b, "classic", "m9", "adm")
	if r := sm.heartbeat(); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a classic group id: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A KIP-848 consumer group's id is refused to share members, and a
	// share group's id to consumer group members: one namespace.
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.MemberEpoch, cgh.RebalanceTimeoutMillis = "next-gen", "cm1", 0, 30000
	cgh.SubscribedTopicNames = []string{"adm"}
	cgh.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	cgr, err := cgh.RequestWith(ctx, cl)
	if err != nil || cgr.ErrorCode != 0 {
		t.Fatalf("consumer group join: %v %v", err, kerr.ErrorForCode(cgr.ErrorCode))
	}
	if r := newShareMember(t, b, "next-gen", "m10", "adm").heartbeat(); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a consumer group id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := newShareMember(t, b, "shared", "m11", "adm").heartbeat(); r.ErrorCode != 0 {
		t.Fatalf("share join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	cgh.Group, cgh.MemberID = "shared", "cm2"
	cgr, err = cgh.RequestWith(ctx, cl)
	if err != nil || cgr.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer group heartbeat on a share group id: %v %v", err, kerr.ErrorForCode(cgr.ErrorCode))
	}
}

// Thousands of records released at once come back in one fetch (the
// claim runs in chunks inside the script), and the in-flight bound holds.
func TestShareLargeRedelivery(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Share: engine.ShareOptions{LockDuration: time.Minute, MaxPartitionLocks: 2500}})
	shareTopic(t, b, "big", 1, 3000)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, b, "g", "m1", "big")
	m.heartbeat()
	if got := acquired(t, m.fetch(time.Second, 5000)); len(got) != 2500 {
		t.Fatalf("acquired %d records, want 2500 (the in-flight bound)", len(got))
	}
	if got := acquired(t, m.fetch(300*time.Millisecond, 5000)); len(got) != 0 {
		t.Fatalf("acquired %d more past the in-flight bound", len(got))
	}
	if code := m.acknowledge(ack{0, 2499, 2}); code != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(code))
	}
	got := acquired(t, m.fetch(time.Second, 5000))
	if len(got) != 2500 || got[0] != 2 || got[2499] != 2 {
		t.Fatalf("after releasing 2500: acquired %d (count at 0: %d)", len(got), got[0])
	}
}
