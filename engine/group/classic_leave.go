package group

import "time"

// Members leaving: by LeaveGroup, or taken out by the coordinator.

// LeaveMember is one member of a LeaveGroup.
type LeaveMember struct {
	MemberID   string
	InstanceID string
	Reason     string
}

// Leave handles a LeaveGroup: per member errors, and an error for the
// whole request.
func (c *Coordinator) Leave(name string, members []LeaveMember) ([]error, error) {
	if name == "" {
		return nil, ErrInvalidGroupID
	}
	errs := make([]error, len(members))
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		for i := range errs {
			errs[i] = ErrUnknownMemberID
		}
		return errs, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return nil, notOwned(name)
	}
	if g.state == Dead {
		return nil, ErrCoordinatorNotAvailable
	}
	now := time.Now()
	if g.cg != nil {
		return g.classicLeave(members, now), nil
	}
	for i, lm := range members {
		reason := "left"
		if lm.Reason != "" {
			reason = "left: " + lm.Reason
		}
		if lm.InstanceID != "" {
			id, ok := g.statics[lm.InstanceID]
			switch {
			case !ok:
				errs[i] = ErrUnknownMemberID
			case lm.MemberID != "" && lm.MemberID != id:
				errs[i] = ErrFencedInstanceID
			default:
				g.removeMember(g.members[id], reason, now)
			}
			continue
		}
		if _, ok := g.pending[lm.MemberID]; ok {
			delete(g.pending, lm.MemberID)
			g.maybeCompleteJoin(now)
			continue
		}
		m := g.members[lm.MemberID]
		if m == nil {
			errs[i] = ErrUnknownMemberID
			continue
		}
		g.removeMember(m, reason, now)
	}
	g.reschedule()
	return errs, nil
}

// dropMember takes m out of the group without starting a rebalance.
func (g *group) dropMember(m *member, reason string) {
	m.answerJoin(joinReply{res: JoinResult{MemberID: m.id, Generation: -1}, err: ErrUnknownMemberID})
	m.answerSync(syncReply{err: ErrUnknownMemberID})
	delete(g.members, m.id)
	if m.instance != "" && g.statics[m.instance] == m.id {
		delete(g.statics, m.instance)
	}
	if g.leader == m.id {
		g.leader = ""
		// Prefer a member already back in the join phase.
		for _, o := range g.sortedMembers() {
			if g.leader == "" || o.join != nil && g.members[g.leader].join == nil {
				g.leader = o.id
			}
		}
	}
	g.c.log.Info("member left group", "group", g.name, "member", m.id, "instance", m.instance, "reason", reason)
}

// removeMember takes m out of the group and rebalances the rest.
func (g *group) removeMember(m *member, reason string, now time.Time) {
	g.dropMember(m, reason)
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance("member "+m.id+" "+reason, now)
	}
	g.maybeCompleteJoin(now)
}
