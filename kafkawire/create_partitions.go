package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleCreatePartitions(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic = rt.Topic
			err := c.s.eng.CreatePartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly)
			st.ErrorCode, st.ErrorMessage = errorCode(err), errMsg(err)
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// aclCreatePartitions: ALTER on each topic.
func aclCreatePartitions(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.CreatePartitionsRequest)
	var out []refused[kmsg.CreatePartitionsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.CreatePartitionsRequestTopic) int16 { return c.topicCode(auth.OpAlter, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.CreatePartitionsResponse)
		for _, o := range out {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = o.item.Topic, o.code
			resp.Topics = append(resp.Topics, st)
		}
	}
}
