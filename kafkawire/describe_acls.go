package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleDescribeACLs(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeACLsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
		f := auth.Filter{
			ResourceType: auth.ResourceType(req.ResourceType),
			Pattern:      aclPattern(req.Version, req.ResourcePatternType),
			Resource:     req.ResourceName,
			Principal:    req.Principal,
			Host:         req.Host,
			Operation:    auth.Operation(req.Operation),
			Permission:   auth.Permission(req.PermissionType),
		}
		if err := f.Validate(); err != nil {
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errMsg(err)
			return resp
		}
		type resource struct {
			rt      auth.ResourceType
			name    string
			pattern auth.PatternType
		}
		at := map[resource]int{}
		for _, a := range c.s.opts.Auth.ACLs(f) {
			k := resource{a.ResourceType, a.Resource, a.Pattern}
			i, ok := at[k]
			if !ok {
				i = len(resp.Resources)
				at[k] = i
				r := kmsg.NewDescribeACLsResponseResource()
				r.ResourceType = kmsg.ACLResourceType(a.ResourceType)
				r.ResourceName = a.Resource
				r.ResourcePatternType = kmsg.ACLResourcePatternType(a.Pattern)
				resp.Resources = append(resp.Resources, r)
			}
			ra := kmsg.NewDescribeACLsResponseResourceACL()
			ra.Principal, ra.Host = a.Principal, a.Host
			ra.Operation, ra.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, ra)
		}
		return resp
	}
}

// aclDescribeACLs: DESCRIBE on the cluster.
func aclDescribeACLs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeACLsRequest)
	if !c.authorizeCluster(auth.OpDescribe) {
		resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = clusterDenied, kmsg.StringPtr(notClusterAuthorized)
		return resp, nil
	}
	return nil, nil
}
