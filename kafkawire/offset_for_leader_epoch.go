package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleOffsetForLeaderEpoch answers, on the partition's leader, where a
// leader epoch ends (the largest epoch not above the one asked for, from
// the partition's epoch history in Redis; the log end for the current
// epoch), after the same leader and epoch checks as Fetch. An epoch older
// than the history kept answers -1, -1: clients then reset as after an
// out-of-range fetch.
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
				default:
					if sp.ErrorCode, _, _ = leaderCode(p, rp.CurrentLeaderEpoch); sp.ErrorCode == 0 {
						sp.LeaderEpoch, sp.EndOffset = p.EpochEnd(rp.LeaderEpoch)
					}
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
