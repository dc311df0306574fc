package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// Endpoint types of DescribeCluster v1+ (KIP-919).
const (
	endpointBrokers     = 1
	endpointControllers = 2
)

// clusterOps are the operations Kafka reports on the cluster that korvet
// knows (not the delegation token ones).
var clusterOps = []auth.Operation{auth.OpCreate, auth.OpAlter, auth.OpDescribe, auth.OpClusterAction,
	auth.OpDescribeConfigs, auth.OpAlterConfigs, auth.OpIdempotentWrite}

// handleDescribeCluster answers as a Kafka broker does: every live broker
// (as Metadata lists them), the lowest node id as the controller; a broker
// whose lease lapsed is gone rather than fenced, so v2's
// IncludeFencedBrokers changes nothing. Controllers have no endpoint of
// their own here, so asking a broker for them is a mismatch, as in Kafka.
func handleDescribeCluster(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.EndpointType = endpointBrokers
		switch req.EndpointType {
		case endpointBrokers:
		case endpointControllers:
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("this is a broker endpoint; korvet has no separate controllers")
			return resp
		default:
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("unsupported endpoint type %d", req.EndpointType))
			return resp
		}
		resp.ClusterID = c.s.eng.ClusterID()
		nodes := c.nodes()
		resp.ControllerID = controllerID(nodes)
		for _, n := range nodes {
			resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: n.id, Host: n.host, Port: n.port, Rack: n.rack})
		}
		if req.IncludeClusterAuthorizedOperations {
			// Kafka reports nothing to whoever may not describe the cluster.
			resp.ClusterAuthorizedOperations = 0
			if c.authorizeCluster(auth.OpDescribe) {
				for _, op := range clusterOps {
					if c.authorizeCluster(op) {
						resp.ClusterAuthorizedOperations |= 1 << op
					}
				}
			}
		}
		return resp
	}
}
