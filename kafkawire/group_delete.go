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
		// Only the groups coordinated here are deleted here.
		var ours []string
		for _, name := range req.Groups {
			if c.coordinates(name) == nil {
				ours = append(ours, name)
			}
		}
		errs := c.s.eng.Groups().DeleteGroups(ctx, ours)
		i := 0
		for _, name := range req.Groups {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group = name
			if err := c.coordinates(name); err != nil {
				sg.ErrorCode = groupErrorCode(err)
				resp.Groups = append(resp.Groups, sg)
				continue
			}
			sg.ErrorCode = groupErrorCode(errs[i])
			i++
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
