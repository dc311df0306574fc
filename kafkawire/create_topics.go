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

// aclCreateTopics: CREATE on the cluster or on the topic.
func aclCreateTopics(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.CreateTopicsRequest)
	var out []refused[kmsg.CreateTopicsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.CreateTopicsRequestTopic) int16 {
		if c.mayCreate(t.Topic) {
			return 0
		}
		return topicDenied
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.CreateTopicsResponse)
		for _, o := range out {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = o.item.Topic, o.code
			st.NumPartitions, st.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, st)
		}
	}
}
