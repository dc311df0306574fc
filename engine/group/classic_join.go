package group

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// JoinGroup: first joins and rejoins, member ids, static members taking
// over their old place, and parking a member for the join phase.

// JoinRequest is a JoinGroup.
type JoinRequest struct {
	Group      string
	MemberID   string // "" on a first join
	InstanceID string // static membership (KIP-345); "" for dynamic members
	ClientID   string
	ClientHost string
	// SessionTimeout is how long the member may go without heartbeating.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for the member to
	// rejoin; JoinGroup v0 has none and uses SessionTimeout.
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol
	// RequireKnownMemberID: a first join gets ErrMemberIDRequired and a
	// member id to rejoin with (JoinGroup v4+, KIP-394).
	RequireKnownMemberID bool
	// SupportsSkipAssignment: a rejoining static leader may be told to
	// skip assigning (JoinGroup v9+, KIP-814).
	SupportsSkipAssignment bool
	Reason                 string
}

// Member is one member as the leader sees it in a JoinGroup response.
type Member struct {
	MemberID   string
	InstanceID string
	Metadata   []byte // for the chosen protocol
}

// JoinResult is a JoinGroup answer. With ErrMemberIDRequired only
// MemberID is set.
type JoinResult struct {
	MemberID       string
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	Members        []Member // only for the leader
	SkipAssignment bool
}

type joinReply struct {
	res JoinResult
	err error
}

// newMemberID makes a member id as Kafka does: the client id (or, for
// static members, the instance id, which clients rely on) and a UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Join handles a JoinGroup. When a rebalance must run, it waits (bounded
// by the rebalance and ctx) until the join phase completes.
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	fail := func(err error) (JoinResult, error) { return JoinResult{MemberID: req.MemberID, Generation: -1}, err }
	if req.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	if req.SessionTimeout < c.opts.MinSessionTimeout || req.SessionTimeout > c.opts.MaxSessionTimeout {
		return fail(fmt.Errorf("%w: %v not in [%v, %v]", ErrInvalidSessionTimeout, req.SessionTimeout, c.opts.MinSessionTimeout, c.opts.MaxSessionTimeout))
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fail(fmt.Errorf("%w: a join needs a protocol type and protocols", ErrInconsistentProtocol))
	}
	var g *group
	var err error
	if req.MemberID == "" {
		g, err = c.findOrCreate(ctx, req.Group)
	} else if g, err = c.find(ctx, req.Group); g == nil && err == nil {
		err = ErrUnknownMemberID
	}
	if err != nil {
		return fail(err)
	}
	// Whether the group has commits decides whether the cleanup removes
	// it once it is empty (see cleanup.go).
	if err := g.ensureLoaded(ctx); err != nil {
		return fail(err)
	}
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return fail(notOwned(req.Group))
	}
	if g.cg != nil && len(g.cg.members) > 0 && g.state != Dead {
		res, err := g.classicJoin(req, time.Now())
		g.mu.Unlock()
		return res, err
	}
	if err := g.leaveConsumerProtocol(); err != nil {
		g.mu.Unlock()
		return fail(err)
	}
	m, ch, res, err := g.join(req, time.Now())
	g.reschedule()
	g.mu.Unlock()
	if ch == nil {
		return res, err
	}
	// The join phase ends by its deadline, so this wait is bounded anyway;
	// the cap only guards against a bug leaving a member parked for good.
	r, answered, abandon := awaitParked(ctx, g, ch, req.RebalanceTimeout+c.opts.InitialRebalanceDelay+parkSlack)
	defer g.mu.Unlock()
	if answered {
		return r.res, r.err
	}
	if m.join == ch {
		m.join = nil
		if m.isNew && g.members[m.id] == m {
			g.removeMember(m, "gave up its first join", time.Now())
		}
		g.reschedule()
	}
	return fail(fmt.Errorf("%w: join abandoned", abandon))
}

// join runs a JoinGroup under g.mu: it answers at once (res, err) or
// parks the member and returns the channel its answer will come on.
func (g *group) join(req JoinRequest, now time.Time) (*member, chan joinReply, JoinResult, error) {
	fail := func(err error) (*member, chan joinReply, JoinResult, error) {
		return nil, nil, JoinResult{MemberID: req.MemberID, Generation: -1}, err
	}
	if g.state == Dead {
		return fail(ErrCoordinatorNotAvailable)
	}
	if !g.supports(req) {
		return fail(fmt.Errorf("%w: group %q uses protocol type %q with protocols the member does not offer", ErrInconsistentProtocol, g.name, g.protocolType))
	}
	if req.MemberID == "" {
		if req.InstanceID != "" {
			if old, ok := g.statics[req.InstanceID]; ok {
				return g.rejoinStatic(g.members[old], req, now)
			}
			m := g.addMember(newMemberID(req.InstanceID), req, now)
			return m, g.parkJoin(m, "new static member "+m.id, now), JoinResult{}, nil
		}
		id := newMemberID(req.ClientID)
		if req.RequireKnownMemberID {
			g.pending[id] = now.Add(req.SessionTimeout)
			return nil, nil, JoinResult{MemberID: id, Generation: -1}, ErrMemberIDRequired
		}
		m := g.addMember(id, req, now)
		return m, g.parkJoin(m, "new member "+id, now), JoinResult{}, nil
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		m := g.addMember(req.MemberID, req, now)
		return m, g.parkJoin(m, "new member "+m.id, now), JoinResult{}, nil
	}
	if g.fenced(req.InstanceID, req.MemberID) {
		return fail(ErrFencedInstanceID)
	}
	m := g.members[req.MemberID]
	if m == nil {
		return fail(ErrUnknownMemberID)
	}
	switch g.state {
	case CompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost our answer: give it again.
			return nil, nil, g.joinResult(m), nil
		}
	case Stable:
		if m.id != g.leader && m.matches(req.Protocols) {
			// A follower rejoining with nothing new: no rebalance. The
			// leader rejoining always rebalances; that is how clients
			// ask for one.
			m.deadline = now.Add(m.session)
			return nil, nil, g.joinResult(m), nil
		}
	}
	g.update(m, req)
	return m, g.parkJoin(m, "member "+m.id+" rejoined", now), JoinResult{}, nil
}

// rejoinStatic handles a static member joining without a member id while
// its instance id is known: it takes over the old member's place under a
// new id, fencing whoever used the old one.
func (g *group) rejoinStatic(m *member, req JoinRequest, now time.Time) (*member, chan joinReply, JoinResult, error) {
	oldLeader := g.leader
	m.answerJoin(joinReply{res: JoinResult{MemberID: m.id, Generation: -1}, err: ErrFencedInstanceID})
	m.answerSync(syncReply{err: ErrFencedInstanceID})
	delete(g.members, m.id)
	newID := newMemberID(req.InstanceID)
	if g.leader == m.id {
		g.leader = newID
	}
	m.id = newID
	g.members[newID] = m
	g.statics[req.InstanceID] = newID
	g.update(m, req)
	if g.state == Stable && g.selectProtocol() == g.protocol {
		// Back within its session with nothing changed: no rebalance; it
		// keeps its assignment, which SyncGroup hands back.
		m.deadline = now.Add(m.session)
		res := JoinResult{MemberID: newID, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol}
		if req.SupportsSkipAssignment {
			res.Leader = g.leader
			if newID == g.leader {
				res.Members = g.memberList()
				res.SkipAssignment = true
			}
		} else {
			// Older clients are told the old leader id, so a returning
			// leader does not run an assignment a Stable group would
			// ignore (KIP-345).
			res.Leader = oldLeader
		}
		g.c.log.Info("static member rejoined without rebalance", "group", g.name, "instance", req.InstanceID, "member", newID, "generation", g.generation)
		g.persist()
		return nil, nil, res, nil
	}
	return m, g.parkJoin(m, "static member "+req.InstanceID+" rejoined", now), JoinResult{}, nil
}

// supports reports whether the joining member can be in the group: the
// same protocol type and at least one protocol every other member offers.
func (g *group) supports(req JoinRequest) bool {
	self := req.MemberID
	if req.MemberID == "" && req.InstanceID != "" {
		self = g.statics[req.InstanceID]
	}
	others := 0
	for id := range g.members {
		if id != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if req.ProtocolType != g.protocolType {
		return false
	}
	for _, p := range req.Protocols {
		all := true
		for id, m := range g.members {
			if id != self && !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (g *group) addMember(id string, req JoinRequest, now time.Time) *member {
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	m := &member{id: id, instance: req.InstanceID, isNew: true, deadline: now.Add(req.SessionTimeout)}
	g.update(m, req)
	if g.state == PreparingRebalance && g.initialJoin {
		g.newMemberAdded = true
	}
	g.members[id] = m
	if req.InstanceID != "" {
		g.statics[req.InstanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	return m
}

func (g *group) update(m *member, req JoinRequest) {
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.session, m.rebalance = req.SessionTimeout, req.RebalanceTimeout
	m.protocols = req.Protocols
}

// parkJoin makes m wait for the join phase, starting a rebalance if none
// is running, and returns the channel m's answer will come on.
func (g *group) parkJoin(m *member, reason string, now time.Time) chan joinReply {
	// A member that joins again while parked (a client retry) replaces
	// its earlier request.
	m.answerJoin(joinReply{res: JoinResult{MemberID: m.id, Generation: -1}, err: ErrRebalanceInProgress})
	ch := make(chan joinReply, 1)
	m.join = ch
	if g.state != PreparingRebalance {
		g.prepareRebalance(reason, now)
	}
	g.maybeCompleteJoin(now)
	return ch
}
