package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleOffsetFetch returns committed offsets: of one group (v0-v7) or of
// several (v8+); a null topic list (v2+) asks for everything committed.
// With RequireStable (v7+), a partition whose offset is pending in an open
// transaction answers UNSTABLE_OFFSET_COMMIT, per partition as Kafka does
// (clients retry it), in v8+ as well.
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
				// v9+: a consumer group member says who it is (KIP-848).
				var got []group.PartitionCommit
				err := c.coordinates(rg.Group)
				if err == nil {
					err = c.s.eng.Groups().ValidateFetchMember(rg.Group, deref(rg.MemberID), rg.MemberEpoch)
				}
				if err == nil {
					got, err = c.s.eng.Groups().Fetch(ctx, rg.Group, parts, req.RequireStable)
				}
				sg.ErrorCode = groupErrorCode(err)
				for _, t := range groupByTopic(got) {
					st := kmsg.NewOffsetFetchResponseGroupTopic()
					st.Topic = t[0].Topic
					for _, pc := range t {
						sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						sp.Partition, sp.Offset, sp.LeaderEpoch = pc.Partition, pc.Offset, pc.LeaderEpoch
						sp.ErrorCode = groupErrorCode(pc.Err)
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
		var got []group.PartitionCommit
		err := c.coordinates(req.Group)
		if err == nil {
			got, err = c.s.eng.Groups().Fetch(ctx, req.Group, parts, req.RequireStable)
		}
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
				if pc.Err != nil {
					sp.ErrorCode = groupErrorCode(pc.Err)
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

// aclOffsetFetch: DESCRIBE on the group; topics the principal may not
// describe are refused when named and left out when all are asked for.
func aclOffsetFetch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetFetchRequest)
	if req.Version >= 8 {
		return aclOffsetFetchGroups(c, req)
	}
	if code := c.groupCode(auth.OpDescribe, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = code
		if req.Version < 2 {
			// No top-level error before v2: every partition carries it.
			for _, t := range req.Topics {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
		}
		return resp, nil
	}
	var out []refused[kmsg.OffsetFetchRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetFetchRequestTopic) int16 { return c.topicCode(auth.OpDescribe, t.Topic) })
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
			return !c.authorize(auth.OpDescribe, auth.ResTopic, t.Topic)
		})
		for _, o := range out {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, o.code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclOffsetFetchGroups(c *conn, req *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	var outGroups []refused[kmsg.OffsetFetchRequestGroup]
	req.Groups, outGroups = sift(req.Groups, func(g *kmsg.OffsetFetchRequestGroup) int16 { return c.groupCode(auth.OpDescribe, g.Group) })
	outTopics := map[string][]refused[kmsg.OffsetFetchRequestGroupTopic]{}
	for i := range req.Groups {
		g := &req.Groups[i]
		var out []refused[kmsg.OffsetFetchRequestGroupTopic]
		g.Topics, out = sift(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) int16 {
			name := c.topicName(t.Topic, t.TopicID)
			if name == "" {
				return 0
			}
			return c.topicCode(auth.OpDescribe, name)
		})
		if len(out) > 0 {
			outTopics[g.Group] = out
		}
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			sg := &resp.Groups[i]
			sg.Topics = slices.DeleteFunc(sg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
				name := c.topicName(t.Topic, t.TopicID)
				return name != "" && !c.authorize(auth.OpDescribe, auth.ResTopic, name)
			})
			for _, o := range outTopics[sg.Group] {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic, st.TopicID = o.item.Topic, o.item.TopicID
				for _, p := range o.item.Partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, o.code
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
		}
		for _, o := range outGroups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = o.item.Group, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}
