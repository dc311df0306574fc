package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// DescribeAcls, CreateAcls and DeleteAcls manage the ACLs in Auth. They
// are offered only with Options.ACLs: without enforcement, stored ACLs
// would suggest a protection that is not there. Who may call them is
// decided by aclClusterAdmin.

// aclPattern is the pattern type of a request; v0 knows only literals.
func aclPattern(version int16, p kmsg.ACLResourcePatternType) auth.PatternType {
	if version == 0 {
		return auth.PatternLiteral
	}
	return auth.PatternType(p)
}

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
