package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/group"
)

func handleHeartbeat(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.HeartbeatRequest)
	return func() kmsg.Response {
		err := c.s.eng.Groups().Heartbeat(group.HeartbeatRequest{
			Group:      req.Group,
			MemberID:   req.MemberID,
			InstanceID: deref(req.InstanceID),
			Generation: req.Generation,
		})
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = groupErrorCode(err)
		return resp
	}
}
