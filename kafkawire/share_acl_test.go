package kafkawire_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// Share group APIs under ACLs: READ on the group for membership and
// fetching, READ on each topic fetched, DESCRIBE on the group to describe
// it, DELETE to delete its offsets.
func TestShareGroupACLs(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{"SCRAM-SHA-256"}, acls: true, super: []string{"User:admin"}})
	b.addUser("admin", "admin-password")
	b.addUser("alice", "alice-password")
	admin := b.client(b.plainAddr, scram256("admin", "admin-password"))
	ctx := ctxT(t, 30*time.Second)
	for _, topic := range []string{"q", "secret"} {
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	allow := func(rt auth.ResourceType, name string, op auth.Operation) {
		if err := b.store.CreateACLs(context.Background(), []auth.ACL{{Principal: "User:alice", Host: "*", ResourceType: rt, Pattern: auth.PatternLiteral,
			Resource: name, Operation: op, Permission: auth.PermAllow}}); err != nil {
			t.Fatal(err)
		}
	}
	allow(auth.ResTopic, "q", auth.OpRead)
	alice := b.client(b.plainAddr, scram256("alice", "alice-password"))
	hb := func() int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.SubscribedTopicNames = "g", "alice-1", []string{"q"}
		resp, err := req.RequestWith(ctx, alice)
		if errors.Is(err, kerr.GroupAuthorizationFailed) {
			return kerr.GroupAuthorizationFailed.Code // refused at FindCoordinator already
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := hb(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without READ on the group: %v", kerr.ErrorForCode(code))
	}
	fetch := func() *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID, req.MaxRecords, req.MaxWaitMillis = kmsg.StringPtr("g"), kmsg.StringPtr("alice-1"), 10, 500
		for _, name := range []string{"q", "secret"} {
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = b.topicID(t, admin, name)
			rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := fetch(); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("share fetch without READ on the group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	allow(auth.ResGroup, "g", auth.OpRead)
	if code := hb(); code != 0 {
		t.Fatalf("heartbeat with READ: %v", kerr.ErrorForCode(code))
	}
	r := fetch()
	codes := map[[16]byte]int16{}
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			codes[tp.TopicID] = p.ErrorCode
		}
	}
	if codes[b.topicID(t, admin, "q")] != 0 || codes[b.topicID(t, admin, "secret")] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("share fetch codes by topic: %v", codes)
	}
	// READ on a group implies DESCRIBE (as in Kafka): another group.
	desc := kmsg.NewPtrShareGroupDescribeRequest()
	desc.GroupIDs = []string{"other"}
	dresp, err := desc.RequestWith(ctx, alice)
	if !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || dresp.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("describe without DESCRIBE on the group: %v %+v", err, dresp)
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "g"
	del.Topics = append(del.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: "q"})
	delResp, err := del.RequestWith(ctx, alice)
	if !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || delResp.ErrorCode != kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("delete offsets without DELETE on the group: %v %+v", err, delResp)
	}
	// Alice (READ implies DESCRIBE) and admin see g.
	desc.GroupIDs = []string{"g"}
	if dresp, err := desc.RequestWith(ctx, alice); err != nil || dresp.Groups[0].ErrorCode != 0 {
		t.Fatalf("alice describe: %v %+v", err, dresp)
	}
	dresp, err = desc.RequestWith(ctx, admin)
	if err != nil || dresp.Groups[0].ErrorCode != 0 || len(dresp.Groups[0].Members) != 1 {
		t.Fatalf("admin describe: %v %+v", err, dresp)
	}
}

// topicID looks a topic's id up with Metadata.
func (b *secureBroker) topicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	return resp.Topics[0].TopicID
}
