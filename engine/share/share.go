// Package share is the membership side of share groups (KIP-932): members
// and their epochs, the simple assignor, share sessions and the parsing of
// acknowledgement batches. It holds no records and talks to no Redis: the
// engine keeps delivery state in Redis consumer groups (engine/share_*.go).
package share

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// Errors, mapped to Kafka codes by the wire layer.
var (
	ErrInvalidRequest       = errors.New("invalid share group request")
	ErrUnknownMember        = errors.New("unknown share group member")
	ErrFencedEpoch          = errors.New("fenced share group member epoch")
	ErrGroupFull            = errors.New("share group is full")
	ErrSessionNotFound      = errors.New("share session not found")
	ErrInvalidSessionEpoch  = errors.New("invalid share session epoch")
	ErrSessionLimit         = errors.New("too many share sessions")
	ErrInvalidRecordState   = errors.New("record not acquired by this member")
	ErrGroupNotEmpty        = errors.New("share group has members")
	ErrGroupNotFound        = errors.New("share group not found")
	ErrTooManyAcknowledged  = errors.New("too many acknowledged offsets in one request")
	ErrInvalidAcknowledgeTy = errors.New("invalid acknowledge type")
)

// Options configure a Coordinator.
type Options struct {
	// SessionTimeout: a member that does not heartbeat for this long is
	// removed (Kafka's group.share.session.timeout.ms, 45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told (5s in Kafka).
	HeartbeatInterval time.Duration
	// MaxMembers bounds one group's members (Kafka's
	// group.share.max.size, 200).
	MaxMembers int
	// MaxSessions bounds the share sessions of the broker (Kafka's
	// group.share.max.share.sessions).
	MaxSessions int
	// Now is the clock; time.Now when nil (tests move it).
	Now func() time.Time
}

// Member is one member of a share group, as Describe shows it.
type Member struct {
	ID         string
	ClientID   string
	ClientHost string
	Rack       string
	Epoch      int32
	Topics     []string           // subscribed topic names, sorted
	Assignment map[string][]int32 // topic -> partitions, sorted
	last       time.Time
}

// Group is a share group's membership.
type Group struct {
	ID      string
	Epoch   int32 // group epoch: bumped whenever the assignment may change
	Members []Member
}

type group struct {
	id      string
	epoch   int32
	members map[string]*Member
	// meta is the partition count per subscribed topic when the
	// assignment was computed: a change recomputes it.
	meta map[string]int32
}

// Coordinator holds share groups' members and the broker's share
// sessions. It is safe for concurrent use.
type Coordinator struct {
	opts Options

	mu       sync.Mutex
	groups   map[string]*group
	sessions map[SessionKey]*Session
}

// NewCoordinator returns an empty Coordinator.
func NewCoordinator(opts Options) *Coordinator {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 45 * time.Second
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 5 * time.Second
	}
	if opts.MaxMembers <= 0 {
		opts.MaxMembers = 200
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Coordinator{opts: opts, groups: map[string]*group{}, sessions: map[SessionKey]*Session{}}
}

// HeartbeatInterval is what members are told to heartbeat at.
func (c *Coordinator) HeartbeatInterval() time.Duration { return c.opts.HeartbeatInterval }

// HeartbeatRequest is one ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group, MemberID string
	MemberEpoch     int32
	Rack            *string
	Topics          []string // nil: unchanged
	ClientID, Host  string
}

// HeartbeatResult is what the member is told.
type HeartbeatResult struct {
	MemberID   string
	Epoch      int32
	Assignment map[string][]int32 // nil after a leave
	// Joined: the group did not exist before this heartbeat.
	Joined bool
}

// PartitionCounts returns the partitions of each existing topic named.
type PartitionCounts func(topics []string) map[string]int32

// Heartbeat runs one heartbeat: join (epoch 0), leave (epoch -1) or stay.
func (c *Coordinator) Heartbeat(req HeartbeatRequest, counts PartitionCounts) (HeartbeatResult, error) {
	if req.MemberID == "" || len(req.MemberID) > 36 || req.MemberEpoch < -1 {
		return HeartbeatResult{}, ErrInvalidRequest
	}
	if req.MemberEpoch == 0 && len(req.Topics) == 0 {
		return HeartbeatResult{}, ErrInvalidRequest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	g := c.groups[req.Group]
	created := g == nil
	if created {
		if req.MemberEpoch != 0 {
			return HeartbeatResult{}, ErrUnknownMember
		}
		g = &group{id: req.Group, members: map[string]*Member{}}
	}
	c.expireLocked(g, now)
	m := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == -1:
		if m == nil {
			return HeartbeatResult{}, ErrUnknownMember
		}
		delete(g.members, m.ID)
		c.dropSessionsLocked(g.id, m.ID)
		g.epoch++
		c.reassignLocked(g, counts)
		return HeartbeatResult{MemberID: m.ID, Epoch: -1}, nil
	case req.MemberEpoch == 0:
		if m == nil {
			if len(g.members) >= c.opts.MaxMembers {
				return HeartbeatResult{}, ErrGroupFull
			}
			m = &Member{ID: req.MemberID}
			g.members[m.ID] = m
		}
		m.Topics = sortedUnique(req.Topics)
		g.epoch++
	default:
		if m == nil {
			return HeartbeatResult{}, ErrUnknownMember
		}
		if req.MemberEpoch != m.Epoch {
			return HeartbeatResult{}, ErrFencedEpoch
		}
		if req.Topics != nil {
			if t := sortedUnique(req.Topics); !slices.Equal(t, m.Topics) {
				m.Topics = t
				g.epoch++
			}
		}
	}
	m.ClientID, m.ClientHost, m.last = req.ClientID, req.Host, now
	if req.Rack != nil {
		m.Rack = *req.Rack
	}
	if created {
		c.groups[g.id] = g
	}
	c.reassignLocked(g, counts)
	m.Epoch = g.epoch
	return HeartbeatResult{MemberID: m.ID, Epoch: m.Epoch, Assignment: cloneAssignment(m.Assignment), Joined: created}, nil
}

// reassignLocked recomputes the assignment when the group epoch or the
// subscribed topics' partition counts changed since the last time.
func (c *Coordinator) reassignLocked(g *group, counts PartitionCounts) {
	var topics []string
	for _, m := range g.members {
		topics = append(topics, m.Topics...)
	}
	topics = sortedUnique(topics)
	meta := counts(topics)
	changed := len(meta) != len(g.meta)
	for t, n := range meta {
		changed = changed || g.meta[t] != n
	}
	if changed {
		g.epoch++
	}
	g.meta = meta
	subs := make(map[string][]string, len(g.members))
	for id, m := range g.members {
		subs[id] = m.Topics
	}
	for id, a := range Assign(subs, meta) {
		g.members[id].Assignment = a
	}
}

// expireLocked removes members whose session timed out.
func (c *Coordinator) expireLocked(g *group, now time.Time) {
	for id, m := range g.members {
		if now.Sub(m.last) > c.opts.SessionTimeout {
			delete(g.members, id)
			c.dropSessionsLocked(g.id, id)
			g.epoch++
		}
	}
}

// Describe returns a group's members; false if there is no such group.
func (c *Coordinator) Describe(name string, counts PartitionCounts) (Group, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return Group{}, false
	}
	c.expireLocked(g, c.opts.Now())
	c.reassignLocked(g, counts)
	out := Group{ID: g.id, Epoch: g.epoch}
	for _, m := range g.members {
		cp := *m
		cp.Topics = slices.Clone(m.Topics)
		cp.Assignment = cloneAssignment(m.Assignment)
		out.Members = append(out.Members, cp)
	}
	slices.SortFunc(out.Members, func(a, b Member) int { return compareStrings(a.ID, b.ID) })
	return out, true
}

// Ensure makes an empty group known (one loaded from Redis after a
// restart), keeping an existing one.
func (c *Coordinator) Ensure(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[name] == nil {
		c.groups[name] = &group{id: name, members: map[string]*Member{}}
	}
}

// Exists reports whether a share group of that name is known.
func (c *Coordinator) Exists(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[name] != nil
}

// Names lists the known share groups with their member counts.
func (c *Coordinator) Names() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	out := make(map[string]int, len(c.groups))
	for name, g := range c.groups {
		c.expireLocked(g, now)
		out[name] = len(g.members)
	}
	return out
}

// Member returns a member of a group, if present.
func (c *Coordinator) IsMember(groupName, memberID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupName]
	return g != nil && g.members[memberID] != nil
}

// Delete forgets an empty group; ErrGroupNotEmpty if it has members.
func (c *Coordinator) Delete(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return ErrGroupNotFound
	}
	c.expireLocked(g, c.opts.Now())
	if len(g.members) > 0 {
		return ErrGroupNotEmpty
	}
	delete(c.groups, name)
	return nil
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func cloneAssignment(a map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Reconcile brings the share groups in line with the registry in Redis
// (registered, shared by every broker) and with this broker's ownership:
// a registered group is known, an unregistered one without members is
// forgotten, and a group another broker coordinates loses its members
// here (they heartbeat to the new coordinator and rejoin there).
func (c *Coordinator) Reconcile(registered map[string]bool, owns func(string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, g := range c.groups {
		if owns != nil && !owns(name) {
			for id := range g.members {
				delete(g.members, id)
				c.dropSessionsLocked(name, id)
			}
			g.epoch++
		}
		if !registered[name] && len(g.members) == 0 {
			delete(c.groups, name)
		}
	}
	for name := range registered {
		if c.groups[name] == nil {
			c.groups[name] = &group{id: name, members: map[string]*Member{}}
		}
	}
}
