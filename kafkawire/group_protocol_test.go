package kafkawire_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/internal/testbed"
)

// rawGroupConn sends hand-built requests on one connection. A parked
// JoinGroup or SyncGroup holds back later answers on its connection (they
// go out in request order), so each simulated member has its own.
type rawGroupConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
	sent []kmsg.Request
}

func newRawGroupConn(t *testing.T, b *broker) *rawGroupConn {
	c := rawConn(t, b.addr)
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawGroupConn{t: t, c: c}
}

func (r *rawGroupConn) send(req kmsg.Request) {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(request(r.corr, req)); err != nil {
		r.t.Fatal(err)
	}
	r.sent = append(r.sent, req)
}

func (r *rawGroupConn) recv() kmsg.Response {
	r.t.Helper()
	req := r.sent[0]
	r.sent = r.sent[1:]
	return readResponse(r.t, r.c, req)
}

func (r *rawGroupConn) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.send(req)
	return r.recv()
}

func joinReq(version int16, grp, member, instance string, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID = grp, member
	if instance != "" {
		req.InstanceID = &instance
	}
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 5000
	req.ProtocolType = "consumer"
	for _, p := range protocols {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name, jp.Metadata = p, []byte("md-"+p+"-"+member)
		req.Protocols = append(req.Protocols, jp)
	}
	return req
}

// join runs the KIP-394 dance (v4+): the first join answers
// MEMBER_ID_REQUIRED with the id to use.
func (r *rawGroupConn) memberID(grp string) string {
	r.t.Helper()
	resp := r.do(joinReq(9, grp, "", "", "range")).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		r.t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", resp.ErrorCode, resp.MemberID)
	}
	return resp.MemberID
}

func syncReq(grp, member string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = grp, member, gen
	pt, p := "consumer", "range"
	req.ProtocolType, req.Protocol = &pt, &p
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return req
}

func heartbeat(r *rawGroupConn, grp, member, instance string, gen int32) int16 {
	r.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = grp, member, gen
	if instance != "" {
		req.InstanceID = &instance
	}
	return r.do(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func commit(r *rawGroupConn, version int16, grp, member string, gen int32, topic string, offset int64, meta string) int16 {
	r.t.Helper()
	return commitStatic(r, version, grp, member, "", gen, topic, offset, meta)
}

func commitStatic(r *rawGroupConn, version int16, grp, member, instance string, gen int32, topic string, offset int64, meta string) int16 {
	r.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = grp, member, gen
	if instance != "" {
		req.InstanceID = &instance
	}
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.Metadata, rp.LeaderEpoch = 0, offset, &meta, 3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func expectCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestGroupProtocol drives the classic protocol by hand and checks the
// answers and error codes Kafka gives.
func TestGroupProtocol(t *testing.T) {
	opts := engine.Options{AutoCreateTopics: true, GroupInitialRebalanceDelay: 20 * time.Millisecond, GroupMinSessionTimeout: 200 * time.Millisecond}
	b := startBroker(t, opts)
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 2, 1, nil, "raw"); err != nil {
		t.Fatal(err)
	}
	const g = "raw-g"
	a := newRawGroupConn(t, b)

	// FindCoordinator: groups and transactions here, single and batched.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, g
	fr := a.do(fc).(*kmsg.FindCoordinatorResponse)
	if fr.ErrorCode != 0 || fr.Host != "127.0.0.1" || !strings.HasSuffix(b.addr, ":"+strconv.Itoa(int(fr.Port))) {
		t.Fatalf("find coordinator v3: %+v", fr)
	}
	fc.Version, fc.CoordinatorKeys = 4, []string{g, "other"}
	fr = a.do(fc).(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) != 2 || fr.Coordinators[1].Key != "other" || fr.Coordinators[1].ErrorCode != 0 || fr.Coordinators[1].Host != "127.0.0.1" {
		t.Fatalf("find coordinator v4: %+v", fr.Coordinators)
	}
	fc.CoordinatorType = 1 // transactional ids: found the same way
	fr = a.do(fc).(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) != 2 || fr.Coordinators[0].ErrorCode != 0 || fr.Coordinators[0].Host != "127.0.0.1" {
		t.Fatalf("find transaction coordinator: %+v", fr.Coordinators)
	}
	fc.CoordinatorType = 2
	fr = a.do(fc).(*kmsg.FindCoordinatorResponse)
	expectCode(t, "share coordinator", fr.Coordinators[0].ErrorCode, kerr.InvalidRequest)

	// Join (KIP-394), then the checks of a join.
	idA := a.memberID(g)
	jr := a.do(joinReq(9, g, idA, "", "range", "roundrobin")).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != idA || jr.MemberID != idA || len(jr.Members) != 1 || *jr.Protocol != "range" || *jr.ProtocolType != "consumer" {
		t.Fatalf("join: %+v", jr)
	}
	bad := joinReq(9, g, "", "", "sticky")
	expectCode(t, "join without a common protocol", a.do(bad).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	bad = joinReq(9, g, "", "", "range")
	bad.ProtocolType = "connect"
	expectCode(t, "join with another protocol type", a.do(bad).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	bad = joinReq(9, g, "", "", "range")
	bad.SessionTimeoutMillis = 100
	expectCode(t, "join with a tiny session timeout", a.do(bad).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InvalidSessionTimeout)
	expectCode(t, "join with an unknown member id", a.do(joinReq(9, g, "nobody", "", "range")).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID)
	expectCode(t, "join without a group", a.do(joinReq(9, "", "", "", "range")).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InvalidGroupID)

	// Sync.
	expectCode(t, "sync at a wrong generation", a.do(syncReq(g, idA, 7, nil)).(*kmsg.SyncGroupResponse).ErrorCode, kerr.IllegalGeneration)
	expectCode(t, "sync by an unknown member", a.do(syncReq(g, "nobody", 1, nil)).(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID)
	sr := a.do(syncReq(g, idA, 1, map[string]string{idA: "asg-a1"})).(*kmsg.SyncGroupResponse)
	if sr.ErrorCode != 0 || string(sr.MemberAssignment) != "asg-a1" || *sr.Protocol != "range" {
		t.Fatalf("sync: %+v", sr)
	}

	// Heartbeat and commit checks.
	expectCode(t, "heartbeat", heartbeat(a, g, idA, "", 1), nil)
	expectCode(t, "heartbeat at a wrong generation", heartbeat(a, g, idA, "", 0), kerr.IllegalGeneration)
	expectCode(t, "heartbeat by an unknown member", heartbeat(a, g, "nobody", "", 1), kerr.UnknownMemberID)
	expectCode(t, "commit", commit(a, 9, g, idA, 1, "raw", 5, "m5"), nil)
	expectCode(t, "commit at a wrong generation", commit(a, 9, g, idA, 4, "raw", 6, ""), kerr.IllegalGeneration)
	expectCode(t, "commit by an unknown member", commit(a, 9, g, "nobody", 1, "raw", 6, ""), kerr.UnknownMemberID)
	expectCode(t, "commit from outside a group with members", commit(a, 9, g, "", -1, "raw", 6, ""), kerr.UnknownMemberID)
	expectCode(t, "commit from outside, v0", commit(a, 0, g, "", -1, "raw", 6, ""), kerr.UnknownMemberID)
	expectCode(t, "commit with huge metadata", commit(a, 9, g, idA, 1, "raw", 6, strings.Repeat("x", 5000)), kerr.OffsetMetadataTooLarge)
	expectCode(t, "commit to a missing topic", commit(a, 9, g, idA, 1, "nope", 6, ""), kerr.UnknownTopicOrPartition)

	// Fetch: batched (v8) with an unknown group, and an old version.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	for _, grp := range []string{g, "unknown-g"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = grp
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "raw", []int32{0, 1}
		rg.Topics = append(rg.Topics, rt)
		of.Groups = append(of.Groups, rg)
	}
	ofr := a.do(of).(*kmsg.OffsetFetchResponse)
	if len(ofr.Groups) != 2 {
		t.Fatalf("offset fetch v8: %+v", ofr)
	}
	p0, p1 := ofr.Groups[0].Topics[0].Partitions[0], ofr.Groups[0].Topics[0].Partitions[1]
	if p0.Offset != 5 || *p0.Metadata != "m5" || p0.LeaderEpoch != 3 || p1.Offset != -1 || ofr.Groups[1].Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("offset fetch v8: %+v", ofr.Groups)
	}
	of = kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 1, g
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "raw", []int32{0}
	of.Topics = append(of.Topics, rt)
	if p := a.do(of).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]; p.Offset != 5 || *p.Metadata != "m5" {
		t.Fatalf("offset fetch v1: %+v", p)
	}
	of.Version, of.Topics = 7, nil // all committed offsets
	if ofr := a.do(of).(*kmsg.OffsetFetchResponse); len(ofr.Topics) != 1 || len(ofr.Topics[0].Partitions) != 1 || ofr.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("offset fetch of everything: %+v", ofr)
	}

	// A second member (JoinGroup v3: no member id dance) parks until A
	// rejoins; A learns of the rebalance from its heartbeat.
	bc := newRawGroupConn(t, b)
	bc.send(joinReq(3, g, "", "", "range"))
	testbed.WaitFor(t, 5*time.Second, "the rebalance", func() bool {
		return heartbeat(a, g, idA, "", 1) == kerr.RebalanceInProgress.Code
	})
	expectCode(t, "commit during PreparingRebalance", commit(a, 9, g, idA, 1, "raw", 7, ""), nil)
	expectCode(t, "sync during PreparingRebalance", a.do(syncReq(g, idA, 1, nil)).(*kmsg.SyncGroupResponse).ErrorCode, kerr.RebalanceInProgress)
	jr = a.do(joinReq(9, g, idA, "", "range", "roundrobin")).(*kmsg.JoinGroupResponse)
	jb := bc.recv().(*kmsg.JoinGroupResponse)
	idB := jb.MemberID
	if jr.ErrorCode != 0 || jb.ErrorCode != 0 || jr.Generation != 2 || jb.Generation != 2 || jr.LeaderID != idA || jb.LeaderID != idA || len(jr.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("rebalance: leader %+v follower %+v", jr, jb)
	}
	for _, m := range jr.Members {
		if want := "md-range-" + map[string]string{idA: idA, idB: ""}[m.MemberID]; string(m.ProtocolMetadata) != want {
			t.Fatalf("member %s metadata %q, want %q", m.MemberID, m.ProtocolMetadata, want)
		}
	}
	expectCode(t, "commit before sync", commit(bc, 9, g, idB, 2, "raw", 7, ""), kerr.RebalanceInProgress)
	expectCode(t, "heartbeat before sync", heartbeat(bc, g, idB, "", 2), nil)
	bc.send(syncReq(g, idB, 2, nil))
	sr = a.do(syncReq(g, idA, 2, map[string]string{idA: "asg-a2", idB: "asg-b2"})).(*kmsg.SyncGroupResponse)
	sb := bc.recv().(*kmsg.SyncGroupResponse)
	if sr.ErrorCode != 0 || sb.ErrorCode != 0 || string(sr.MemberAssignment) != "asg-a2" || string(sb.MemberAssignment) != "asg-b2" {
		t.Fatalf("sync: leader %+v follower %+v", sr, sb)
	}

	// Admin views of the live group.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{g, "unknown-g"}
	dgr := a.do(dg).(*kmsg.DescribeGroupsResponse)
	if len(dgr.Groups) != 2 || dgr.Groups[0].State != "Stable" || dgr.Groups[0].Protocol != "range" || len(dgr.Groups[0].Members) != 2 || dgr.Groups[1].State != "Dead" || dgr.Groups[1].ErrorCode != 0 {
		t.Fatalf("describe: %+v", dgr.Groups)
	}
	for _, m := range dgr.Groups[0].Members {
		if m.MemberID == idB && (string(m.MemberAssignment) != "asg-b2" || m.ClientHost != "/127.0.0.1") {
			t.Fatalf("describe member: %+v", m)
		}
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version, lg.StatesFilter = 4, []string{"Stable"}
	if lgr := a.do(lg).(*kmsg.ListGroupsResponse); len(lgr.Groups) != 1 || lgr.Groups[0].Group != g || lgr.Groups[0].GroupState != "Stable" {
		t.Fatalf("list stable groups: %+v", lgr.Groups)
	}
	lg.Version, lg.StatesFilter, lg.TypesFilter = 5, nil, []string{"consumer"}
	if lgr := a.do(lg).(*kmsg.ListGroupsResponse); len(lgr.Groups) != 0 {
		t.Fatalf("list groups of type consumer (KIP-848): %+v", lgr.Groups)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{g}
	expectCode(t, "delete a live group", a.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.NonEmptyGroup)

	// Batched leave: A goes, an unknown member does not exist; B is left
	// alone and rejoins.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, g
	for _, id := range []string{idA, "nobody"} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		lv.Members = append(lv.Members, m)
	}
	lvr := a.do(lv).(*kmsg.LeaveGroupResponse)
	if lvr.ErrorCode != 0 || len(lvr.Members) != 2 || lvr.Members[0].ErrorCode != 0 || lvr.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", lvr)
	}
	expectCode(t, "heartbeat after the leader left", heartbeat(bc, g, idB, "", 2), kerr.RebalanceInProgress)
	jb = bc.do(joinReq(9, g, idB, "", "range")).(*kmsg.JoinGroupResponse)
	if jb.ErrorCode != 0 || jb.Generation != 3 || jb.LeaderID != idB {
		t.Fatalf("rejoin alone: %+v", jb)
	}
	lv = kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group, lv.MemberID = 1, g, idB
	expectCode(t, "leave v1", a.do(lv).(*kmsg.LeaveGroupResponse).ErrorCode, nil)
	expectCode(t, "leave v1 again", a.do(lv).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.UnknownMemberID)
	expectCode(t, "heartbeat after leaving", heartbeat(bc, g, idB, "", 3), kerr.UnknownMemberID)
	expectCode(t, "commit from outside an empty group", commit(a, 2, g, "", -1, "raw", 9, "simple"), nil)
	expectCode(t, "delete the empty group", a.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil)
	expectCode(t, "delete it again", a.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.GroupIDNotFound)
}

// TestGroupStaticProtocol: a static member coming back (no member id,
// same instance id) takes its place and assignment without a rebalance;
// the old member id is fenced.
func TestGroupStaticProtocol(t *testing.T) {
	b := startBroker(t, engine.Options{GroupInitialRebalanceDelay: 20 * time.Millisecond})
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 1, 1, nil, "st"); err != nil {
		t.Fatal(err)
	}
	const g = "static-raw"
	for _, version := range []int16{8, 9} {
		a := newRawGroupConn(t, b)
		// Static members skip MEMBER_ID_REQUIRED.
		jr := a.do(joinReq(version, g, "", "i1", "range")).(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != 0 || !strings.HasPrefix(jr.MemberID, "i1-") {
			t.Fatalf("v%d static join: %+v", version, jr)
		}
		old, gen := jr.MemberID, jr.Generation
		if sr := a.do(syncReq(g, old, gen, map[string]string{old: "asg-i1"})).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
			t.Fatalf("sync: %+v", sr)
		}
		// The instance restarts.
		a2 := newRawGroupConn(t, b)
		jr = a2.do(joinReq(version, g, "", "i1", "range")).(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != 0 || jr.Generation != gen || jr.MemberID == old {
			t.Fatalf("v%d static rejoin: %+v", version, jr)
		}
		if version >= 9 {
			// KIP-814: the leader is told it leads but must not assign.
			if jr.LeaderID != jr.MemberID || !jr.SkipAssignment || len(jr.Members) != 1 {
				t.Fatalf("v9 static leader rejoin: %+v", jr)
			}
		} else if jr.LeaderID != old || len(jr.Members) != 0 {
			// Older clients see the old leader id, so they do not assign.
			t.Fatalf("v8 static leader rejoin: %+v", jr)
		}
		expectCode(t, "heartbeat by the fenced member", heartbeat(a, g, old, "i1", gen), kerr.FencedInstanceID)
		expectCode(t, "commit by the fenced member", commitStatic(a, 7, g, old, "i1", gen, "st", 1, ""), kerr.FencedInstanceID)
		sr := a2.do(syncReq(g, jr.MemberID, gen, nil)).(*kmsg.SyncGroupResponse)
		if sr.ErrorCode != 0 || string(sr.MemberAssignment) != "asg-i1" {
			t.Fatalf("sync after static rejoin: %+v", sr)
		}
		expectCode(t, "heartbeat by the new member", heartbeat(a2, g, jr.MemberID, "i1", gen), nil)

		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Version, lv.Group = 4, g
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID, m.InstanceID = old, kmsg.StringPtr("i1")
		lv.Members = []kmsg.LeaveGroupRequestMember{m}
		expectCode(t, "leave with a fenced member id", a.do(lv).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode, kerr.FencedInstanceID)
		lv.Members[0].MemberID = ""
		expectCode(t, "leave by instance id", a.do(lv).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode, nil)
		if d, ok := b.eng.Groups().Describe(g); !ok || d.State != group.Empty || len(d.Members) != 0 {
			// Without members the group is Empty; without commits it
			// stays so until the periodic cleanup.
			t.Fatalf("after the static member left: %+v", d)
		}
	}
}

// TestGroupTimeouts: members that stop heartbeating expire, a member
// that does not rejoin is dropped when the rebalance times out, and ids
// handed out with MEMBER_ID_REQUIRED expire unused.
func TestGroupTimeouts(t *testing.T) {
	b := startBroker(t, engine.Options{GroupInitialRebalanceDelay: 20 * time.Millisecond, GroupMinSessionTimeout: 100 * time.Millisecond})
	const g = "timeouts"
	short := func(req *kmsg.JoinGroupRequest) *kmsg.JoinGroupRequest {
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 600, 600
		return req
	}
	a := newRawGroupConn(t, b)
	jr := a.do(short(joinReq(3, g, "", "", "range"))).(*kmsg.JoinGroupResponse)
	idA := jr.MemberID
	a.do(syncReq(g, idA, jr.Generation, nil))
	coord := b.eng.Groups()

	// B joins; A keeps heartbeating but never rejoins: the rebalance drops
	// it after the rebalance timeout and B carries on alone.
	bc := newRawGroupConn(t, b)
	start := time.Now()
	bc.send(short(joinReq(3, g, "", "", "range")))
	for i := 0; i < 4; i++ {
		heartbeat(a, g, idA, "", jr.Generation)
		time.Sleep(100 * time.Millisecond) // A heartbeats on through B's join, every 100ms
	}
	jb := bc.recv().(*kmsg.JoinGroupResponse)
	if jb.ErrorCode != 0 || jb.LeaderID != jb.MemberID || jb.Generation != jr.Generation+1 {
		t.Fatalf("join after A failed to rejoin: %+v", jb)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("the rebalance ended after %v, before A's rebalance timeout", d)
	}
	expectCode(t, "heartbeat by the dropped member", heartbeat(a, g, idA, "", jr.Generation), kerr.UnknownMemberID)

	// B never syncs: dropped when the sync deadline passes.
	testbed.WaitFor(t, 5*time.Second, "B to be dropped for not syncing", func() bool {
		return emptied(coord, g)
	})

	// C syncs and then stops heartbeating: it expires after its session.
	cc := newRawGroupConn(t, b)
	jc := cc.do(short(joinReq(3, g, "", "", "range"))).(*kmsg.JoinGroupResponse)
	cc.do(syncReq(g, jc.MemberID, jc.Generation, nil))
	afterSession(t, "C expired", func() bool { return emptied(coord, g) })

	// An id handed out with MEMBER_ID_REQUIRED and never used expires; a
	// join with it afterwards is refused.
	req := short(joinReq(9, g, "", "", "range"))
	id := a.do(req).(*kmsg.JoinGroupResponse).MemberID
	// The group holds nothing but the id: the cleanup leaves it while the
	// id is pending and removes it once the id has expired.
	afterSession(t, "the pending id expired", func() bool {
		n, err := coord.Cleanup(context.Background())
		if err != nil {
			t.Fatalf("cleanup: %v", err)
		}
		return n == 1
	})
	expectCode(t, "join with an expired pending id", a.do(short(joinReq(9, g, id, "", "range"))).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID)
}

// emptied reports whether group g is Empty without members.
func emptied(coord *group.Coordinator, g string) bool {
	d, ok := coord.Describe(g)
	return ok && d.State == group.Empty && len(d.Members) == 0
}

// afterSession waits until done, which what kept it may bring about only
// once its 600ms session has ended.
func afterSession(t *testing.T, what string, done func() bool) {
	t.Helper()
	start := time.Now()
	testbed.WaitFor(t, 5*time.Second, what, done)
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("%s after %v, before its 600ms session", what, d)
	}
}
