package kafkawire_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
)

// startLocal serves a korvet with ACLs on and returns its server (for
// Local), its user store and a kadm client logged in as a super user.
func startLocal(t *testing.T) (*kafkawire.Server, *auth.Store, *kadm.Client) {
	t.Helper()
	log := testbed.Logger()
	ctx := context.Background()
	eng, rc := enginetest.Open(t, testbed.StartRedis(t), engine.Options{Logger: log})
	store, err := auth.Open(ctx, rc, auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The plain listener is anonymous; User:ANONYMOUS is the super user
	// the kadm view runs as.
	srv := kafkawire.NewServer(eng, kafkawire.Options{Logger: log, Auth: store, ACLs: true, SuperUsers: []string{"User:root", auth.Anonymous}})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeListeners(sctx, 5*time.Second, kafkawire.Listener{Listener: ln, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return srv, store, kadm.NewClient(cl)
}

func createTopicsReq(name string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	return req
}

func TestLocalRunsKafkaRulesAndHandlers(t *testing.T) {
	srv, store, adm := startLocal(t)
	ctx := ctxT(t, 30*time.Second)

	// A super user creates a topic; kadm sees it with its partitions.
	resp, err := srv.Local(ctx, kafkawire.Caller{Principal: "User:root", Host: "127.0.0.1"}, createTopicsReq("local-made", 3))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("super user: CreateTopics answered %v", kerr.ErrorForCode(code))
	}
	td, err := adm.ListTopics(ctx, "local-made")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["local-made"].Partitions); n != 3 {
		t.Fatalf("kadm sees %d partitions of local-made, want 3", n)
	}

	// A principal without CREATE is refused as over a connection; with
	// Caller.Super the same principal may.
	resp, err = srv.Local(ctx, kafkawire.Caller{Principal: "User:bob", Host: "127.0.0.1"}, createTopicsReq("bobs", 1))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("User:bob: CreateTopics answered %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if td, err := adm.ListTopics(ctx, "bobs"); err != nil || td.Has("bobs") && td["bobs"].Err == nil {
		t.Fatalf("bobs exists after a refused create: %v %v", td, err)
	}

	// An ACL grants it; the rule sees the ACL.
	if err := store.CreateACLs(ctx, []auth.ACL{{Principal: "User:bob", Host: "*", ResourceType: auth.ResTopic, Pattern: auth.PatternPrefixed,
		Resource: "bob", Operation: auth.OpCreate, Permission: auth.PermAllow}}); err != nil {
		t.Fatal(err)
	}
	resp, err = srv.Local(ctx, kafkawire.Caller{Principal: "User:bob", Host: "127.0.0.1"}, createTopicsReq("bobs", 1))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("User:bob with CREATE on bob*: CreateTopics answered %v", kerr.ErrorForCode(code))
	}

	// SCRAM user APIs stay super-user only.
	resp, err = srv.Local(ctx, kafkawire.Caller{Principal: "User:bob", Host: "127.0.0.1"}, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("User:bob describing SCRAM users: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	resp, err = srv.Local(ctx, kafkawire.Caller{Principal: "User:bob", Super: true, Host: "127.0.0.1"}, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode; code != 0 {
		t.Fatalf("super caller describing SCRAM users: %v", kerr.ErrorForCode(code))
	}

	// Connection-level APIs are not served in process.
	if _, err := srv.Local(ctx, kafkawire.Caller{Principal: "User:root"}, kmsg.NewPtrApiVersionsRequest()); !errors.Is(err, kafkawire.ErrNotServed) {
		t.Fatalf("ApiVersions through Local: %v, want ErrNotServed", err)
	}
	if _, err := srv.Local(ctx, kafkawire.Caller{Principal: "User:root"}, kmsg.NewPtrSASLHandshakeRequest()); !errors.Is(err, kafkawire.ErrNotServed) {
		t.Fatalf("SASLHandshake through Local: %v, want ErrNotServed", err)
	}

	// Metadata names this broker at its listener's address.
	md, err := srv.Local(ctx, kafkawire.Caller{Principal: "User:root"}, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatal(err)
	}
	if bs := md.(*kmsg.MetadataResponse).Brokers; len(bs) != 1 || bs[0].Host != "127.0.0.1" || bs[0].Port == 0 {
		t.Fatalf("Metadata brokers through Local: %+v", bs)
	}
}
