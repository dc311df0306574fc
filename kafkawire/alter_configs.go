package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleAlterConfigs(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterConfigsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range req.Resources {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			err := alterTopicOnly(rr.ResourceType, func() error {
				set := map[string]string{}
				for _, cf := range rr.Configs {
					if cf.Value != nil {
						set[cf.Name] = *cf.Value
					}
				}
				return c.s.eng.AlterConfigs(ctx, rr.ResourceName, set, req.ValidateOnly)
			})
			sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMsg(err)
			resp.Resources = append(resp.Resources, sr)
		}
		return resp
	}
}

// aclAlterConfigs: ALTER_CONFIGS on each resource.
func aclAlterConfigs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.AlterConfigsRequest)
	var out []refused[kmsg.AlterConfigsRequestResource]
	req.Resources, out = sift(req.Resources, func(r *kmsg.AlterConfigsRequestResource) int16 {
		return c.configCode(auth.OpAlterConfigs, r.ResourceType, r.ResourceName)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.AlterConfigsResponse)
		for _, o := range out {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = o.item.ResourceType, o.item.ResourceName, o.code
			resp.Resources = append(resp.Resources, sr)
		}
	}
}
