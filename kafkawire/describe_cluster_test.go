package kafkawire_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire"
)

// allClusterOps is the bitfield of the cluster operations korvet reports:
// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
// IDEMPOTENT_WRITE.
const allClusterOps = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

// TestDescribeClusterVersions: v0-2 on the wire; v1's endpoint types (a
// broker answers for brokers only, as Kafka's does) and v2's fenced
// brokers (korvet's one broker never is).
func TestDescribeClusterVersions(t *testing.T) {
	b := startBroker(t, engine.Options{})
	c := newRawGroupConn(t, b)
	for v := int16(0); v <= 2; v++ {
		for _, withOps := range []bool{false, true} {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.IncludeClusterAuthorizedOperations, req.IncludeFencedBrokers = v, withOps, v >= 2
			resp := c.do(req).(*kmsg.DescribeClusterResponse)
			wantOps := int32(-2147483648)
			if withOps {
				wantOps = allClusterOps
			}
			if resp.ErrorCode != 0 || resp.ClusterID != b.eng.ClusterID() || resp.ControllerID != 0 || len(resp.Brokers) != 1 ||
				resp.Brokers[0].Host != "127.0.0.1" || resp.Brokers[0].Port != port(b.addr) || resp.Brokers[0].IsFenced ||
				resp.ClusterAuthorizedOperations != wantOps || v >= 1 && resp.EndpointType != 1 {
				t.Errorf("v%d (operations %v): %+v", v, withOps, resp)
			}
		}
	}
	for v := int16(1); v <= 2; v++ {
		for et, want := range map[int8]*kerr.Error{2: kerr.MismatchedEndpointType, 0: kerr.UnsupportedEndpointType, 7: kerr.UnsupportedEndpointType} {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.EndpointType = v, et
			resp := c.do(req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != want.Code || resp.ErrorMessage == nil || len(resp.Brokers) != 0 || resp.EndpointType != 1 {
				t.Errorf("v%d endpoint type %d: %+v, want %s", v, et, resp, want.Message)
			}
		}
	}
}

// TestDescribeClusterAuthorizedOperations: anyone may describe the
// cluster, as in Kafka; its operations are reported only to whoever may
// DESCRIBE it.
func TestDescribeClusterAuthorizedOperations(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, acls: true, super: []string{"User:admin"}})
	for _, u := range []string{"admin", "alice"} {
		b.addUser(u, "pw-"+u+"-1234")
	}
	ctx := ctxT(t, 30*time.Second)
	for u, want := range map[string]int32{"admin": allClusterOps, "alice": 0} {
		cl := b.client(b.plainAddr, scram256(u, "pw-"+u+"-1234"), kgo.RequestRetries(1))
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 || len(resp.Brokers) != 1 || resp.ClusterAuthorizedOperations != want {
			t.Errorf("%s: %v %+v, want operations %b", u, err, resp, want)
		}
	}
}
