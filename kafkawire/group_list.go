package kafkawire

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/group"
)

// handleListGroups lists every group; v4+ may filter by state, v5+ by
// type (korvet's groups are all "classic").
func handleListGroups(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListGroupsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		if len(req.TypesFilter) > 0 {
			classic := false
			for _, t := range req.TypesFilter {
				classic = classic || strings.EqualFold(t, "classic")
			}
			if !classic {
				c.listShareGroups(req, resp)
				return resp
			}
		}
		var states map[group.State]bool
		if len(req.StatesFilter) > 0 {
			// States of other group types ("Assigning", ...) match nothing.
			states = map[group.State]bool{}
			for _, name := range req.StatesFilter {
				if st, ok := group.ParseState(name); ok {
					states[st] = true
				}
			}
		}
		for _, g := range c.s.eng.Groups().List() {
			if states != nil && !states[g.State] {
				continue
			}
			sg := kmsg.NewListGroupsResponseGroup()
			sg.Group, sg.ProtocolType, sg.GroupState, sg.GroupType = g.Group, g.ProtocolType, g.State.String(), "classic"
			resp.Groups = append(resp.Groups, sg)
		}
		c.listShareGroups(req, resp)
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
