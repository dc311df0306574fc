package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

// DescribeTopicPartitions (KIP-966) is the paged Metadata that Java's admin
// client and kafka-topics use to describe topics: topics in name order, at
// most ResponsePartitionLimit partitions an answer, and a cursor (the
// first topic and partition not answered) to ask for the rest with.

// maxDescribePartitions bounds the partitions of one answer whatever the
// client asks for, as Kafka's max.request.partition.size.limit (default
// 2000) does.
const maxDescribePartitions = 2000

// topicOps are the operations Kafka reports on a topic.
var topicOps = []auth.Operation{auth.OpRead, auth.OpWrite, auth.OpCreate, auth.OpDelete,
	auth.OpAlter, auth.OpDescribe, auth.OpDescribeConfigs, auth.OpAlterConfigs}

// topicOperations is the authorized-operations bitfield of a topic.
func (c *conn) topicOperations(topic string) int32 {
	var ops int32
	for _, op := range topicOps {
		if c.authorize(op, auth.ResTopic, topic) {
			ops |= 1 << op
		}
	}
	return ops
}

// dtpInvalid reports whether req cannot be answered: a limit below 1
// would page forever without moving, a negative cursor partition means
// nothing, and a cursor must name one of the topics asked for (Kafka's
// rule).
func dtpInvalid(req *kmsg.DescribeTopicPartitionsRequest) bool {
	if req.ResponsePartitionLimit < 1 {
		return true
	}
	cur := req.Cursor
	if cur == nil {
		return false
	}
	return cur.Partition < 0 ||
		len(req.Topics) > 0 && !slices.ContainsFunc(req.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) bool { return t.Topic == cur.Topic })
}

// dtpRefuse answers every topic asked for with code, as Kafka answers a
// request it cannot serve. A request for all topics gets an empty answer.
func dtpRefuse(req *kmsg.DescribeTopicPartitionsRequest, code int16) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, dtpTopicError(rt.Topic, code))
	}
	return resp
}

func dtpTopicError(name string, code int16) kmsg.DescribeTopicPartitionsResponseTopic {
	mt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), code
	return mt
}

// dtpNames are the topics a request that names topics covers: sorted,
// each once, none before the cursor's topic (Kafka ignores those).
func dtpNames(req *kmsg.DescribeTopicPartitionsRequest) []string {
	from := ""
	if req.Cursor != nil {
		from = req.Cursor.Topic
	}
	names := make([]string, 0, len(req.Topics))
	for _, rt := range req.Topics {
		if rt.Topic >= from {
			names = append(names, rt.Topic)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func handleDescribeTopicPartitions(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	return func() kmsg.Response {
		if dtpInvalid(req) {
			return dtpRefuse(req, kerr.InvalidRequest.Code)
		}
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
		from, fromPartition := "", 0
		if req.Cursor != nil {
			from, fromPartition = req.Cursor.Topic, int(req.Cursor.Partition)
		}
		// The topics this answer may cover, in name order; a nil topic
		// was named but does not exist.
		type entry struct {
			name string
			t    *engine.Topic
		}
		var entries []entry
		if len(req.Topics) == 0 {
			// Every topic the principal may describe. Unlike the other
			// handlers this one checks, because paging needs the
			// hidden topics gone before it counts: pruning the answer
			// afterwards (as aclMetadata does) would make pages short
			// and could name a hidden topic in NextCursor. With ACLs
			// off this is always true.
			for _, t := range eng.Topics() {
				if t.Name() >= from && c.authorize(auth.OpDescribe, auth.ResTopic, t.Name()) {
					entries = append(entries, entry{t.Name(), t})
				}
			}
		} else {
			for _, name := range dtpNames(req) {
				entries = append(entries, entry{name, eng.Topic(name)})
			}
		}
		// The client's limit is only ever compared with, never allocated by.
		remaining := int(min(req.ResponsePartitionLimit, maxDescribePartitions))
		nodes := c.nodes()
		for _, e := range entries {
			if remaining == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: e.name}
				break
			}
			if e.t == nil {
				code := kerr.UnknownTopicOrPartition.Code
				if engine.ValidTopicName(e.name) != nil {
					code = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, dtpTopicError(e.name, code))
				continue
			}
			parts := e.t.Partitions()
			start := 0
			if e.name == from {
				start = min(fromPartition, len(parts))
			}
			end := min(len(parts), start+remaining)
			mt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			mt.Topic = kmsg.StringPtr(e.name)
			mt.TopicID = e.t.ID()
			mt.IsInternal = e.t.Internal()
			mt.AuthorizedOperations = c.topicOperations(e.name)
			mt.Partitions = make([]kmsg.DescribeTopicPartitionsResponseTopicPartition, 0, end-start)
			for _, p := range parts[start:end] {
				mp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
				mp.Partition = p.ID()
				mp.LeaderID, mp.LeaderEpoch, mp.ErrorCode = partitionLeader(p, nodes)
				mp.Replicas, mp.ISR = replicas(mp.LeaderID), replicas(mp.LeaderID)
				// Empty, not null: Kafka sends lists here.
				mp.EligibleLeaderReplicas, mp.LastKnownELR = []int32{}, []int32{}
				mt.Partitions = append(mt.Partitions, mp)
			}
			resp.Topics = append(resp.Topics, mt)
			remaining -= end - start
			if end < len(parts) {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: e.name, Partition: int32(end)}
				break
			}
		}
		return resp
	}
}

// aclDescribeTopicPartitions: DESCRIBE on each topic, as Metadata. A
// named topic the principal may not describe is answered
// TOPIC_AUTHORIZATION_FAILED (with no topic id, so whether it exists stays
// hidden) after the others, on every page it falls in; all topics means
// those it may describe (the handler leaves out the rest).
func aclDescribeTopicPartitions(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeTopicPartitionsRequest)
	if len(req.Topics) == 0 {
		return nil, nil
	}
	if dtpInvalid(req) {
		return dtpRefuse(req, kerr.InvalidRequest.Code), nil
	}
	kept, out := sift(dtpNames(req), func(n *string) int16 { return c.topicCode(auth.OpDescribe, *n) })
	add := func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTopicPartitionsResponse)
		for _, o := range out {
			resp.Topics = append(resp.Topics, dtpTopicError(o.item, o.code))
		}
	}
	if len(kept) == 0 {
		// An empty list would ask for all topics.
		resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
		add(resp)
		return resp, nil
	}
	if req.Cursor != nil && c.topicCode(auth.OpDescribe, req.Cursor.Topic) != 0 {
		// Its partition index says nothing about the topics after it,
		// which all sort after its name: start them at partition 0.
		req.Cursor = nil
	}
	req.Topics = req.Topics[:0]
	for _, name := range kept {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
	}
	return nil, add
}
