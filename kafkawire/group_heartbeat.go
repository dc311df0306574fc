package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

func handleHeartbeat(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.HeartbeatRequest)
	return func() kmsg.Response {
		err := c.coordinates(req.Group)
		if err == nil {
			err = c.s.eng.Groups().Heartbeat(group.HeartbeatRequest{
				Group:      req.Group,
				MemberID:   req.MemberID,
				InstanceID: deref(req.InstanceID),
				Generation: req.Generation,
			})
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = groupErrorCode(err)
		return resp
	}
}

// aclHeartbeat: heartbeating needs READ on the group.
func aclHeartbeat(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.HeartbeatRequest)
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}
