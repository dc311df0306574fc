package group

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// State is a classic group's state, named as Kafka names them.
type State int

// The states of Kafka's classic group state machine.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// ParseState parses a state name, case-insensitively as Kafka does in
// ListGroups filters.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if strings.EqualFold(n, name) {
			return State(i), true
		}
	}
	return 0, false
}

// Protocol is one assignment protocol a member supports, with its
// metadata (opaque to the coordinator).
type Protocol struct {
	Name     string
	Metadata []byte
}

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

// HeartbeatRequest is a Heartbeat.
type HeartbeatRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
}

// LeaveMember is one member of a LeaveGroup.
type LeaveMember struct {
	MemberID   string
	InstanceID string
	Reason     string
}

type joinReply struct {
	res JoinResult
	err error
}

type syncReply struct {
	res SyncResult
	err error
}

type member struct {
	id, instance         string
	clientID, clientHost string
	session, rebalance   time.Duration
	protocols            []Protocol
	assignment           []byte
	// deadline is when the member expires unless it heartbeats; a member
	// with a parked JoinGroup or SyncGroup does not expire.
	deadline time.Time
	join     chan joinReply // a parked JoinGroup, answered once
	sync     chan syncReply // a parked SyncGroup, answered once
	// awaitingSync: the member got this generation's JoinGroup answer but
	// has not sent SyncGroup; it must by the group's syncDeadline.
	awaitingSync bool
	// isNew: the member has not yet been through a completed join; if it
	// gives up its first JoinGroup it is dropped rather than waited for.
	isNew bool
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// matches reports whether ps is exactly what m joined with, so a rejoin
// changes nothing.
func (m *member) matches(ps []Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

func (m *member) answerJoin(r joinReply) {
	if m.join != nil {
		m.join <- r
		m.join = nil
	}
}

func (m *member) answerSync(r syncReply) {
	if m.sync != nil {
		m.sync <- r
		m.sync = nil
	}
}

type group struct {
	c    *Coordinator
	name string

	// commitMu serializes offset writes, loads and the group's deletion so
	// that Redis sees them in the order memory does. It is taken before
	// mu, never while holding it.
	commitMu sync.Mutex

	mu sync.Mutex
	// loaded: offsets have been read from Redis.
	loaded bool
	// stored: the group has an entry in the registry (it has commits or
	// stored membership), so it outlives a restart.
	stored       bool
	offsets      map[TopicPartition]Commit
	state        State
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	statics      map[string]string    // instance id -> member id
	pending      map[string]time.Time // ids handed out with ErrMemberIDRequired -> expiry

	// joinDeadline ends the join phase (PreparingRebalance) at the latest.
	joinDeadline time.Time
	// initialJoin: the rebalance started from Empty and waits out the
	// initial delay even when everyone has joined, extending it (up to
	// joinRemaining more) while new members keep arriving.
	initialJoin    bool
	newMemberAdded bool
	joinRemaining  time.Duration
	// syncDeadline: members still awaitingSync then are removed.
	syncDeadline time.Time

	timer  *time.Timer
	wakeAt time.Time // when timer fires; zero if not set
}

func (c *Coordinator) newGroup(name string) *group {
	return &group{
		c:       c,
		name:    name,
		offsets: make(map[TopicPartition]Commit),
		members: make(map[string]*member),
		statics: make(map[string]string),
		pending: make(map[string]time.Time),
	}
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
	if req.MemberID == "" {
		g = c.getOrCreate(req.Group)
		if g == nil {
			return fail(ErrNotCoordinator)
		}
	} else if g = c.lookup(req.Group); g == nil {
		return fail(ErrUnknownMemberID)
	}
	// Whether the group has commits decides what becomes of it when it
	// empties (see persist).
	if err := g.ensureLoaded(ctx); err != nil {
		return fail(err)
	}
	g.mu.Lock()
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

// parkSlack is added to a parked call's own timeout for its safety cap.
const parkSlack = 5 * time.Second

// awaitParked waits for a parked JoinGroup or SyncGroup's answer on ch, up
// to limit or the end of ctx. It returns with g.mu held, so that a caller
// giving up can unpark its member without racing an answer; an answer
// that arrived meanwhile is still returned. abandon is the error to give
// up with: REBALANCE_IN_PROGRESS on timeout, NOT_COORDINATOR when the
// connection or server is going away.
func awaitParked[R any](ctx context.Context, g *group, ch chan R, limit time.Duration) (r R, answered bool, abandon error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	abandon = ErrRebalanceInProgress
	select {
	case r = <-ch:
		g.mu.Lock()
		return r, true, nil
	case <-timer.C:
	case <-ctx.Done():
		abandon = ErrNotCoordinator
	}
	g.mu.Lock()
	select {
	case r = <-ch:
		return r, true, nil
	default:
	}
	return r, false, abandon
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

// fenced reports a static member's instance id now belonging to another
// member id.
func (g *group) fenced(instance, memberID string) bool {
	if instance == "" {
		return false
	}
	id, ok := g.statics[instance]
	return ok && id != memberID
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
		g.maybeForget()
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

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
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

// Sync handles a SyncGroup. During CompletingRebalance it waits (bounded
// by ctx) for the leader's assignment.
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	if req.Group == "" {
		return SyncResult{}, ErrInvalidGroupID
	}
	g := c.lookup(req.Group)
	if g == nil {
		return SyncResult{}, ErrUnknownMemberID
	}
	g.mu.Lock()
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

// Heartbeat handles a Heartbeat: it keeps the member alive and tells it
// whether a rebalance is running.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	g := c.lookup(req.Group)
	if g == nil {
		return ErrUnknownMemberID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
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

// Leave handles a LeaveGroup: per member errors, and an error for the
// whole request.
func (c *Coordinator) Leave(name string, members []LeaveMember) ([]error, error) {
	if name == "" {
		return nil, ErrInvalidGroupID
	}
	errs := make([]error, len(members))
	g := c.lookup(name)
	if g == nil {
		for i := range errs {
			errs[i] = ErrUnknownMemberID
		}
		return errs, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead {
		return nil, ErrCoordinatorNotAvailable
	}
	now := time.Now()
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
	g.maybeForget()
	g.reschedule()
	return errs, nil
}

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
	if g.c.isClosed() {
		return
	}
	g.wakeAt = time.Time{}
	if g.state == Dead {
		return
	}
	g.expire(time.Now())
	g.maybeForget()
	g.reschedule()
}

// maybeForget drops a group that has nothing left: no members, no
// pending joins, no commits. Kafka's periodic cleanup does the same; here
// it happens at once. Callers still holding the group see it Dead and
// tell their clients to retry, which finds a fresh group.
func (g *group) maybeForget() {
	if g.state != Empty || len(g.members) > 0 || len(g.pending) > 0 || g.stored {
		return
	}
	g.state = Dead
	if g.timer != nil {
		g.timer.Stop()
	}
	g.c.forget(g)
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
}

// shutdown answers every parked call and stops the timer.
func (g *group) shutdown() {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.wakeAt = time.Time{}
	for _, m := range g.members {
		m.answerJoin(joinReply{res: JoinResult{MemberID: m.id, Generation: -1}, err: ErrNotCoordinator})
		m.answerSync(syncReply{err: ErrNotCoordinator})
	}
}
