package kafkawire_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// A share group moves from segment stream to segment stream as each is
// read and acknowledged (its cursor in the share-partition hash moves on,
// the consumer groups behind it are left with nothing pending);
// DeleteRecords moves its start; a deleted and recreated topic starts it
// over.
func TestShareAcrossSegments(t *testing.T) {
	b := startShareBroker(t, time.Minute)
	cfg := map[string]*string{"segment.bytes": kmsg.StringPtr("600")}
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 1, 1, cfg, "segs"); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		produceN(t, b, "segs", i, 1) // one append each, so segments seal often
	}
	p := b.eng.Topic("segs").Partition(0)
	nsegs := len(p.Segments())
	if nsegs < 3 {
		t.Fatalf("only %d segments", nsegs)
	}
	setGroupConfig(t, b, "g", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, b, "g", "m1", "segs")
	m.heartbeat()
	seen := map[int64]bool{}
	var pending []ack
	for len(seen) < 30 {
		resp := m.fetch(time.Second, 7, pending...)
		if code := ackCode(t, resp); len(pending) > 0 && code != 0 {
			t.Fatalf("accept: %v", kerr.ErrorForCode(code))
		}
		pending = nil
		got := acquired(t, resp)
		if len(got) == 0 {
			t.Fatalf("stalled after %d records", len(seen))
		}
		first, last := int64(1<<62), int64(-1)
		for o, n := range got {
			if seen[o] || n != 1 {
				t.Fatalf("offset %d delivered again (count %d)", o, n)
			}
			seen[o] = true
			first, last = min(first, o), max(last, o)
		}
		if last-first+1 != int64(len(got)) {
			t.Fatalf("acquired %v: not one contiguous run", got)
		}
		pending = []ack{{first, last, 1}}
	}
	if code := ackCode(t, m.fetch(0, 1, pending...)); code != 0 {
		t.Fatalf("last accept: %v", kerr.ErrorForCode(code))
	}
	m.fetch(0, 1) // moves the cursor past what is now done
	ctx := context.Background()
	state := b.eng.Keyspace() + ":share:g:segs:0"
	r, err := b.rc.Do(ctx, "HGET", state, "seg")
	if err != nil {
		t.Fatal(err)
	}
	segs := p.Segments()
	if cur, _ := strconv.ParseInt(string(r.Bytes()), 10, 64); cur != segs[len(segs)-1].ID {
		t.Fatalf("cursor at segment %d, want the open segment %d", cur, segs[len(segs)-1].ID)
	}
	for _, sg := range segs {
		sum, err := b.rc.Do(ctx, "XPENDING", b.eng.Keyspace()+":storage:local:segs:0:"+strconv.FormatInt(sg.ID, 10), "share:g")
		if err != nil || sum.Err() != nil {
			t.Fatalf("segment %d: %v %v", sg.ID, err, sum.Err())
		}
		var f []resp.Reply
		if n, _ := sum.Elems(f)[0].Int(); n != 0 {
			t.Fatalf("segment %d: %d pending", sg.ID, n)
		}
	}
	if st, _ := b.eng.ShareState(ctx, "g", p); st.StartOffset != 30 || st.InFlight != 0 || st.Accepted != 30 {
		t.Fatalf("share state %+v", st)
	}

	// DeleteRecords past where a second group stands moves it on.
	setGroupConfig(t, b, "late", "share.auto.offset.reset", "earliest")
	l := newShareMember(t, b, "late", "m2", "segs")
	l.heartbeat()
	if got := acquired(t, l.fetch(time.Second, 2)); len(got) != 2 || got[0] != 1 {
		t.Fatalf("late group acquired %v", got)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "segs", Partition: 0, At: 20})
	if dr, err := b.admin().DeleteRecords(ctxT(t, 10*time.Second), os); err != nil || dr.Error() != nil {
		t.Fatal(err, dr.Error())
	}
	testbed.WaitFor(t, 10*time.Second, "log start 20", func() bool { return p.LogStart() == 20 })
	got := acquired(t, l.fetch(time.Second, 50))
	for o := range got {
		if o < 20 {
			t.Fatalf("record %d below the log start delivered: %v", o, got)
		}
	}
	if len(got) != 10 {
		t.Fatalf("after DeleteRecords acquired %v, want 20-29", got)
	}
	if st, _ := b.eng.ShareState(ctx, "late", p); st.StartOffset < 20 {
		t.Fatalf("start offset %d below the log start", st.StartOffset)
	}

	// Delete and recreate the topic: the group starts over on it.
	if _, err := b.admin().DeleteTopics(ctxT(t, 10*time.Second), "segs"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 1, 1, nil, "segs"); err != nil {
		t.Fatal(err)
	}
	produceN(t, b, "segs", 0, 3)
	m2 := newShareMember(t, b, "g", "m3", "segs")
	m2.heartbeat()
	if got := acquired(t, m2.fetch(time.Second, 0)); len(got) != 3 || got[0] != 1 {
		t.Fatalf("after recreating the topic acquired %v, want 0-2", got)
	}
}
