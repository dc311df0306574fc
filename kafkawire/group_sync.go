package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleSyncGroup may wait for the leader's assignment; it runs
// concurrently, so the connection keeps serving other requests.
func handleSyncGroup(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.SyncGroupRequest)
	return func() kmsg.Response {
		sr := group.SyncRequest{
			Group:        req.Group,
			MemberID:     req.MemberID,
			InstanceID:   deref(req.InstanceID),
			Generation:   req.Generation,
			ProtocolType: deref(req.ProtocolType),
			Protocol:     deref(req.Protocol),
		}
		if len(req.GroupAssignment) > 0 {
			sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
			for _, a := range req.GroupAssignment {
				sr.Assignments[a.MemberID] = a.MemberAssignment
			}
		}
		pctx, cancel := c.s.parkContext(ctx)
		defer cancel()
		var res group.SyncResult
		err := c.coordinates(req.Group)
		if err == nil {
			res, err = c.s.eng.Groups().Sync(pctx, sr)
		}
		if err != nil {
			c.s.log.Debug("sync group", "group", req.Group, "member", req.MemberID, "err", err)
		}
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = groupErrorCode(err)
		if err == nil {
			resp.ProtocolType = &res.ProtocolType
			resp.Protocol = &res.Protocol
			resp.MemberAssignment = res.Assignment
		}
		return resp
	}
}

// aclSyncGroup: syncing needs READ on the group.
func aclSyncGroup(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.SyncGroupRequest)
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}
