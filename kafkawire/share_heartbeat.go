package kafkawire

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/share"
)

// handleShareGroupHeartbeat joins, keeps or leaves a share group member
// and answers its assignment (the simple assignor; see engine/share).
func handleShareGroupHeartbeat(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	clientID, host := c.clientID, c.clientHost()
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		if strings.TrimSpace(req.GroupID) == "" || (req.RackID != nil && strings.TrimSpace(*req.RackID) == "") {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
		if err := c.coordinates(req.GroupID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = groupErrorCode(err), errMsg(err)
			return resp
		}
		res, err := c.s.eng.ShareHeartbeat(ctx, share.HeartbeatRequest{
			Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
			Rack: req.RackID, Topics: req.SubscribedTopicNames, ClientID: clientID, Host: host,
		})
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = shareErrorCode(err), errMsg(err)
			return resp
		}
		resp.MemberID = &res.MemberID
		resp.MemberEpoch = res.Epoch
		resp.HeartbeatIntervalMillis = int32(c.s.eng.Share().HeartbeatInterval().Milliseconds())
		if res.Epoch < 0 {
			return resp
		}
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		topics := make([]string, 0, len(res.Assignment))
		for t := range res.Assignment {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		for _, name := range topics {
			t := c.s.eng.Topic(name)
			if t == nil {
				continue
			}
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = t.ID(), res.Assignment[name]
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
		return resp
	}
}

// aclShareGroupHeartbeat: READ on the group, DESCRIBE on each subscribed
// topic (as Kafka).
func aclShareGroupHeartbeat(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if code := c.groupCode(auth.OpRead, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	for _, t := range req.SubscribedTopicNames {
		if code := c.topicCode(auth.OpDescribe, t); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
	}
	return nil, nil
}
