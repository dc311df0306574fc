package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleDeleteRecords moves log start offsets up (kafka-delete-records),
// on each partition's leader, as in Kafka.
func handleDeleteRecords(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			t := c.s.eng.Topic(rt.Topic)
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.LowWatermark = rp.Partition, -1
				p := partitionOf(t, rp.Partition)
				if p == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else if code, _, _ := leaderCode(p, -1); code != 0 {
					sp.ErrorCode = code
				} else if lw, err := p.DeleteRecords(ctx, rp.Offset); err != nil {
					sp.ErrorCode = errorCode(err)
				} else {
					sp.LowWatermark = lw
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// aclDeleteRecords: DELETE on each topic.
func aclDeleteRecords(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteRecordsRequest)
	var out []refused[kmsg.DeleteRecordsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) int16 { return c.topicCode(auth.OpDelete, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteRecordsResponse)
		for _, o := range out {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = p.Partition, o.code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
