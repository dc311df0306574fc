package group

import "fmt"

// validateConsumerCommit applies KIP-848's checks to a commit to a
// consumer group, under g.mu. A commit from outside the group (no member
// id, epoch -1) needs an empty group. A member's epoch may not be ahead of
// its own (STALE_MEMBER_EPOCH). A commit from an earlier epoch is taken
// (as Kafka 4.3 does, so a commit racing an epoch bump is not lost) except
// for a partition the member was given after that epoch: that one is
// stale, in errs.
func (g *group) validateConsumerCommit(req CommitRequest, errs []error) error {
	cg := g.cg
	if req.MemberID == "" && req.Generation < 0 {
		if len(cg.members) > 0 {
			return fmt.Errorf("%w: group %q has members; commits need a member id and epoch", ErrUnknownMemberID, g.name)
		}
		return nil
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
	}
	if m.classic != nil && req.Generation != m.epoch {
		// A classic member commits with its generation.
		return fmt.Errorf("%w: %d, member is at %d", ErrIllegalGeneration, req.Generation, m.epoch)
	}
	if req.Generation > m.epoch {
		return fmt.Errorf("%w: commit at epoch %d, member is at %d", ErrStaleMemberEpoch, req.Generation, m.epoch)
	}
	if req.Generation == m.epoch {
		return nil
	}
	ids := g.topicIDs()
	for i, o := range req.Offsets {
		id, ok := ids[o.Topic]
		if !ok || !m.assigned.has(id, o.Partition) {
			continue
		}
		if at, ok := m.assignedAt[partKey{id, o.Partition}]; ok && at > req.Generation {
			errs[i] = fmt.Errorf("%w: commit at epoch %d for %s/%d, given to the member at epoch %d", ErrStaleMemberEpoch, req.Generation, o.Topic, o.Partition, at)
		}
	}
	return nil
}

// ValidateFetchMember checks an OffsetFetch v9+ sent by a consumer group
// member (epoch >= 0): it must be a member, at its epoch.
func (c *Coordinator) ValidateFetchMember(name, memberID string, epoch int32) error {
	if epoch < 0 {
		return nil
	}
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, name)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: %q", ErrUnknownMemberID, memberID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return notOwned(name)
	}
	if g.cg == nil {
		return nil // a classic group: OffsetFetch carries no generation check
	}
	m := g.cg.members[memberID]
	if m == nil {
		return fmt.Errorf("%w: %q", ErrUnknownMemberID, memberID)
	}
	if epoch != m.epoch {
		return fmt.Errorf("%w: fetch at epoch %d, member is at %d", ErrStaleMemberEpoch, epoch, m.epoch)
	}
	return nil
}

// topicIDs maps the names of existing topics to their ids.
func (g *group) topicIDs() map[string]TopicID {
	ts := g.c.opts.Consumer.Topics()
	out := make(map[string]TopicID, len(ts))
	for _, t := range ts {
		out[t.Name] = t.ID
	}
	return out
}

// consumerSubscribedTopics: the topics the members' subscriptions
// resolve to; under g.mu.
func (g *group) consumerSubscribedTopics() []string {
	ts, _ := g.cg.subscribed(g.c.opts.Consumer.Topics())
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// leaveConsumerProtocol is called before a classic JoinGroup, under g.mu:
// an empty consumer group becomes a classic group; one with members
// refuses the join, as Kafka does without online migration.
func (g *group) leaveConsumerProtocol() error {
	if g.cg == nil {
		return nil
	}
	if len(g.cg.members) > 0 {
		return fmt.Errorf("%w: %q is a consumer group with members", ErrInconsistentProtocol, g.name)
	}
	g.cg = nil
	return nil
}

// IsConsumerGroup reports whether the named group is a consumer group
// (KIP-848), which DescribeGroups does not describe.
func (c *Coordinator) IsConsumerGroup(name string) bool {
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, name)
	if g == nil || err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cg != nil && g.state != Dead
}
