package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeCluster(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.ClusterID = c.s.eng.ClusterID()
		resp.ControllerID = c.s.opts.NodeID
		resp.EndpointType = req.EndpointType
		host, port := c.advertised()
		resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: c.s.opts.NodeID, Host: host, Port: port}}
		resp.ClusterAuthorizedOperations = -2147483648
		return resp
	}
}
