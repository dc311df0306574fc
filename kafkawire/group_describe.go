package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOperations is the AclOperations bitfield DescribeGroups reports
// when asked: korvet has no ACLs, so READ, DELETE and DESCRIBE.
const groupOperations = 1<<3 | 1<<6 | 1<<8

func handleDescribeGroups(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, name := range req.Groups {
			// An unknown group is described as Dead with no error, as
			// Kafka does before v6.
			d, _ := c.s.eng.Groups().Describe(name)
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group = name
			sg.State = d.State.String()
			sg.ProtocolType = d.ProtocolType
			sg.Protocol = d.Protocol
			if req.IncludeAuthorizedOperations {
				sg.AuthorizedOperations = groupOperations
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
