package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// groupOperations is the AclOperations bitfield DescribeGroups reports
// when asked: of READ, DELETE and DESCRIBE (what applies to a group),
// those the connection's principal is allowed on it.
func (c *conn) groupOperations(group string) int32 {
	var ops int32
	for _, op := range []auth.Operation{auth.OpRead, auth.OpDelete, auth.OpDescribe} {
		if c.authorize(op, auth.ResGroup, group) {
			ops |= 1 << op
		}
	}
	return ops
}

func handleDescribeGroups(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, name := range req.Groups {
			// An unknown group is described as Dead with no error, as
			// Kafka does before v6.
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group = name
			if err := c.coordinates(name); err != nil {
				sg.ErrorCode = groupErrorCode(err)
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			d, _, err := c.s.eng.Groups().DescribeOwned(name)
			if c.describeShareAsClassic(&sg) {
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			if err != nil { // another broker coordinates it
				sg.ErrorCode = groupErrorCode(err)
				sg.State = d.State.String()
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			sg.State = d.State.String()
			sg.ProtocolType = d.ProtocolType
			sg.Protocol = d.Protocol
			if c.s.eng.Groups().IsConsumerGroup(name) {
				// As Kafka: "not a classic group".
				sg.ErrorCode = kerr.GroupIDNotFound.Code
			}
			if req.IncludeAuthorizedOperations {
				sg.AuthorizedOperations = c.groupOperations(name)
			}
			for _, m := range d.Members {
				sm := kmsg.NewDescribeGroupsResponseGroupMember()
				sm.MemberID, sm.InstanceID = m.MemberID, nonEmpty(m.InstanceID)
				sm.ClientID, sm.ClientHost = m.ClientID, m.ClientHost
				sm.ProtocolMetadata, sm.MemberAssignment = m.Metadata, m.Assignment
				sg.Members = append(sg.Members, sm)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
}

// aclDescribeGroups: DESCRIBE on each group.
func aclDescribeGroups(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeGroupsRequest)
	var out []refused[string]
	req.Groups, out = sift(req.Groups, func(g *string) int16 { return c.groupCode(auth.OpDescribe, *g) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeGroupsResponse)
		for _, o := range out {
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group, sg.ErrorCode = o.item, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}
