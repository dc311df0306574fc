package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleDeleteACLs(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
		var filters []auth.Filter
		var where []int
		for i, rf := range req.Filters {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
			f := auth.Filter{
				ResourceType: auth.ResourceType(rf.ResourceType),
				Pattern:      aclPattern(req.Version, rf.ResourcePatternType),
				Resource:     rf.ResourceName,
				Principal:    rf.Principal,
				Host:         rf.Host,
				Operation:    auth.Operation(rf.Operation),
				Permission:   auth.Permission(rf.PermissionType),
			}
			if err := f.Validate(); err != nil {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errMsg(err)
				continue
			}
			filters = append(filters, f)
			where = append(where, i)
		}
		deleted, err := c.s.opts.Auth.DeleteACLs(ctx, filters)
		for fi, i := range where {
			r := &resp.Results[i]
			if err != nil {
				r.ErrorCode, r.ErrorMessage = kerr.UnknownServerError.Code, errMsg(err)
				continue
			}
			for _, a := range deleted[fi] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.Resource
				m.ResourcePatternType = kmsg.ACLResourcePatternType(a.Pattern)
				m.Principal, m.Host = a.Principal, a.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
				r.MatchingACLs = append(r.MatchingACLs, m)
			}
		}
		if err != nil {
			c.s.log.Warn("delete ACLs", "err", err)
		}
		return resp
	}
}

// aclDeleteACLs: ALTER on the cluster.
func aclDeleteACLs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteACLsRequest)
	if !c.authorizeCluster(auth.OpAlter) {
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = clusterDenied, kmsg.StringPtr(notClusterAuthorized)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	return nil, nil
}
