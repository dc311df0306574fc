package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleOffsetCommit commits offsets for a group member, or for a client
// outside group management (generation -1, no member id).
func handleOffsetCommit(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetCommitRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		cr := group.CommitRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: deref(req.InstanceID), Generation: req.Generation}
		// where[i] is the response partition of cr.Offsets[i].
		var where []*kmsg.OffsetCommitResponseTopicPartition
		resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
		for ti := range req.Topics {
			rt := &req.Topics[ti]
			st := &resp.Topics[ti]
			*st = kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			t := eng.Topic(rt.Topic)
			st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
			for pi := range rt.Partitions {
				rp := &rt.Partitions[pi]
				sp := &st.Partitions[pi]
				*sp = kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				if t == nil || t.Partition(rp.Partition) == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				epoch := int32(-1)
				if req.Version >= 6 {
					epoch = rp.LeaderEpoch
				}
				cr.Offsets = append(cr.Offsets, group.PartitionCommit{
					TopicPartition: group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
					Commit:         group.Commit{Offset: rp.Offset, LeaderEpoch: epoch, Metadata: deref(rp.Metadata)},
				})
				where = append(where, sp)
			}
		}
		if len(cr.Offsets) == 0 {
			return resp
		}
		var errs []error
		err := c.coordinates(req.Group)
		switch {
		case err != nil:
		case eng.IsShareGroup(req.Group):
			err = errShareGroupID // one namespace for all group types, as Kafka
		default:
			errs, err = eng.Groups().Commit(ctx, cr)
		}
		if err != nil {
			c.s.log.Debug("offset commit refused", "group", req.Group, "member", req.MemberID, "generation", req.Generation, "err", err)
		}
		for i, sp := range where {
			if err != nil {
				sp.ErrorCode = groupErrorCode(err)
			} else {
				sp.ErrorCode = groupErrorCode(errs[i])
			}
		}
		return resp
	}
}

// aclOffsetCommit: READ on the group and on each topic.
func aclOffsetCommit(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetCommitRequest)
	refuse := func(resp *kmsg.OffsetCommitResponse, t kmsg.OffsetCommitRequestTopic, code int16) {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			refuse(resp, t, code)
		}
		return resp, nil
	}
	var out []refused[kmsg.OffsetCommitRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetCommitRequestTopic) int16 {
		name := c.topicName(t.Topic, t.TopicID)
		if name == "" {
			return 0
		}
		return c.topicCode(auth.OpRead, name)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		for _, o := range out {
			refuse(r.(*kmsg.OffsetCommitResponse), o.item, o.code)
		}
	}
}
