package group

import "time"

// The join phase of a rebalance: starting it, ending it with the next
// generation, and choosing that generation's protocol.

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// prepareRebalance starts a join phase: every member must rejoin within
// the rebalance timeout.
func (g *group) prepareRebalance(reason string, now time.Time) {
	if g.state == CompletingRebalance {
		// The assignment being synced is void; parked syncs must rejoin.
		for _, m := range g.members {
			m.assignment = nil
			m.answerSync(syncReply{err: ErrRebalanceInProgress})
		}
	}
	for _, m := range g.members {
		m.awaitingSync = false
	}
	g.syncDeadline = time.Time{}
	g.initialJoin = g.state == Empty
	timeout := g.maxRebalanceTimeout()
	if g.initialJoin {
		d := min(g.c.opts.InitialRebalanceDelay, timeout)
		g.joinDeadline = now.Add(d)
		g.joinRemaining = timeout - d
		g.newMemberAdded = false
	} else {
		g.joinDeadline = now.Add(timeout)
	}
	g.c.log.Info("group rebalancing", "group", g.name, "generation", g.generation, "from", g.state, "members", len(g.members), "reason", reason)
	g.state = PreparingRebalance
}

func (g *group) maybeCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance || g.initialJoin || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	g.completeJoin(now)
}

// completeJoin ends the join phase: members that did not rejoin are
// dropped, the next generation starts and every parked join is answered,
// the leader's with the members to assign.
func (g *group) completeJoin(now time.Time) {
	for _, m := range g.members {
		if m.join == nil {
			g.dropMember(m, "did not rejoin in time")
		}
	}
	g.initialJoin = false
	g.joinDeadline = time.Time{}
	g.generation++
	if len(g.members) == 0 {
		g.state = Empty
		g.protocol = ""
		g.leader = ""
		g.c.log.Info("group empty", "group", g.name, "generation", g.generation)
		g.persist()
		return
	}
	g.protocol = g.selectProtocol()
	if g.members[g.leader] == nil {
		g.leader = g.sortedMembers()[0].id
	}
	g.state = CompletingRebalance
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	g.c.log.Info("group generation formed", "group", g.name, "generation", g.generation, "protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	// Stored before anyone learns the generation, so a restart never
	// hands the same number out again.
	g.persist()
	for _, m := range g.members {
		res := g.joinResult(m)
		m.answerJoin(joinReply{res: res})
		m.isNew = false
		m.awaitingSync = true
		m.deadline = now.Add(m.session)
	}
}

// joinResult is the current generation's JoinGroup answer for m.
func (g *group) joinResult(m *member) JoinResult {
	res := JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	if m.id == g.leader {
		res.Members = g.memberList()
	}
	return res
}

func (g *group) memberList() []Member {
	ms := g.sortedMembers()
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{MemberID: m.id, InstanceID: m.instance, Metadata: m.metadataFor(g.protocol)}
	}
	return out
}

// selectProtocol picks the protocol for the next generation: among those
// every member supports, the one most members prefer (Kafka's vote); ties
// go to the leader's preference.
func (g *group) selectProtocol() string {
	ms := g.sortedMembers()
	if len(ms) == 0 {
		return ""
	}
	first := ms[0]
	if l := g.members[g.leader]; l != nil {
		first = l
	}
	candidate := func(name string) bool {
		for _, m := range ms {
			if !m.supports(name) {
				return false
			}
		}
		return true
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if candidate(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range first.protocols {
		if v, ok := votes[p.Name]; ok && v > bestVotes {
			best, bestVotes = p.Name, v
		}
	}
	return best
}
