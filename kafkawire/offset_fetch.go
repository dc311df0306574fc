package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/group"
)

// handleOffsetFetch returns committed offsets: of one group (v0-v7) or of
// several (v8+); a null topic list (v2+) asks for everything committed.
// korvet has no transactional commits, so RequireStable changes nothing.
func handleOffsetFetch(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetFetchRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 8 {
			for _, rg := range req.Groups {
				sg := kmsg.NewOffsetFetchResponseGroup()
				sg.Group = rg.Group
				var parts []group.TopicPartition
				if rg.Topics != nil {
					parts = []group.TopicPartition{}
					for _, rt := range rg.Topics {
						for _, p := range rt.Partitions {
							parts = append(parts, group.TopicPartition{Topic: rt.Topic, Partition: p})
						}
					}
				}
				got, err := c.s.eng.Groups().Fetch(ctx, rg.Group, parts)
				sg.ErrorCode = groupErrorCode(err)
				for _, t := range groupByTopic(got) {
					st := kmsg.NewOffsetFetchResponseGroupTopic()
					st.Topic = t[0].Topic
					for _, pc := range t {
						sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						sp.Partition, sp.Offset, sp.LeaderEpoch = pc.Partition, pc.Offset, pc.LeaderEpoch
						md := pc.Metadata
						sp.Metadata = &md
						st.Partitions = append(st.Partitions, sp)
					}
					sg.Topics = append(sg.Topics, st)
				}
				resp.Groups = append(resp.Groups, sg)
			}
			return resp
		}
		var parts []group.TopicPartition
		if req.Topics != nil || req.Version < 2 {
			parts = []group.TopicPartition{}
			for _, rt := range req.Topics {
				for _, p := range rt.Partitions {
					parts = append(parts, group.TopicPartition{Topic: rt.Topic, Partition: p})
				}
			}
		}
		got, err := c.s.eng.Groups().Fetch(ctx, req.Group, parts)
		code := groupErrorCode(err)
		if err != nil && req.Version < 2 {
			// No top-level error before v2: every partition carries it.
			for i := range parts {
				got = append(got, group.PartitionCommit{TopicPartition: parts[i], Commit: group.Commit{Offset: -1, LeaderEpoch: -1}})
			}
		}
		resp.ErrorCode = code
		for _, t := range groupByTopic(got) {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = t[0].Topic
			for _, pc := range t {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch = pc.Partition, pc.Offset, pc.LeaderEpoch
				md := pc.Metadata
				sp.Metadata = &md
				if req.Version < 2 {
					sp.ErrorCode = code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// groupByTopic splits commits into runs of the same topic, keeping order
// (requests list each topic once; Fetch sorts everything it returns).
func groupByTopic(pcs []group.PartitionCommit) [][]group.PartitionCommit {
	var out [][]group.PartitionCommit
	idx := map[string]int{}
	for _, pc := range pcs {
		i, ok := idx[pc.Topic]
		if !ok {
			i = len(out)
			idx[pc.Topic] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], pc)
	}
	return out
}
