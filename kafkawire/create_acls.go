package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleCreateACLs(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
		var acls []auth.ACL
		var where []int // resp.Results index of acls[i]
		for i, cr := range req.Creations {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			a := auth.ACL{
				Principal:    cr.Principal,
				Host:         cr.Host,
				ResourceType: auth.ResourceType(cr.ResourceType),
				Pattern:      aclPattern(req.Version, cr.ResourcePatternType),
				Resource:     cr.ResourceName,
				Operation:    auth.Operation(cr.Operation),
				Permission:   auth.Permission(cr.PermissionType),
			}
			if err := a.Validate(); err != nil {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errMsg(err)
				continue
			}
			acls = append(acls, a)
			where = append(where, i)
		}
		if err := c.s.opts.Auth.CreateACLs(ctx, acls); err != nil {
			c.s.log.Warn("create ACLs", "err", err)
			for _, i := range where {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, errMsg(err)
			}
		}
		return resp
	}
}

// aclCreateACLs: ALTER on the cluster.
func aclCreateACLs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.CreateACLsRequest)
	if !c.authorizeCluster(auth.OpAlter) {
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = clusterDenied, kmsg.StringPtr(notClusterAuthorized)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	return nil, nil
}
