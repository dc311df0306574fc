package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

func handleMetadata(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	return func() kmsg.Response {
		s := c.s
		eng := s.eng
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		host, port := c.advertised()
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: s.opts.NodeID, Host: host, Port: port}}
		cid := eng.ClusterID()
		resp.ClusterID = &cid
		resp.ControllerID = s.opts.NodeID
		// v0 has no way to ask for all topics but an empty list; later
		// versions use a null list.
		all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
		if all {
			for _, t := range eng.Topics() {
				resp.Topics = append(resp.Topics, s.topicMetadata(t, req))
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
				t, err = eng.EnsureTopic(ctx, *rt.Topic)
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
			resp.Topics = append(resp.Topics, s.topicMetadata(t, req))
		}
		return resp
	}
}

func (s *Server) topicMetadata(t *engine.Topic, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name()
	mt.Topic = &name
	mt.TopicID = t.ID()
	mt.IsInternal = t.Internal()
	node := s.opts.NodeID
	for _, p := range t.Partitions() {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.ID()
		mp.Leader = node
		mp.LeaderEpoch = 0
		mp.Replicas = []int32{node}
		mp.ISR = []int32{node}
		mt.Partitions = append(mt.Partitions, mp)
	}
	if !req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = -2147483648
	}
	return mt
}
