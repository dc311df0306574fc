package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/share"
)

// handleShareAcknowledge applies acknowledgements outside a fetch. It
// needs the member's share session: epoch 0 is refused, -1 closes the
// session after the acknowledgements and releases what is left.
func handleShareAcknowledge(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		group, member := deref(req.GroupID), deref(req.MemberID)
		if req.Version >= 2 {
			resp.AcquisitionLockTimeoutMillis = shareLockMillis(ctx, eng, group)
		}
		if resp.ErrorCode = shareIDsError(eng, group, member); resp.ErrorCode != 0 {
			return resp
		}
		var parts []*sharePartReq
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				pr := &sharePartReq{tp: share.TopicPartition{TopicID: rt.TopicID, Partition: rp.Partition}, hasAcks: true}
				pr.acks = toAckBatches(rp.AcknowledgementBatches, func(b *kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
				})
				parts = append(parts, pr)
			}
		}
		key := share.SessionKey{Group: group, Member: member}
		session, err := eng.Share().CheckSession(key, req.ShareSessionEpoch)
		if err != nil {
			resp.ErrorCode = shareErrorCode(err)
			return resp
		}
		maxType := share.AckReject
		if req.Version >= 2 && req.IsRenewAck {
			maxType = share.AckRenew
		}
		c.shareAck(ctx, group, member, parts, maxType)
		if req.ShareSessionEpoch == -1 {
			for _, tp := range session {
				if p := c.sharePartition(tp); p != nil {
					if err := eng.ShareRelease(ctx, group, member, p); err != nil {
						c.s.log.Warn("share session close: release failed", "group", group, "topic", p.Topic().Name(), "partition", p.ID(), "err", err)
					}
				}
			}
		}
		hints := &leaderHints{c: c}
		for _, pr := range parts {
			n := len(resp.Topics)
			if n == 0 || resp.Topics[n-1].TopicID != pr.tp.TopicID {
				rt := kmsg.NewShareAcknowledgeResponseTopic()
				rt.TopicID = pr.tp.TopicID
				resp.Topics = append(resp.Topics, rt)
				n++
			}
			sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.ErrorMessage = pr.tp.Partition, pr.ackCode, pr.ackMsg
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			if p := c.sharePartition(pr.tp); p != nil {
				leader, epoch := p.Leader()
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = hints.hint(pr.ackCode, leader, epoch)
			}
			resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, sp)
		}
		for _, n := range hints.endpoints() {
			resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareAcknowledgeResponseNodeEndpoint{NodeID: n.id, Host: n.host, Port: n.port, Rack: n.rack})
		}
		return resp
	}
}

// aclShareAcknowledge: READ on the group; topics per partition in the
// handler.
func aclShareAcknowledge(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ShareAcknowledgeRequest)
	if code := c.groupCode(auth.OpRead, deref(req.GroupID)); code != 0 {
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}
