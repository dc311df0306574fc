package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/share"
)

// Share groups in the classic group APIs (ListGroups, DescribeGroups,
// DeleteGroups): group ids are one namespace for every group type.

// errShareGroupID refuses a classic group API on a share group's id.
var errShareGroupID = fmt.Errorf("%w: the group id belongs to a share group", group.ErrGroupNotFound)

// listShareGroups adds share groups to a ListGroups answer when its type
// and state filters let them through.
func (c *conn) listShareGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "share") }) {
		return
	}
	names := c.s.eng.Share().Names()
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, name := range sorted {
		state := "Empty"
		if names[name] > 0 {
			state = "Stable"
		}
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, state) }) {
			continue
		}
		sg := kmsg.NewListGroupsResponseGroup()
		sg.Group, sg.ProtocolType, sg.GroupState, sg.GroupType = name, "share", state, "share"
		resp.Groups = append(resp.Groups, sg)
	}
}

// describeShareAsClassic answers DescribeGroups for a share group as Kafka
// does: it is not a classic group. False if name is no share group.
func (c *conn) describeShareAsClassic(sg *kmsg.DescribeGroupsResponseGroup) bool {
	if !c.s.eng.IsShareGroup(sg.Group) {
		return false
	}
	sg.ErrorCode = kerr.GroupIDNotFound.Code
	sg.ErrorMessage = errMsg(fmt.Errorf("group %s is a share group, not a classic group: use ShareGroupDescribe", sg.Group))
	sg.State = "Dead"
	return true
}

// deleteShareGroup deletes a share group; ok is false if name is no share
// group.
func (c *conn) deleteShareGroup(ctx context.Context, name string) (code int16, ok bool) {
	if !c.s.eng.IsShareGroup(name) {
		return 0, false
	}
	err := c.s.eng.DeleteShareGroup(ctx, name)
	if errors.Is(err, share.ErrGroupNotFound) {
		return 0, false
	}
	return shareErrorCode(err), true
}
