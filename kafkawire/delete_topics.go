package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

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

// aclDeleteTopics: DELETE on each topic, named or by id.
func aclDeleteTopics(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteTopicsRequest)
	var outNames []refused[string]
	var outTopics []refused[kmsg.DeleteTopicsRequestTopic]
	req.TopicNames, outNames = sift(req.TopicNames, func(n *string) int16 { return c.topicCode(auth.OpDelete, *n) })
	req.Topics, outTopics = sift(req.Topics, func(t *kmsg.DeleteTopicsRequestTopic) int16 {
		name := c.topicName(deref(t.Topic), t.TopicID)
		if name == "" {
			return 0
		}
		return c.topicCode(auth.OpDelete, name)
	})
	if len(outNames)+len(outTopics) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteTopicsResponse)
		for _, o := range outNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode = &o.item, o.code
			resp.Topics = append(resp.Topics, st)
		}
		for _, o := range outTopics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			// A topic named by id stays unnamed: no leaking names.
			st.Topic, st.TopicID, st.ErrorCode = o.item.Topic, o.item.TopicID, o.code
			resp.Topics = append(resp.Topics, st)
		}
	}
}
