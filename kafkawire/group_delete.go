package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleDeleteGroups deletes empty groups with their committed offsets.
func handleDeleteGroups(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		// Only the groups coordinated here are deleted here; the others
		// answer NOT_COORDINATOR. Checked once per group, so the answer
		// matches what was deleted even if the brokers change meanwhile.
		elsewhere := make([]error, len(req.Groups))
		var ours []string
		for i, name := range req.Groups {
			if elsewhere[i] = c.coordinates(name); elsewhere[i] == nil {
				ours = append(ours, name)
			}
		}
		errs := c.s.eng.Groups().DeleteGroups(ctx, ours)
		for i, name := range req.Groups {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group = name
			if elsewhere[i] != nil {
				sg.ErrorCode = groupErrorCode(elsewhere[i])
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			sg.ErrorCode = groupErrorCode(errs[0])
			errs = errs[1:]
			if code, ok := c.deleteShareGroup(ctx, name); ok {
				sg.ErrorCode = code
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
}

// aclDeleteGroups: DELETE on each group.
func aclDeleteGroups(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteGroupsRequest)
	var out []refused[string]
	req.Groups, out = sift(req.Groups, func(g *string) int16 { return c.groupCode(auth.OpDelete, *g) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		for _, o := range out {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group, sg.ErrorCode = o.item, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}
