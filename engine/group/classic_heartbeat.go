package group

import (
	"fmt"
	"time"
)

// Heartbeat: a member keeping its session alive.

// HeartbeatRequest is a Heartbeat.
type HeartbeatRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
}

// Heartbeat handles a Heartbeat: it keeps the member alive and tells it
// whether a rebalance is running.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, req.Group)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrUnknownMemberID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return notOwned(req.Group)
	}
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return g.classicHeartbeat(req, time.Now())
	}
	if g.fenced(req.InstanceID, req.MemberID) {
		return ErrFencedInstanceID
	}
	m := g.members[req.MemberID]
	if m == nil {
		return ErrUnknownMemberID
	}
	if req.Generation != g.generation {
		return fmt.Errorf("%w: %d, group is at %d", ErrIllegalGeneration, req.Generation, g.generation)
	}
	if g.state == Empty {
		return ErrUnknownMemberID
	}
	g.touch(m)
	if g.state == PreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// touch pushes m's expiry out by its session timeout. The deadline only
// moves later, so a timer already set still fires in time.
func (g *group) touch(m *member) {
	m.deadline = time.Now().Add(m.session)
	if g.wakeAt.IsZero() {
		g.reschedule()
	}
}
