package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleDescribeShareGroupOffsets answers each share-partition's start
// offset (and, v1+, lag); null topics ask for every partition with state.
func handleDescribeShareGroupOffsets(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
		for _, rg := range req.Groups {
			sg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			sg.GroupID = rg.GroupID
			if err := c.coordinates(rg.GroupID); err != nil {
				sg.ErrorCode, sg.ErrorMessage = groupErrorCode(err), errMsg(err)
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			if !eng.IsShareGroup(rg.GroupID) {
				sg.ErrorCode = kerr.GroupIDNotFound.Code
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			want := map[string][]int32{}
			if rg.Topics == nil {
				all, err := eng.ShareTopics(ctx, rg.GroupID)
				if err != nil {
					sg.ErrorCode, sg.ErrorMessage = errorCode(err), errMsg(err)
					resp.Groups = append(resp.Groups, sg)
					continue
				}
				want = all
			}
			order := []string{}
			for _, rt := range rg.Topics {
				want[rt.Topic] = append(want[rt.Topic], rt.Partitions...)
			}
			for t := range want {
				order = append(order, t)
			}
			slices.Sort(order)
			for _, name := range order {
				if rg.Topics == nil && !c.authorize(auth.OpDescribe, auth.ResTopic, name) {
					continue
				}
				st := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				st.Topic = name
				t := eng.Topic(name)
				if t != nil {
					st.TopicID = t.ID()
				}
				ps := want[name]
				slices.Sort(ps)
				for _, id := range ps {
					sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					sp.Partition, sp.StartOffset, sp.LeaderEpoch, sp.Lag = id, -1, 0, -1
					switch {
					case rg.Topics != nil && !c.authorize(auth.OpDescribe, auth.ResTopic, name):
						sp.ErrorCode = topicDenied
					case t == nil || t.Partition(id) == nil:
						sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					default:
						s, err := eng.ShareState(ctx, rg.GroupID, t.Partition(id))
						if err != nil {
							sp.ErrorCode, sp.ErrorMessage = errorCode(err), errMsg(err)
							break
						}
						sp.StartOffset = s.StartOffset
						if s.StartOffset >= 0 {
							sp.Lag = s.Lag
						}
					}
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
}

// aclDescribeShareGroupOffsets: DESCRIBE on each group; DESCRIBE on topics
// in the handler.
func aclDescribeShareGroupOffsets(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeShareGroupOffsetsRequest)
	var out []refused[kmsg.DescribeShareGroupOffsetsRequestGroup]
	req.Groups, out = sift(req.Groups, func(g *kmsg.DescribeShareGroupOffsetsRequestGroup) int16 {
		return c.groupCode(auth.OpDescribe, g.GroupID)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeShareGroupOffsetsResponse)
		for _, o := range out {
			sg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			sg.GroupID, sg.ErrorCode = o.item.GroupID, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}

// handleAlterShareGroupOffsets sets share-partition start offsets of an
// empty share group (creating the group, as Kafka does).
func handleAlterShareGroupOffsets(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		if err := c.coordinates(req.GroupID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = groupErrorCode(err), errMsg(err)
			return resp
		}
		if eng.Groups().Exists(req.GroupID) {
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			return resp
		}
		if g, ok := eng.ShareDescribe(req.GroupID); ok && len(g.Members) > 0 {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp
		}
		for _, rt := range req.Topics {
			st := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			st.Topic = rt.Topic
			t := eng.Topic(rt.Topic)
			if t != nil {
				st.TopicID = t.ID()
			}
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				switch {
				case !c.authorize(auth.OpRead, auth.ResTopic, rt.Topic):
					sp.ErrorCode = topicDenied
				case t == nil || t.Partition(rp.Partition) == nil:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					err := eng.AlterShareOffset(ctx, req.GroupID, t.Partition(rp.Partition), rp.StartOffset)
					sp.ErrorCode, sp.ErrorMessage = shareErrorCode(err), errMsg(err)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// aclAlterShareGroupOffsets: READ on the group (as Kafka: altering offsets
// is what reading does); READ on topics in the handler.
func aclAlterShareGroupOffsets(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.AlterShareGroupOffsetsRequest)
	if code := c.groupCode(auth.OpRead, req.GroupID); code != 0 {
		resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}

// handleDeleteShareGroupOffsets removes an empty share group's state on
// whole topics: it starts over from share.auto.offset.reset there.
func handleDeleteShareGroupOffsets(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		if err := c.coordinates(req.GroupID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = groupErrorCode(err), errMsg(err)
			return resp
		}
		if !eng.IsShareGroup(req.GroupID) {
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			return resp
		}
		if g, ok := eng.ShareDescribe(req.GroupID); ok && len(g.Members) > 0 {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp
		}
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			st.Topic = rt.Topic
			if t := eng.Topic(rt.Topic); t != nil {
				st.TopicID = t.ID()
			}
			if !c.authorize(auth.OpRead, auth.ResTopic, rt.Topic) {
				st.ErrorCode = topicDenied
			} else {
				err := eng.DeleteShareOffsets(ctx, req.GroupID, rt.Topic)
				st.ErrorCode, st.ErrorMessage = shareErrorCode(err), errMsg(err)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// aclDeleteShareGroupOffsets: DELETE on the group; READ on topics in the
// handler (as Kafka).
func aclDeleteShareGroupOffsets(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteShareGroupOffsetsRequest)
	if code := c.groupCode(auth.OpDelete, req.GroupID); code != 0 {
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}
