package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

func handleIncrementalAlterConfigs(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
				err := c.s.eng.IncrementalAlterGroupConfigs(ctx, rr.ResourceName, configOps(rr.Configs), req.ValidateOnly)
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMsg(err)
				resp.Resources = append(resp.Resources, sr)
				continue
			}
			err := alterTopicOnly(rr.ResourceType, func() error {
				ops := make([]engine.ConfigOp, 0, len(rr.Configs))
				for _, cf := range rr.Configs {
					op := engine.ConfigOp{Name: cf.Name, Op: int8(cf.Op)}
					if cf.Value != nil {
						op.Value = *cf.Value
					}
					ops = append(ops, op)
				}
				return c.s.eng.IncrementalAlterConfigs(ctx, rr.ResourceName, ops, req.ValidateOnly)
			})
			sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMsg(err)
			resp.Resources = append(resp.Resources, sr)
		}
		return resp
	}
}

// aclIncrementalAlterConfigs: ALTER_CONFIGS on each resource.
func aclIncrementalAlterConfigs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.IncrementalAlterConfigsRequest)
	var out []refused[kmsg.IncrementalAlterConfigsRequestResource]
	req.Resources, out = sift(req.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return c.configCode(auth.OpAlterConfigs, r.ResourceType, r.ResourceName)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		for _, o := range out {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = o.item.ResourceType, o.item.ResourceName, o.code
			resp.Resources = append(resp.Resources, sr)
		}
	}
}
