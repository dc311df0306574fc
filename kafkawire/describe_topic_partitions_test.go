package kafkawire_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire"
)

// dtpReq is a DescribeTopicPartitions request for topics (none: all).
func dtpReq(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsRequest {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, name := range topics {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
	}
	return req
}

func dtp(t *testing.T, cl *kgo.Client, req *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("DescribeTopicPartitions: %v", err)
	}
	return resp
}

// dtpPage is what one answer held: "topic/partition" for each partition,
// "topic:ERROR_NAME" for each topic error, and the next cursor.
type dtpPage struct {
	items  []string
	cursor *kmsg.DescribeTopicPartitionsResponseNextCursor
}

func pageOf(resp *kmsg.DescribeTopicPartitionsResponse) dtpPage {
	var p dtpPage
	for _, mt := range resp.Topics {
		if mt.ErrorCode != 0 {
			p.items = append(p.items, fmt.Sprintf("%s:%s", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode).(*kerr.Error).Message))
			continue
		}
		for _, mp := range mt.Partitions {
			p.items = append(p.items, fmt.Sprintf("%s/%d", *mt.Topic, mp.Partition))
		}
	}
	p.cursor = resp.NextCursor
	return p
}

// dtpAll follows the cursor from req to the end and returns every page.
func dtpAll(t *testing.T, cl *kgo.Client, req *kmsg.DescribeTopicPartitionsRequest) []dtpPage {
	t.Helper()
	var pages []dtpPage
	for range 1000 {
		p := pageOf(dtp(t, cl, req))
		pages = append(pages, p)
		if p.cursor == nil {
			return pages
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: p.cursor.Topic, Partition: p.cursor.Partition}
	}
	t.Fatalf("DescribeTopicPartitions: still paging after 1000 answers")
	return nil
}

func flatten(pages []dtpPage) []string {
	var out []string
	for _, p := range pages {
		out = append(out, p.items...)
	}
	return out
}

// TestDescribeTopicPartitions: KIP-966's answer (topic ids, partitions
// as Metadata gives them, errors for unknown and invalid names) and its
// paging across many topics and partitions, with the client's limit
// bounded by korvet's.
func TestDescribeTopicPartitions(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: false})
	cl := b.client()
	adm := kadm.NewClient(cl)
	ctx := ctxT(t, 60*time.Second)
	// 12 topics of 1 to 7 partitions (43 in all), created out of order.
	var want []string
	counts := map[string]int{}
	for i := range 12 {
		name := fmt.Sprintf("t%02d", (i*5)%12)
		counts[name] = 1 + (i*5)%12%7
		if _, err := adm.CreateTopic(ctx, int32(counts[name]), 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	// korvet's internal topic for group offsets comes first.
	want = append(want, "__consumer_offsets/0")
	for i := range 12 {
		name := fmt.Sprintf("t%02d", i)
		for p := range counts[name] {
			want = append(want, fmt.Sprintf("%s/%d", name, p))
		}
	}
	details, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("answer", func(t *testing.T) {
		resp := dtp(t, cl, dtpReq(2000, nil, "t03", "nope", "t01", "bad name!", "__consumer_offsets", "t03"))
		got := pageOf(resp)
		wantItems := []string{"__consumer_offsets/0", "bad name!:INVALID_TOPIC_EXCEPTION", "nope:UNKNOWN_TOPIC_OR_PARTITION"}
		wantItems = append(wantItems, want[slices.Index(want, "t01/0"):slices.Index(want, "t02/0")]...)
		wantItems = append(wantItems, want[slices.Index(want, "t03/0"):slices.Index(want, "t04/0")]...)
		if !slices.Equal(got.items, wantItems) || got.cursor != nil {
			t.Fatalf("answer %v cursor %+v, want %v and no cursor", got.items, got.cursor, wantItems)
		}
		for _, mt := range resp.Topics {
			if mt.ErrorCode != 0 {
				if mt.TopicID != [16]byte{} || len(mt.Partitions) != 0 {
					t.Errorf("%s: error answer with id %x, %d partitions", *mt.Topic, mt.TopicID, len(mt.Partitions))
				}
				continue
			}
			if mt.TopicID != details[*mt.Topic].ID || mt.IsInternal != (*mt.Topic == "__consumer_offsets") || mt.AuthorizedOperations != 0b1101_1111_1000 {
				t.Errorf("%s: id %x (Metadata: %x), internal %v, operations %b", *mt.Topic, mt.TopicID, details[*mt.Topic].ID, mt.IsInternal, mt.AuthorizedOperations)
			}
			for _, mp := range mt.Partitions {
				// A single broker claimed every partition once: epoch 1.
				if mp.ErrorCode != 0 || mp.LeaderID != 0 || mp.LeaderEpoch != 1 || !slices.Equal(mp.Replicas, []int32{0}) || !slices.Equal(mp.ISR, []int32{0}) ||
					mp.EligibleLeaderReplicas == nil || len(mp.EligibleLeaderReplicas) != 0 || mp.LastKnownELR == nil || len(mp.OfflineReplicas) != 0 {
					t.Errorf("%s/%d: %+v", *mt.Topic, mp.Partition, mp)
				}
			}
		}
	})

	t.Run("pages of all topics", func(t *testing.T) {
		for _, limit := range []int32{1, 3, 7, 44, 2000} {
			pages := dtpAll(t, cl, dtpReq(limit, nil))
			if got := flatten(pages); !slices.Equal(got, want) {
				t.Fatalf("limit %d: paged %v, want %v", limit, got, want)
			}
			for i, p := range pages {
				if len(p.items) > int(limit) || i < len(pages)-1 && len(p.items) != int(limit) {
					t.Errorf("limit %d: page %d holds %d partitions", limit, i, len(p.items))
				}
			}
			if wantPages := (len(want) + int(limit) - 1) / int(limit); len(pages) != wantPages {
				t.Errorf("limit %d: %d pages, want %d", limit, len(pages), wantPages)
			}
		}
	})

	t.Run("pages of named topics", func(t *testing.T) {
		// t00 has 1 partition, t05 6, t07 1: a page of 7 ends exactly
		// after t05, and the cursor goes on at the next topic.
		pages := dtpAll(t, cl, dtpReq(7, nil, "t07", "t05", "gone", "t00", "zz-gone"))
		wantPages := [][]string{
			{"gone:UNKNOWN_TOPIC_OR_PARTITION", "t00/0", "t05/0", "t05/1", "t05/2", "t05/3", "t05/4", "t05/5"},
			{"t07/0", "zz-gone:UNKNOWN_TOPIC_OR_PARTITION"},
		}
		if len(pages) != 2 || !slices.Equal(pages[0].items, wantPages[0]) || !slices.Equal(pages[1].items, wantPages[1]) ||
			pages[0].cursor.Topic != "t07" || pages[0].cursor.Partition != 0 {
			t.Fatalf("pages %+v, want %v", pages, wantPages)
		}
		// A cursor in the middle of a topic; topics before it are not
		// answered.
		got := pageOf(dtp(t, cl, dtpReq(2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "t05", Partition: 4}, "t00", "t05", "t07")))
		if !slices.Equal(got.items, []string{"t05/4", "t05/5"}) || got.cursor == nil || got.cursor.Topic != "t07" || got.cursor.Partition != 0 {
			t.Fatalf("from t05/4: %v cursor %+v", got.items, got.cursor)
		}
		// A cursor past the last partition answers the topic without
		// partitions and goes on.
		got = pageOf(dtp(t, cl, dtpReq(5, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "t05", Partition: 99}, "t05", "t07")))
		if !slices.Equal(got.items, []string{"t07/0"}) || got.cursor != nil {
			t.Fatalf("from t05/99: %v cursor %+v", got.items, got.cursor)
		}
	})

	t.Run("invalid requests", func(t *testing.T) {
		for name, req := range map[string]*kmsg.DescribeTopicPartitionsRequest{
			"limit 0":                     dtpReq(0, nil, "t01", "t02"),
			"negative limit":              dtpReq(-5, nil, "t01", "t02"),
			"cursor not among the topics": dtpReq(10, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "t03"}, "t01", "t02"),
			"negative cursor partition":   dtpReq(10, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "t01", Partition: -1}, "t01", "t02"),
		} {
			got := pageOf(dtp(t, cl, req))
			if !slices.Equal(got.items, []string{"t01:INVALID_REQUEST", "t02:INVALID_REQUEST"}) || got.cursor != nil {
				t.Errorf("%s: %v cursor %+v", name, got.items, got.cursor)
			}
		}
		if got := pageOf(dtp(t, cl, dtpReq(0, nil))); len(got.items) != 0 || got.cursor != nil {
			t.Errorf("all topics, limit 0: %v cursor %+v", got.items, got.cursor)
		}
	})

	t.Run("korvet bounds the limit", func(t *testing.T) {
		// 3 × 700 partitions: a client asking for 2^31-1 gets 2000.
		for _, name := range []string{"big-a", "big-b", "big-c"} {
			if _, err := adm.CreateTopic(ctx, 700, 1, nil, name); err != nil {
				t.Fatal(err)
			}
		}
		got := pageOf(dtp(t, cl, dtpReq(1<<31-1, nil, "big-a", "big-b", "big-c")))
		if len(got.items) != kafkawire.MaxDescribePartitions || got.items[len(got.items)-1] != "big-c/599" ||
			got.cursor == nil || got.cursor.Topic != "big-c" || got.cursor.Partition != 600 {
			t.Fatalf("%d partitions, last %q, cursor %+v; want 2000, big-c/599, big-c/600", len(got.items), got.items[len(got.items)-1], got.cursor)
		}
	})
}

// TestDescribeTopicPartitionsACL: authorization as Metadata's: DESCRIBE
// on each topic; a named topic without it is answered
// TOPIC_AUTHORIZATION_FAILED (no id), and a listing of all topics leaves
// it out, also from pages and cursors.
func TestDescribeTopicPartitionsACL(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, acls: true, super: []string{"User:admin"}})
	for _, u := range []string{"admin", "alice", "bob"} {
		b.addUser(u, "pw-"+u+"-1234")
	}
	as := func(u string) *kgo.Client {
		return b.client(b.plainAddr, scram256(u, "pw-"+u+"-1234"), kgo.RequestRetries(1))
	}
	ctx := ctxT(t, 60*time.Second)
	admin := kadm.NewClient(as("admin"))
	for name, n := range map[string]int32{"vis-a": 2, "hid-b": 3, "vis-c": 3, "hid-d": 1, "vis-e": 1} {
		if _, err := admin.CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Topics("vis-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").Operations(kadm.OpDescribe))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	alice, bob := as("alice"), as("bob")

	// All topics, two partitions a page: only vis-*, never a hid-* in a
	// page or a cursor.
	pages := dtpAll(t, alice, dtpReq(2, nil))
	if got, want := flatten(pages), []string{"vis-a/0", "vis-a/1", "vis-c/0", "vis-c/1", "vis-c/2", "vis-e/0"}; !slices.Equal(got, want) {
		t.Fatalf("alice, all topics: %v, want %v", got, want)
	}
	for _, p := range pages {
		if len(p.items) != 2 || p.cursor != nil && p.cursor.Topic[:4] != "vis-" {
			t.Errorf("alice page %+v", p)
		}
	}
	// Named: refused ones after the others, with no id.
	resp := dtp(t, alice, dtpReq(100, nil, "hid-b", "vis-c", "vis-gone", "nope", "vis-a"))
	want := []string{"vis-a/0", "vis-a/1", "vis-c/0", "vis-c/1", "vis-c/2", "vis-gone:UNKNOWN_TOPIC_OR_PARTITION",
		"hid-b:TOPIC_AUTHORIZATION_FAILED", "nope:TOPIC_AUTHORIZATION_FAILED"}
	if got := pageOf(resp); !slices.Equal(got.items, want) || got.cursor != nil {
		t.Fatalf("alice, named: %v cursor %+v, want %v", got.items, got.cursor, want)
	}
	for _, mt := range resp.Topics {
		switch {
		case mt.ErrorCode == kerr.TopicAuthorizationFailed.Code && mt.TopicID != [16]byte{}:
			t.Errorf("%s refused with its topic id", *mt.Topic)
		case mt.ErrorCode == 0 && mt.AuthorizedOperations != 1<<8:
			t.Errorf("%s: operations %b, want DESCRIBE only", *mt.Topic, mt.AuthorizedOperations)
		}
	}
	// Metadata reports the same operations when asked, and none when not.
	for _, c := range []struct {
		cl   *kgo.Client
		ask  bool
		want int32
	}{{alice, true, 1 << 8}, {as("admin"), true, 0b1101_1111_1000}, {alice, false, math.MinInt32}} {
		req := kmsg.NewPtrMetadataRequest()
		req.IncludeTopicAuthorizedOperations = c.ask
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("vis-a")
		req.Topics = append(req.Topics, rt)
		mr, err := req.RequestWith(ctx, c.cl)
		if err != nil || len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 || mr.Topics[0].AuthorizedOperations != c.want {
			t.Errorf("Metadata vis-a (asked %v): %v %+v, want operations %b", c.ask, err, mr, c.want)
		}
	}
	// A cursor on a refused topic: the topics after it start at
	// partition 0; the refused one is answered while the cursor has not
	// passed it.
	pages = dtpAll(t, alice, dtpReq(2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "hid-b", Partition: 2}, "hid-b", "vis-c", "vis-a"))
	if len(pages) != 3 ||
		!slices.Equal(pages[0].items, []string{"vis-a/0", "vis-a/1", "hid-b:TOPIC_AUTHORIZATION_FAILED"}) ||
		!slices.Equal(pages[1].items, []string{"vis-c/0", "vis-c/1"}) || !slices.Equal(pages[2].items, []string{"vis-c/2"}) {
		t.Fatalf("alice from hid-b/2: %+v", pages)
	}
	// Only refused topics: no fallback to all topics.
	if got := pageOf(dtp(t, alice, dtpReq(100, nil, "hid-b", "hid-d"))); !slices.Equal(got.items, []string{"hid-b:TOPIC_AUTHORIZATION_FAILED", "hid-d:TOPIC_AUTHORIZATION_FAILED"}) {
		t.Fatalf("alice, refused topics only: %v", got.items)
	}
	// bob may describe nothing.
	if got := pageOf(dtp(t, bob, dtpReq(100, nil))); len(got.items) != 0 || got.cursor != nil {
		t.Errorf("bob, all topics: %v cursor %+v", got.items, got.cursor)
	}
	if got := pageOf(dtp(t, bob, dtpReq(100, nil, "vis-a"))); !slices.Equal(got.items, []string{"vis-a:TOPIC_AUTHORIZATION_FAILED"}) {
		t.Errorf("bob, vis-a: %v", got.items)
	}
	// The super user sees everything (korvet's internal topic too).
	if got := flatten(dtpAll(t, as("admin"), dtpReq(4, nil))); len(got) != 11 {
		t.Errorf("admin, all topics: %v", got)
	}
}
