package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteGroups deletes empty groups with their committed offsets.
func handleDeleteGroups(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		errs := c.s.eng.Groups().DeleteGroups(ctx, req.Groups)
		for i, name := range req.Groups {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group, sg.ErrorCode = name, groupErrorCode(errs[i])
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
}
