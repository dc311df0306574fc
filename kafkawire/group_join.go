package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleJoinGroup may wait for the group's join phase to complete; it
// runs concurrently, so the connection keeps serving other requests.
func handleJoinGroup(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.JoinGroupRequest)
	clientID, host := c.clientID, c.clientHost()
	return func() kmsg.Response {
		if c.s.eng.IsShareGroup(req.Group) {
			// One namespace for all group types: as Kafka does.
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = kerr.GroupIDNotFound.Code, -1
			return resp
		}
		jr := group.JoinRequest{
			Group:                  req.Group,
			MemberID:               req.MemberID,
			InstanceID:             deref(req.InstanceID),
			ClientID:               clientID,
			ClientHost:             host,
			SessionTimeout:         millis(req.SessionTimeoutMillis),
			ProtocolType:           req.ProtocolType,
			RequireKnownMemberID:   req.Version >= 4,
			SupportsSkipAssignment: req.Version >= 9,
			Reason:                 deref(req.Reason),
		}
		if req.Version >= 1 {
			jr.RebalanceTimeout = millis(req.RebalanceTimeoutMillis)
		}
		for _, p := range req.Protocols {
			jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
		}
		pctx, cancel := c.s.parkContext(ctx)
		defer cancel()
		var res group.JoinResult
		err := c.coordinates(req.Group)
		if err == nil {
			res, err = c.s.eng.Groups().Join(pctx, jr)
		}
		if err != nil {
			c.s.log.Debug("join group", "group", req.Group, "member", req.MemberID, "client", clientID, "err", err)
		}
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = groupErrorCode(err)
		resp.Generation = res.Generation
		resp.MemberID = res.MemberID
		resp.LeaderID = res.Leader
		resp.SkipAssignment = res.SkipAssignment
		if err == nil {
			resp.ProtocolType = &res.ProtocolType
			resp.Protocol = &res.Protocol
		}
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, nonEmpty(m.InstanceID), m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
}

// aclJoinGroup: joining needs READ on the group.
func aclJoinGroup(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.JoinGroupRequest)
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = code, -1
		return resp, nil
	}
	return nil, nil
}
