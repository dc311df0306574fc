package group

import "time"

// The group's one timer and the deadlines it enforces: member sessions,
// the join and sync phases, and member ids handed out but not yet used.

// reschedule sets the group's timer for its next deadline. A timer set
// earlier than needed is harmless: onTimer acts on what is due and sets
// the next.
func (g *group) reschedule() {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range g.members {
		if m.join == nil && m.sync == nil {
			consider(m.deadline)
		}
	}
	for _, t := range g.pending {
		consider(t)
	}
	if g.state == PreparingRebalance {
		consider(g.joinDeadline)
	}
	consider(g.syncDeadline)
	g.considerConsumerDeadlines(consider)
	if next.IsZero() || g.state == Dead {
		return
	}
	if !g.wakeAt.IsZero() && !g.wakeAt.After(next) {
		return
	}
	g.wakeAt = next
	if g.timer == nil {
		g.timer = time.AfterFunc(time.Until(next), g.onTimer)
	} else {
		g.timer.Reset(time.Until(next))
	}
}

func (g *group) onTimer() {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Checked under g.mu: Close shuts each group down under it, so a
	// timer that fired meanwhile sees the close and sets no new timer.
	if g.gone || g.c.isClosed() {
		return
	}
	g.wakeAt = time.Time{}
	if g.state == Dead {
		return
	}
	g.expire(time.Now())
	g.reschedule()
}

// expire acts on every deadline that has passed.
func (g *group) expire(now time.Time) {
	for id, t := range g.pending {
		if !now.Before(t) {
			delete(g.pending, id)
		}
	}
	if g.state == PreparingRebalance && !now.Before(g.joinDeadline) {
		if g.initialJoin && g.newMemberAdded && g.joinRemaining > 0 {
			d := min(g.c.opts.InitialRebalanceDelay, g.joinRemaining)
			g.joinDeadline = now.Add(d)
			g.joinRemaining -= d
			g.newMemberAdded = false
		} else {
			g.initialJoin = false
			g.completeJoin(now)
		}
	}
	if !g.syncDeadline.IsZero() && !now.Before(g.syncDeadline) {
		g.syncDeadline = time.Time{}
		for _, m := range g.sortedMembers() {
			if m.awaitingSync && g.members[m.id] == m {
				g.removeMember(m, "did not sync in time", now)
			}
		}
	}
	for _, m := range g.sortedMembers() {
		if m.join == nil && m.sync == nil && !now.Before(m.deadline) && g.members[m.id] == m {
			g.removeMember(m, "session timed out", now)
		}
	}
	g.maybeCompleteJoin(now)
	g.expireConsumers(now)
}
