package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleShareGroupDescribe describes share groups: state, epochs, the
// assignor and each member with its subscription and assignment.
func handleShareGroupDescribe(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		for _, name := range req.GroupIDs {
			rg := kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID = name
			if !c.s.eng.OwnsGroup(name) {
				rg.ErrorCode = kerr.NotCoordinator.Code
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			g, ok := c.s.eng.ShareDescribe(name)
			if !ok {
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			rg.GroupState = "Empty"
			if len(g.Members) > 0 {
				rg.GroupState = "Stable"
			}
			rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = g.Epoch, g.Epoch, "simple"
			if req.IncludeAuthorizedOperations {
				rg.AuthorizedOperations = c.groupOperations(name)
			}
			for _, m := range g.Members {
				sm := kmsg.NewShareGroupDescribeResponseGroupMember()
				sm.MemberID, sm.MemberEpoch, sm.ClientID, sm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
				sm.RackID = nonEmpty(m.Rack)
				sm.SubscribedTopicNames = m.Topics
				topics := make([]string, 0, len(m.Assignment))
				for t := range m.Assignment {
					topics = append(topics, t)
				}
				slices.Sort(topics)
				for _, tn := range topics {
					t := c.s.eng.Topic(tn)
					if t == nil {
						continue
					}
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.TopicID, tp.Topic, tp.Partitions = t.ID(), tn, m.Assignment[tn]
					sm.Assignment.TopicPartitions = append(sm.Assignment.TopicPartitions, tp)
				}
				rg.Members = append(rg.Members, sm)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}

// aclShareGroupDescribe: DESCRIBE on each group.
func aclShareGroupDescribe(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ShareGroupDescribeRequest)
	var out []refused[string]
	req.GroupIDs, out = sift(req.GroupIDs, func(g *string) int16 { return c.groupCode(auth.OpDescribe, *g) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ShareGroupDescribeResponse)
		for _, o := range out {
			rg := kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = o.item, o.code
			resp.Groups = append(resp.Groups, rg)
		}
	}
}
