package kafkawire

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleConsumerGroupHeartbeat serves KIP-848's ConsumerGroupHeartbeat:
// joins, heartbeats and leaves of consumer group members; the coordinator
// (engine/group/consumer*.go) does the work. v0 lets the coordinator pick
// a member id; v1 (regex subscriptions) needs the client's.
func handleConsumerGroupHeartbeat(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	clientID, host := c.clientID, c.clientHost()
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		if c.s.eng.IsShareGroup(req.Group) {
			// One namespace for all group types, as in Kafka.
			msg := "group " + req.Group + " is a share group, not a consumer group"
			resp.ErrorCode, resp.ErrorMessage, resp.MemberEpoch = kerr.GroupIDNotFound.Code, &msg, -1
			return resp
		}
		hr := group.ConsumerHeartbeatRequest{
			Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
			InstanceID: req.InstanceID, RackID: req.RackID,
			RebalanceTimeout: -1,
			TopicNames:       req.SubscribedTopicNames,
			Regex:            req.SubscribedTopicRegex,
			Assignor:         req.ServerAssignor,
			GenerateID:       req.Version == 0,
			ClientID:         clientID,
			ClientHost:       host,
		}
		if c.s.opts.ACLs {
			hr.TopicAllowed = func(topic string) bool { return c.topicCode(auth.OpDescribe, topic) == 0 }
		}
		if req.RebalanceTimeoutMillis >= 0 {
			hr.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
		}
		if req.Topics != nil {
			hr.Owned = group.Assignment{}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					hr.Owned.Add(t.TopicID, p)
				}
			}
		}
		var res group.ConsumerHeartbeatResult
		err := c.coordinates(req.Group)
		if err == nil {
			res, err = c.s.eng.Groups().ConsumerHeartbeat(hr)
		}
		if err != nil {
			resp.ErrorCode = groupErrorCode(err)
			msg := err.Error()
			resp.ErrorMessage = &msg
			resp.MemberEpoch = -1
			if req.MemberID != "" {
				resp.MemberID = &req.MemberID
			}
			c.s.log.Debug("consumer group heartbeat refused", "group", req.Group, "member", req.MemberID, "epoch", req.MemberEpoch, "err", err)
			return resp
		}
		resp.MemberID = &res.MemberID
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
		if res.Assignment != nil {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
			for _, id := range res.Assignment.SortedTopics() {
				t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				t.TopicID, t.Partitions = id, res.Assignment[id]
				a.Topics = append(a.Topics, t)
			}
			resp.Assignment = &a
		}
		return resp
	}
}

// aclConsumerGroupHeartbeat: READ on the group and, as Kafka checks,
// DESCRIBE on every topic subscribed to by name
// (TOPIC_AUTHORIZATION_FAILED otherwise).
func aclConsumerGroupHeartbeat(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ConsumerGroupHeartbeatRequest)
	refuse := func(code int16) (kmsg.Response, func(kmsg.Response)) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.MemberEpoch = code, -1
		return resp, nil
	}
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		return refuse(code)
	}
	for _, t := range req.SubscribedTopicNames {
		if code := c.topicCode(auth.OpDescribe, t); code != 0 {
			return refuse(code)
		}
	}
	return nil, nil
}
