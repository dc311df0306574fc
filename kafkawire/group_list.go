package kafkawire

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleListGroups lists every group this broker coordinates; v4+ may filter by state, v5+ by
// type ("classic", "consumer" (KIP-848) or "share" (KIP-932)),
// case-insensitively as Kafka.
func handleListGroups(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListGroupsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		for _, g := range c.s.eng.Groups().List() {
			if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, g.Type) }) {
				continue
			}
			if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, g.StateName) }) {
				continue
			}
			sg := kmsg.NewListGroupsResponseGroup()
			sg.Group, sg.ProtocolType, sg.GroupState, sg.GroupType = g.Group, g.ProtocolType, g.StateName, g.Type
			resp.Groups = append(resp.Groups, sg)
		}
		c.listShareGroups(req, resp)
		// Each broker lists the groups it coordinates, as Kafka's do:
		// clients ask every broker and merge.
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return c.coordinates(g.Group) != nil })
		return resp
	}
}

// aclListGroups: DESCRIBE on the cluster lists every group; otherwise the
// list holds the groups the principal may describe.
func aclListGroups(c *conn, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if c.authorizeCluster(auth.OpDescribe) {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !c.authorize(auth.OpDescribe, auth.ResGroup, g.Group)
		})
	}
}
