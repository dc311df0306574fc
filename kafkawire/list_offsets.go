package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// Special timestamps of ListOffsets.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3 // v7+
	listEarliestLocal = -4 // v8+, KIP-405
	listLatestTiered  = -5 // v9+
)

func handleListOffsets(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
		for ti := range req.Topics {
			rt := &req.Topics[ti]
			st := &resp.Topics[ti]
			*st = kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			t := eng.Topic(rt.Topic)
			st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
			for pi := range rt.Partitions {
				rq := &rt.Partitions[pi]
				sp := &st.Partitions[pi]
				*sp = kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rq.Partition
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, 0
				if t == nil || t.Partition(rq.Partition) == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				p := t.Partition(rq.Partition)
				code, _, epoch := leaderCode(p, rq.CurrentLeaderEpoch)
				if code != 0 {
					sp.ErrorCode = code
					continue
				}
				// The current epoch, for every answer: an offset listed
				// now is at most the log end, so the epoch's end (what a
				// client checks it against after a move) is never below
				// it.
				sp.LeaderEpoch = epoch
				var err error
				switch rq.Timestamp {
				case listLatest:
					sp.Offset = p.HighWatermark()
					if req.IsolationLevel == 1 {
						sp.Offset = p.LastStable() // read_committed
					}
				case listEarliest:
					sp.Offset = p.LogStart()
				case listEarliestLocal:
					sp.Offset = p.LocalStart()
				case listLatestTiered:
					sp.Offset = p.LastTiered()
				case listMaxTimestamp:
					sp.Offset, sp.Timestamp, err = p.MaxTimestamp(ctx)
				default:
					if rq.Timestamp < 0 {
						sp.ErrorCode = kerr.InvalidRequest.Code
						continue
					}
					sp.Offset, sp.Timestamp, err = p.OffsetForTime(ctx, rq.Timestamp)
					if err == nil && sp.Timestamp < 0 && req.Version >= 1 {
						// No record at or after the time: Kafka answers -1.
						sp.Offset = -1
					}
				}
				if err != nil {
					sp.ErrorCode = errorCode(err)
					continue
				}
				if req.Version == 0 {
					sp.OldStyleOffsets = []int64{sp.Offset}
				}
			}
		}
		return resp
	}
}

// aclListOffsets: DESCRIBE on each topic.
func aclListOffsets(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ListOffsetsRequest)
	var out []refused[kmsg.ListOffsetsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) int16 { return c.topicCode(auth.OpDescribe, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		for _, o := range out {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
