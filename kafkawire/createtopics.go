package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

func handleCreateTopics(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		seen := make(map[string]int)
		for _, rt := range req.Topics {
			seen[rt.Topic]++
		}
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			st.NumPartitions, st.ReplicationFactor = -1, -1
			fail := func(code int16, err error) {
				st.ErrorCode = code
				if req.Version >= 1 {
					st.ErrorMessage = errMsg(err)
				}
				resp.Topics = append(resp.Topics, st)
			}
			if seen[rt.Topic] > 1 {
				fail(kerr.InvalidRequest.Code, fmt.Errorf("topic %q named more than once", rt.Topic))
				continue
			}
			if rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 {
				fail(kerr.InvalidReplicationFactor.Code, fmt.Errorf("replication factor %d: korvet is a single node; use 1 (Redis persistence keeps the data)", rt.ReplicationFactor))
				continue
			}
			partitions := rt.NumPartitions
			if len(rt.ReplicaAssignment) > 0 {
				partitions = int32(len(rt.ReplicaAssignment))
			}
			configs := make(map[string]string, len(rt.Configs))
			for _, cf := range rt.Configs {
				if cf.Value != nil {
					configs[cf.Name] = *cf.Value
				}
			}
			t, err := eng.CreateTopic(ctx, rt.Topic, partitions, configs, req.ValidateOnly)
			if err != nil {
				fail(errorCode(err), err)
				continue
			}
			if partitions == -1 {
				partitions = eng.DefaultPartitions()
			}
			st.NumPartitions, st.ReplicationFactor = partitions, 1
			if t != nil {
				st.TopicID = t.ID()
				for _, d := range engine.ConfigDefs() {
					v, src := t.Config(d.Name)
					cf := kmsg.NewCreateTopicsResponseTopicConfig()
					cf.Name, cf.Value, cf.Source = d.Name, &v, configSource(src)
					st.Configs = append(st.Configs, cf)
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// configSource maps an engine config source to Kafka's DescribeConfigs
// source codes.
func configSource(s engine.ConfigSource) int8 {
	switch s {
	case engine.SourceTopic:
		return 1 // DYNAMIC_TOPIC_CONFIG
	case engine.SourceStaticBroker:
		return 4 // STATIC_BROKER_CONFIG
	default:
		return 5 // DEFAULT_CONFIG
	}
}

func handleDeleteTopics(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		type target struct {
			name *string
			id   [16]byte
		}
		var targets []target
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
		for _, rt := range req.Topics {
			targets = append(targets, target{name: rt.Topic, id: rt.TopicID})
		}
		for _, tg := range targets {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID = tg.name, tg.id
			var t *engine.Topic
			if tg.name != nil {
				t = eng.Topic(*tg.name)
			} else {
				t = eng.TopicByID(tg.id)
			}
			if t == nil {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if tg.name == nil {
					st.ErrorCode = kerr.UnknownTopicID.Code
				}
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name := t.Name()
			st.Topic, st.TopicID = &name, t.ID()
			if err := eng.DeleteTopic(ctx, name); err != nil {
				st.ErrorCode = errorCode(err)
				if req.Version >= 5 {
					st.ErrorMessage = errMsg(err)
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// handleInitProducerID hands out producer ids for idempotent producers
// (the default in current clients); partitions then check their sequence
// numbers. Transactional ids are refused: korvet has no transactions.
func handleInitProducerID(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if req.TransactionalID != nil {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp
		}
		id, err := c.s.eng.NewProducerID(ctx)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return resp
	}
}
