package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleLeaveGroup takes one member (v0-v2) or a batch (v3+, which may
// name static members by instance id) out of a group.
func handleLeaveGroup(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.LeaveGroupRequest)
	return func() kmsg.Response {
		var leaving []group.LeaveMember
		if req.Version < 3 {
			leaving = []group.LeaveMember{{MemberID: req.MemberID}}
		}
		for _, m := range req.Members {
			leaving = append(leaving, group.LeaveMember{MemberID: m.MemberID, InstanceID: deref(m.InstanceID), Reason: deref(m.Reason)})
		}
		var errs []error
		err := c.coordinates(req.Group)
		if err == nil {
			errs, err = c.s.eng.Groups().Leave(req.Group, leaving)
		}
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = groupErrorCode(err)
		if err != nil {
			return resp
		}
		if req.Version < 3 {
			resp.ErrorCode = groupErrorCode(errs[0])
			return resp
		}
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, groupErrorCode(errs[i])
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
}

// aclLeaveGroup: leaving needs READ on the group.
func aclLeaveGroup(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.LeaveGroupRequest)
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}
