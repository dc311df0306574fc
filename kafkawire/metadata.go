package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

func handleMetadata(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	return func() kmsg.Response {
		s := c.s
		eng := s.eng
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		nodes := c.nodes()
		for _, n := range nodes {
			resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: n.id, Host: n.host, Port: n.port, Rack: n.rack})
		}
		cid := eng.ClusterID()
		resp.ClusterID = &cid
		resp.ControllerID = controllerID(nodes)
		// v0 has no way to ask for all topics but an empty list; later
		// versions use a null list.
		all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
		if all {
			for _, t := range eng.Topics() {
				resp.Topics = append(resp.Topics, c.topicMetadata(t, req, nodes))
			}
			return resp
		}
		autoCreate := eng.AutoCreate() && (req.Version < 4 || req.AllowAutoTopicCreation)
		for _, rt := range req.Topics {
			var t *engine.Topic
			var err error
			switch {
			case rt.Topic == nil:
				t = eng.TopicByID(rt.TopicID)
				if t == nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.TopicID = rt.TopicID
					mt.ErrorCode = kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
			case autoCreate:
				if t = eng.Topic(*rt.Topic); t != nil {
					break
				}
				if _, err = eng.EnsureTopic(ctx, *rt.Topic); err == nil {
					// As Kafka: the call that creates a topic answers
					// LEADER_NOT_AVAILABLE for it, without partitions;
					// clients ask again and then see it. So a topic
					// deleted a moment ago is not listed as if it had
					// never gone.
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = rt.Topic
					mt.ErrorCode = kerr.LeaderNotAvailable.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
			default:
				if t = eng.Topic(*rt.Topic); t == nil {
					err = engine.ErrUnknownTopic
				}
			}
			if err != nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = errorCode(err)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, c.topicMetadata(t, req, nodes))
		}
		return resp
	}
}

func (c *conn) topicMetadata(t *engine.Topic, req *kmsg.MetadataRequest, nodes []node) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name()
	mt.Topic = &name
	mt.TopicID = t.ID()
	mt.IsInternal = t.Internal()
	for _, p := range t.Partitions() {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.ID()
		mp.Leader, mp.LeaderEpoch, mp.ErrorCode = partitionLeader(p, nodes)
		mp.Replicas = replicas(mp.Leader)
		mp.ISR = replicas(mp.Leader)
		mt.Partitions = append(mt.Partitions, mp)
	}
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = c.topicOperations(name)
	} else {
		mt.AuthorizedOperations = -2147483648 // not asked for
	}
	return mt
}

// aclMetadata: DESCRIBE on each topic, and CREATE on one it would create;
// the answer lists only topics the principal may describe.
func aclMetadata(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.MetadataRequest)
	var out []refused[kmsg.MetadataRequestTopic]
	if all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0; !all {
		autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
		req.Topics, out = sift(req.Topics, func(t *kmsg.MetadataRequestTopic) int16 {
			var name string
			if t.Topic != nil {
				name = *t.Topic
			} else if name = c.topicName("", t.TopicID); name == "" {
				return 0
			}
			switch {
			case !c.authorize(auth.OpDescribe, auth.ResTopic, name):
				return topicDenied
			case t.Topic != nil && autoCreate && c.autoCreates(name):
				return topicDenied
			}
			return 0
		})
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		// Whatever was asked, list only topics the principal may
		// describe: a v0 request pruned to nothing asks for all.
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool {
			return t.Topic != nil && !c.authorize(auth.OpDescribe, auth.ResTopic, *t.Topic)
		})
		for _, o := range out {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = o.item.Topic, o.item.TopicID, o.code
			resp.Topics = append(resp.Topics, mt)
		}
	}
}
