package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleOffsetForLeaderEpoch: korvet's leader epoch is always 0, so the
// end of epoch 0 is the high watermark and later epochs are unknown.
func handleOffsetForLeaderEpoch(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			t := c.s.eng.Topic(rt.Topic)
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
				p := partitionOf(t, rp.Partition)
				switch {
				case p == nil:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case rp.CurrentLeaderEpoch > 0:
					sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
				case rp.LeaderEpoch == 0:
					sp.LeaderEpoch, sp.EndOffset = 0, p.HighWatermark()
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// aclOffsetForLeaderEpoch: DESCRIBE on each topic.
func aclOffsetForLeaderEpoch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetForLeaderEpochRequest)
	var out []refused[kmsg.OffsetForLeaderEpochRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) int16 { return c.topicCode(auth.OpDescribe, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetForLeaderEpochResponse)
		for _, o := range out {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LeaderEpoch, sp.EndOffset = p.Partition, o.code, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
