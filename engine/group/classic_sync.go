package group

import (
	"context"
	"fmt"
	"time"
)

// SyncGroup: the leader hands out the generation's assignments and the
// group becomes Stable.

// SyncRequest is a SyncGroup.
type SyncRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	// ProtocolType and Protocol, when not "", must match the group's
	// (SyncGroup v5+).
	ProtocolType string
	Protocol     string
	// Assignments, sent by the leader, map member ids to assignments.
	Assignments map[string][]byte
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

type syncReply struct {
	res SyncResult
	err error
}

// Sync handles a SyncGroup. During CompletingRebalance it waits (bounded
// by ctx) for the leader's assignment.
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	if req.Group == "" {
		return SyncResult{}, ErrInvalidGroupID
	}
	g, err := c.find(ctx, req.Group)
	if err != nil {
		return SyncResult{}, err
	}
	if g == nil {
		return SyncResult{}, ErrUnknownMemberID
	}
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return SyncResult{}, notOwned(req.Group)
	}
	if g.cg != nil {
		res, err := g.classicSync(req, time.Now())
		g.mu.Unlock()
		return res, err
	}
	m, ch, res, err := g.sync(req, time.Now())
	g.reschedule()
	g.mu.Unlock()
	if ch == nil {
		return res, err
	}
	// The sync phase ends by the group's sync deadline (the largest
	// rebalance timeout); the cap is a guard, as in Join.
	g.mu.Lock()
	limit := g.maxRebalanceTimeout() + parkSlack
	g.mu.Unlock()
	r, answered, abandon := awaitParked(ctx, g, ch, limit)
	defer g.mu.Unlock()
	if answered {
		return r.res, r.err
	}
	if m.sync == ch {
		m.sync = nil
		g.reschedule()
	}
	return SyncResult{}, fmt.Errorf("%w: sync abandoned", abandon)
}

func (g *group) sync(req SyncRequest, now time.Time) (*member, chan syncReply, SyncResult, error) {
	fail := func(err error) (*member, chan syncReply, SyncResult, error) { return nil, nil, SyncResult{}, err }
	if g.state == Dead {
		return fail(ErrCoordinatorNotAvailable)
	}
	if g.fenced(req.InstanceID, req.MemberID) {
		return fail(ErrFencedInstanceID)
	}
	m := g.members[req.MemberID]
	if m == nil {
		return fail(ErrUnknownMemberID)
	}
	if req.Generation != g.generation {
		return fail(fmt.Errorf("%w: %d, group is at %d", ErrIllegalGeneration, req.Generation, g.generation))
	}
	if req.ProtocolType != "" && req.ProtocolType != g.protocolType || req.Protocol != "" && req.Protocol != g.protocol {
		return fail(ErrInconsistentProtocol)
	}
	result := func(m *member) SyncResult {
		return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
	}
	switch g.state {
	case PreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case Stable:
		m.awaitingSync = false
		m.deadline = now.Add(m.session)
		return nil, nil, result(m), nil
	case CompletingRebalance:
	default:
		return fail(ErrUnknownMemberID)
	}
	m.awaitingSync = false
	m.answerSync(syncReply{err: ErrRebalanceInProgress})
	ch := make(chan syncReply, 1)
	m.sync = ch
	if m.id == g.leader {
		for _, o := range g.members {
			o.assignment = req.Assignments[o.id]
		}
		g.state = Stable
		g.c.log.Debug("group stable", "group", g.name, "generation", g.generation)
		g.persist()
		for _, o := range g.members {
			if o.sync != nil {
				o.answerSync(syncReply{res: result(o)})
				o.deadline = now.Add(o.session)
			}
		}
	}
	return m, ch, SyncResult{}, nil
}
