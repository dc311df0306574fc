package kafkawire

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleTxnOffsetCommit stores offsets a transactional producer commits
// for a group (KIP-447: v3+ carry the consumer's generation, member and
// instance id, which fence a zombie). They stay pending until the
// transaction ends; OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for them meanwhile. The transaction itself (is
// it ongoing, with this producer epoch, has AddOffsetsToTxn added the
// group) is checked by Options.CheckTxnOffsets; v5+ (KIP-890) adds the
// group to the transaction instead of requiring AddOffsetsToTxn.
func handleTxnOffsetCommit(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		tc := group.TxnCommitRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
			Generation: req.Generation, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
		if req.Version < 3 {
			// No membership fields before v3 (their defaults are
			// those of a producer outside group management).
			tc.MemberID, tc.InstanceID, tc.Generation = "", "", -1
		}
		// where[i] is the response partition of tc.Offsets[i].
		var where []*kmsg.TxnOffsetCommitResponseTopicPartition
		resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
		for ti := range req.Topics {
			rt := &req.Topics[ti]
			st := &resp.Topics[ti]
			*st = kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			t := eng.Topic(rt.Topic)
			st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
			for pi := range rt.Partitions {
				rp := &rt.Partitions[pi]
				sp := &st.Partitions[pi]
				*sp = kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				if t == nil || t.Partition(rp.Partition) == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				epoch := int32(-1)
				if req.Version >= 2 {
					epoch = rp.LeaderEpoch
				}
				tc.Offsets = append(tc.Offsets, group.PartitionCommit{
					TopicPartition: group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
					Commit:         group.Commit{Offset: rp.Offset, LeaderEpoch: epoch, Metadata: deref(rp.Metadata)},
				})
				where = append(where, sp)
			}
		}
		if len(tc.Offsets) == 0 {
			return resp
		}
		var errs []error
		var code int16
		// The coordinator's check (by CheckTxnOffsets) comes before the
		// group's, as Kafka verifies a transactional write before it
		// runs it, and again after the offsets are stored (Recheck).
		err := c.coordinates(req.Group)
		switch {
		case req.Group == "":
			err = group.ErrInvalidGroupID
		case err != nil:
		case eng.IsShareGroup(req.Group):
			err = errShareGroupID // one namespace for all group types, as Kafka
		default:
			checkTxn, add := c.s.opts.CheckTxnOffsets, c.s.opts.CheckTxnOffsets
			if checkTxn == nil {
				checkTxn, add = eng.Txns().CheckOffsets, eng.Txns().CheckOffsets
				if req.Version >= 5 {
					// KIP-890 (transaction.version 2): no AddOffsetsToTxn,
					// this request adds the group.
					add = eng.Txns().AddOffsetsImplicit
				}
			}
			check := func(ctx context.Context) error {
				return checkTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
			}
			err = add(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
			tc.Recheck = check
		}
		if err == nil {
			errs, err = eng.Groups().TxnCommit(ctx, tc)
		}
		if err != nil {
			c.s.log.Debug("transactional offset commit refused", "group", req.Group, "producer", req.ProducerID, "epoch", req.ProducerEpoch,
				"member", req.MemberID, "generation", req.Generation, "err", err)
			code = txnCheckCode(err)
		}
		for i, sp := range where {
			if err != nil {
				sp.ErrorCode = code
			} else {
				sp.ErrorCode = groupErrorCode(errs[i])
			}
		}
		return resp
	}
}

// txnCheckCode is the Kafka error code of a refused TxnOffsetCommit: the
// code of a *kerr.Error it wraps (a refusal by Options.CheckTxnOffsets),
// the transaction coordinator's refusal (a fenced producer gets
// INVALID_PRODUCER_EPOCH, as Kafka's log answers it), else as a group
// error.
func txnCheckCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if code := txnErrorCode(err, true); code != errorCode(err) {
		return code
	}
	return groupErrorCode(err)
}

// aclTxnOffsetCommit: WRITE on the transactional id and READ on the group
// refuse the whole request; topics without READ are refused one by one,
// as Kafka does.
func aclTxnOffsetCommit(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.TxnOffsetCommitRequest)
	refuse := func(resp *kmsg.TxnOffsetCommitResponse, t kmsg.TxnOffsetCommitRequestTopic, code int16) {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	code := int16(0)
	if !c.authorize(auth.OpWrite, auth.ResTransactionalID, req.TransactionalID) {
		code = kerr.TransactionalIDAuthorizationFailed.Code
	} else {
		code = c.groupCode(auth.OpRead, req.Group)
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			refuse(resp, t, code)
		}
		return resp, nil
	}
	var out []refused[kmsg.TxnOffsetCommitRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) int16 { return c.topicCode(auth.OpRead, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		for _, o := range out {
			refuse(r.(*kmsg.TxnOffsetCommitResponse), o.item, o.code)
		}
	}
}
