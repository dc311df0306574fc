package kafkawire_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// A share group whose start offset is in archived segments (their
// streams gone from Redis) still gets those records, with release and
// redelivery working there too, and then moves on to the records still in
// Redis.
func TestShareAcrossColdTier(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Cold: enginetest.Cold(t, enginetest.LocalWarehouse(t)),
		TieringInterval: 100 * time.Millisecond, Share: engine.ShareOptions{LockDuration: time.Minute}})
	tieredTopic(t, b, "coldq")
	recs := testRecords("coldq", 2)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < len(recs); i += 10 {
		produceAll(t, cl, recs[i:min(i+10, len(recs))])
	}
	waitLocalSegments(t, b, "coldq", 30*time.Second)
	p0 := b.eng.Topic("coldq").Partition(0)
	hw := p0.HighWatermark()
	segs := p0.Segments()
	if segs[0].Local || segs[0].Base != 0 {
		t.Fatalf("first segment still local: %+v", segs[0])
	}

	// Raw: acquire partition 0 from offset 0, release two, take them back
	// with delivery count 2, accept everything.
	setGroupConfig(t, b, "cg", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, b, "cg", "member-a", "coldq")
	m.parts = []int32{0}
	m.heartbeat()
	got := acquired(t, m.fetch(time.Second, 5))
	if len(got) != 5 || got[0] != 1 || got[4] != 1 {
		t.Fatalf("first cold fetch acquired %v, want 0-4", got)
	}
	if code := m.acknowledge(ack{0, 1, 2}, ack{2, 4, 1}); code != 0 {
		t.Fatalf("release/accept in the cold tier: %v", kerr.ErrorForCode(code))
	}
	if code := m.acknowledge(ack{2, 2, 1}); code != kerr.InvalidRecordState.Code {
		t.Fatalf("accepting a cold record twice: %v", kerr.ErrorForCode(code))
	}
	got = acquired(t, m.fetch(time.Second, 2))
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("released cold records came back as %v, want 0-1 with delivery count 2", got)
	}
	accepted := map[int64]bool{2: true, 3: true, 4: true}
	pending := []ack{{0, 1, 1}}
	for len(accepted) < int(hw)+2 {
		resp := m.fetch(2*time.Second, 7, pending...)
		if code := ackCode(t, resp); code != 0 {
			t.Fatalf("accept: %v", kerr.ErrorForCode(code))
		}
		for _, a := range pending {
			for o := a.first; o <= a.last; o++ {
				if accepted[o] {
					t.Fatalf("offset %d accepted twice", o)
				}
				accepted[o] = true
			}
		}
		pending = nil
		got := acquired(t, resp)
		if len(got) == 0 {
			break
		}
		for o, n := range got {
			if n != 1 {
				t.Fatalf("offset %d delivered with count %d", o, n)
			}
			pending = append(pending, ack{o, o, 1})
		}
		slices.SortFunc(pending, func(a, b ack) int { return cmp.Compare(a.first, b.first) })
	}
	for o := int64(0); o < hw; o++ {
		if !accepted[o] {
			t.Fatalf("offset %d of %d never delivered", o, hw)
		}
	}
	st, err := b.eng.ShareState(ctxT(t, 5*time.Second), "cg", p0)
	if err != nil {
		t.Fatal(err)
	}
	if st.StartOffset != hw || st.InFlight != 0 || st.Accepted != hw || st.Redeliveries != 2 {
		t.Fatalf("share state after the cold tier: %+v (hw %d)", st, hw)
	}

	// A franz-go share consumer reads both partitions, byte-exact.
	setGroupConfig(t, b, "cg2", "share.auto.offset.reset", "earliest")
	sc := b.client(kgo.ShareGroup("cg2"), kgo.ConsumeTopics("coldq"))
	ctx := ctxT(t, 30*time.Second)
	var all []*kgo.Record
	for len(all) < len(recs) && ctx.Err() == nil {
		all = append(all, sc.PollFetches(ctx).Records()...)
	}
	slices.SortFunc(all, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	if len(all) != len(recs) {
		t.Fatalf("share consumer got %d of %d records", len(all), len(recs))
	}
	checkConsumed(t, recs, all)
}

// A restart keeps share state: the Redis consumer groups survive with
// their PELs, members rejoin, and records held before the restart are
// redelivered once their lock expires.
func TestShareStateSurvivesRestart(t *testing.T) {
	const lock = 2 * time.Second
	b := startShareBroker(t, lock)
	shareTopic(t, b, "rs", 1, 6)
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, b, "g", "member-a", "rs")
	m.heartbeat()
	if got := acquired(t, m.fetch(time.Second, 4)); len(got) != 4 {
		t.Fatalf("acquired %v", got)
	}
	if code := m.acknowledge(ack{0, 1, 1}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	acquiredAt := time.Now()
	b.restart()
	if !b.eng.IsShareGroup("g") {
		t.Fatal("share group forgotten across a restart")
	}
	if p := xpending(t, b, "rs", 0, "g"); len(p) != 2 || p[0].offset != 2 || p[0].owner != "member-a" {
		t.Fatalf("XPENDING after restart: %+v", p)
	}
	n := newShareMember(t, b, "g", "member-b", "rs")
	n.heartbeat()
	// The session died with korvet: the old member must start over.
	if r := m.fetchEpoch(m.sess, 0, 0); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("old session after restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	got := acquired(t, n.fetch(time.Second, 0))
	if len(got) != 2 || got[4] != 1 || got[5] != 1 {
		t.Fatalf("new member first got %v, want the never-delivered 4-5", got)
	}
	got = map[int64]int16{}
	for len(got) == 0 {
		if time.Since(acquiredAt) > 10*lock {
			t.Fatal("locked records never redelivered after the restart")
		}
		got = acquired(t, n.fetch(time.Second, 0))
	}
	if since := time.Since(acquiredAt); since < lock-100*time.Millisecond {
		t.Fatalf("redelivered %v after acquisition, before the %v lock expired", since, lock)
	}
	if len(got) != 2 || got[2] != 2 || got[3] != 2 {
		t.Fatalf("after the lock expired: %v, want 2-3 with delivery count 2", got)
	}
	st, err := b.eng.ShareState(ctxT(t, 5*time.Second), "g", b.eng.Topic("rs").Partition(0))
	if err != nil {
		t.Fatal(err)
	}
	if st.StartOffset != 2 || st.InFlight != 4 || st.Accepted != 2 {
		t.Fatalf("share state %+v", st)
	}
}
