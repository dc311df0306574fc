package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleOffsetDelete deletes committed offsets of a group, except those
// of topics a group with members is still subscribed to.
func handleOffsetDelete(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		var parts []group.TopicPartition
		var where []*kmsg.OffsetDeleteResponseTopicPartition
		resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
		for ti, rt := range req.Topics {
			st := &resp.Topics[ti]
			*st = kmsg.NewOffsetDeleteResponseTopic()
			st.Topic = rt.Topic
			t := eng.Topic(rt.Topic)
			st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
			for pi, rp := range rt.Partitions {
				sp := &st.Partitions[pi]
				*sp = kmsg.NewOffsetDeleteResponseTopicPartition()
				sp.Partition = rp.Partition
				if t == nil || t.Partition(rp.Partition) == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				parts = append(parts, group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
				where = append(where, sp)
			}
		}
		var errs []error
		err := c.coordinates(req.Group)
		if err == nil {
			errs, err = eng.Groups().DeleteOffsets(ctx, req.Group, parts, consumerTopics)
		}
		if err != nil {
			resp.ErrorCode = groupErrorCode(err)
			return resp
		}
		for i, sp := range where {
			sp.ErrorCode = groupErrorCode(errs[i])
		}
		return resp
	}
}

// consumerTopics decodes the topics a "consumer" protocol member
// subscribes to; false for other protocol types or bad metadata.
func consumerTopics(protocolType string, metadata []byte) ([]string, bool) {
	if protocolType != "consumer" {
		return nil, false
	}
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(metadata); err != nil {
		return nil, false
	}
	return md.Topics, true
}

// aclOffsetDelete: DELETE on the group and READ on each topic.
func aclOffsetDelete(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetDeleteRequest)
	if code := c.groupCode(auth.OpDelete, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	var out []refused[kmsg.OffsetDeleteRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetDeleteRequestTopic) int16 { return c.topicCode(auth.OpRead, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetDeleteResponse)
		for _, o := range out {
			st := kmsg.NewOffsetDeleteResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewOffsetDeleteResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
