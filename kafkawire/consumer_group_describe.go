package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleConsumerGroupDescribe describes KIP-848 consumer groups; a
// classic or unknown group answers GROUP_ID_NOT_FOUND, as in Kafka.
func handleConsumerGroupDescribe(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, name := range req.Groups {
			resp.Groups = append(resp.Groups, c.describeConsumerGroup(name, req.IncludeAuthorizedOperations))
		}
		return resp
	}
}

func (c *conn) describeConsumerGroup(name string, ops bool) kmsg.ConsumerGroupDescribeResponseGroup {
	sg := kmsg.NewConsumerGroupDescribeResponseGroup()
	sg.Group = name
	err := c.coordinates(name)
	var d group.ConsumerDescription
	if err == nil {
		d, err = c.s.eng.Groups().DescribeConsumer(name)
	}
	if err != nil {
		sg.ErrorCode = groupErrorCode(err)
		msg := err.Error()
		sg.ErrorMessage = &msg
		sg.State = "Dead"
		return sg
	}
	sg.State, sg.Epoch, sg.AssignmentEpoch, sg.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
	if ops {
		sg.AuthorizedOperations = c.groupOperations(name)
	}
	for _, m := range d.Members {
		sm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		sm.MemberID, sm.InstanceID, sm.RackID = m.MemberID, nonEmpty(m.InstanceID), nonEmpty(m.RackID)
		sm.MemberEpoch, sm.ClientID, sm.ClientHost = m.MemberEpoch, m.ClientID, m.ClientHost
		sm.SubscribedTopics = m.SubscribedTopics
		if sm.SubscribedTopics == nil {
			sm.SubscribedTopics = []string{}
		}
		sm.SubscribedTopicRegex = nonEmpty(m.SubscribedRegex)
		sm.Assignment = c.wireAssignment(m.Assignment)
		sm.TargetAssignment = c.wireAssignment(m.Target)
		sm.MemberType = 1 // a consumer protocol member
		if m.Classic {
			sm.MemberType = 0
		}
		sg.Members = append(sg.Members, sm)
	}
	return sg
}

func (c *conn) wireAssignment(a group.Assignment) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, id := range a.SortedTopics() {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = id, a[id]
		if t := c.s.eng.TopicByID(id); t != nil {
			tp.Topic = t.Name()
		}
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}

// aclConsumerGroupDescribe: DESCRIBE on each group.
func aclConsumerGroupDescribe(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ConsumerGroupDescribeRequest)
	var out []refused[string]
	req.Groups, out = sift(req.Groups, func(g *string) int16 { return c.groupCode(auth.OpDescribe, *g) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ConsumerGroupDescribeResponse)
		for _, o := range out {
			sg := kmsg.NewConsumerGroupDescribeResponseGroup()
			sg.Group, sg.ErrorCode = o.item, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}
