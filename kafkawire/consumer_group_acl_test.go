package kafkawire_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/kafkawire"
)

// TestConsumerGroupACLs: ConsumerGroupHeartbeat needs READ on the group
// and DESCRIBE on topics subscribed by name; a regex resolves only to
// topics the principal may describe; ConsumerGroupDescribe needs
// DESCRIBE on the group.
func TestConsumerGroupACLs(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, acls: true, super: []string{"User:admin"}})
	for _, u := range []string{"admin", "alice"} {
		b.addUser(u, "pw-"+u+"-1234")
	}
	as := func(u string) *kgo.Client {
		return b.client(b.plainAddr, scram256(u, "pw-"+u+"-1234"), kgo.RequestRetries(1))
	}
	ctx := ctxT(t, 30*time.Second)
	admin := kadm.NewClient(as("admin"))
	if _, err := admin.CreateTopics(ctx, 2, 1, nil, "pub-open", "pub-secret"); err != nil {
		t.Fatal(err)
	}
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Groups("acl-g").Allow("User:alice").Operations(kadm.OpRead))
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Topics("pub-open").Allow("User:alice").Operations(kadm.OpDescribe, kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	alice := as("alice")
	beat := func(grp string, names []string, regex *string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.RebalanceTimeoutMillis = grp, "alice-1", 10000
		req.SubscribedTopicNames, req.SubscribedTopicRegex = names, regex
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(context.Background(), alice)
		if ke, ok := errors.AsType[*kerr.Error](err); ok {
			// Refused on the way: FindCoordinator needs DESCRIBE on
			// the group too.
			resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = ke.Code
		} else if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := beat("other-g", []string{"pub-open"}, nil); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat to a group without READ: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := beat("acl-g", []string{"pub-secret"}, nil); r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("subscribing by name to a topic without DESCRIBE: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	re := "pub-.*"
	r := beat("acl-g", nil, &re)
	if r.ErrorCode != 0 || r.Assignment == nil {
		t.Fatalf("regex join: %v %+v", kerr.ErrorForCode(r.ErrorCode), r)
	}
	open, _ := admin.ListTopics(ctx, "pub-open")
	for _, at := range r.Assignment.Topics {
		if at.TopicID != open["pub-open"].ID {
			t.Fatalf("regex resolved to a topic alice may not describe: %x", at.TopicID)
		}
	}
	if len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("regex assignment %+v, want pub-open's 2 partitions", r.Assignment)
	}
	// READ on the group implies DESCRIBE, as in Kafka; another group is
	// refused.
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"other-g"}
	dr, err := d.RequestWith(ctx, alice)
	if !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || dr.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("describe without DESCRIBE on the group: %+v %v", dr, err)
	}
	d.Groups = []string{"acl-g"}
	if dr, err := d.RequestWith(ctx, alice); err != nil || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 1 {
		t.Fatalf("describe with READ on the group: %+v %v", dr, err)
	}
	dr, err = d.RequestWith(ctx, as("admin"))
	if err != nil || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 1 {
		t.Fatalf("describe as admin: %+v %v", dr, err)
	}
}
