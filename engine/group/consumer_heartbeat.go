package group

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"
	"time"
)

// Member epochs with a meaning of their own.
const (
	JoinEpoch        = 0
	LeaveEpoch       = -1
	StaticLeaveEpoch = -2
)

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat, decoded. Pointer
// and nil fields are "unchanged since the last heartbeat", as on the wire.
type ConsumerHeartbeatRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeout < 0: unchanged.
	RebalanceTimeout time.Duration
	TopicNames       []string // nil: unchanged
	Regex            *string
	Assignor         *string
	// Owned is what the member owns; nil: unchanged.
	Owned Assignment
	// GenerateID (v0): the coordinator picks the member id on join.
	GenerateID           bool
	ClientID, ClientHost string
	// TopicAllowed, when set, says whether the member's principal may
	// DESCRIBE a topic: a regex subscription resolves only to those, as
	// in Kafka. nil allows all.
	TopicAllowed func(topic string) bool
}

// ConsumerHeartbeatResult is the answer to a heartbeat.
type ConsumerHeartbeatResult struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's assignment when it must be sent; nil
	// otherwise.
	Assignment Assignment
}

func (r *ConsumerHeartbeatRequest) validate() error {
	switch {
	case r.Group == "":
		return fmt.Errorf("%w: empty group id", ErrInvalidGroupID)
	case r.MemberEpoch < StaticLeaveEpoch:
		return fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, r.MemberEpoch)
	case len(r.MemberID) > MaxIDLen, r.InstanceID != nil && len(*r.InstanceID) > MaxIDLen,
		r.RackID != nil && len(*r.RackID) > MaxIDLen, r.Assignor != nil && len(*r.Assignor) > MaxIDLen:
		return fmt.Errorf("%w: an id is longer than %d bytes", ErrInvalidRequest, MaxIDLen)
	case len(r.TopicNames) > MaxSubscribedTopics:
		return fmt.Errorf("%w: %d subscribed topics, at most %d", ErrInvalidRequest, len(r.TopicNames), MaxSubscribedTopics)
	case r.Regex != nil && len(*r.Regex) > MaxRegexLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidRegex, len(*r.Regex), MaxRegexLen)
	case r.MemberID == "" && !(r.GenerateID && r.MemberEpoch == JoinEpoch):
		return fmt.Errorf("%w: member id required", ErrInvalidRequest)
	case r.MemberEpoch == StaticLeaveEpoch && (r.InstanceID == nil || *r.InstanceID == ""):
		return fmt.Errorf("%w: epoch -2 is a static member's leave and needs an instance id", ErrInvalidRequest)
	}
	if r.MemberEpoch == JoinEpoch {
		switch {
		case r.RebalanceTimeout < 0:
			return fmt.Errorf("%w: a join needs a rebalance timeout", ErrInvalidRequest)
		case r.TopicNames == nil && r.Regex == nil:
			return fmt.Errorf("%w: a join needs subscribed topic names or a regex", ErrInvalidRequest)
		case r.Owned.count() > 0:
			return fmt.Errorf("%w: a join cannot own partitions", ErrInvalidRequest)
		}
	}
	if r.Assignor != nil && *r.Assignor != "" && !KnownAssignor(*r.Assignor) {
		return fmt.Errorf("%w: %q (korvet has %q and %q)", ErrUnsupportedAssignor, *r.Assignor, AssignorUniform, AssignorRange)
	}
	return nil
}

// newConsumerMemberID is a random id, base64 as Kafka's clients make
// them (v0 leaves the choice to the coordinator).
func newConsumerMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat.
func (c *Coordinator) ConsumerHeartbeat(req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, error) {
	if err := req.validate(); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	var re *regexpHolder
	if req.Regex != nil && *req.Regex != "" {
		compiled, err := compileRegex(*req.Regex)
		if err != nil {
			return ConsumerHeartbeatResult{}, err
		}
		re = &regexpHolder{src: *req.Regex, re: compiled}
	}
	if req.MemberEpoch < 0 {
		return c.consumerLeave(req)
	}
	ctx, cancel := quickContext()
	defer cancel()
	var g *group
	var err error
	if req.MemberEpoch == JoinEpoch {
		g, err = c.findOrCreate(ctx, req.Group)
	} else if g, err = c.find(ctx, req.Group); g == nil && err == nil {
		// Only a join makes a group.
		err = fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
	}
	if err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return ConsumerHeartbeatResult{}, notOwned(req.Group)
	}
	if g.state == Dead {
		return ConsumerHeartbeatResult{}, ErrCoordinatorNotAvailable
	}
	if g.cg == nil && (g.state != Empty || len(g.members) > 0) {
		if !c.opts.Consumer.upgrades() || req.MemberEpoch != JoinEpoch {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %q is a classic group with members", ErrGroupNotFound, g.name)
		}
		if err := g.upgrade(); err != nil {
			return ConsumerHeartbeatResult{}, err
		}
	}
	if g.cg == nil {
		if req.MemberEpoch != JoinEpoch {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
		}
		// An empty classic group (or a new one) becomes a consumer group.
		g.cg = newConsumerGroup()
		g.protocolType = "consumer"
		g.protocol, g.leader = "", ""
	}
	now := time.Now()
	cg := g.cg
	dirty := false
	var m *cmember
	full := req.Owned != nil && req.RebalanceTimeout >= 0 && (req.TopicNames != nil || req.Regex != nil)
	if req.MemberEpoch == JoinEpoch {
		var err error
		m, err = g.consumerJoin(&req, now)
		if err != nil {
			return ConsumerHeartbeatResult{}, err
		}
		dirty = true
		full = true
	} else {
		m = cg.members[req.MemberID]
		if m == nil {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
		}
		if err := m.checkEpoch(req.MemberEpoch, req.Owned); err != nil {
			return ConsumerHeartbeatResult{}, err
		}
	}
	// Subscription changes start a new epoch.
	changed := false
	if req.TopicNames != nil && !sameStrings(req.TopicNames, m.names) {
		m.names = dedupSorted(req.TopicNames)
		changed = true
	}
	if req.Regex != nil && *req.Regex != m.regex {
		m.regex, m.re = "", nil
		if re != nil {
			m.regex, m.re = re.src, re.re
		}
		changed = true
	}
	if req.Assignor != nil && *req.Assignor != m.assignor {
		m.assignor = *req.Assignor
		changed = true
	}
	if req.RebalanceTimeout >= 0 && req.RebalanceTimeout != m.rebalance {
		m.rebalance = req.RebalanceTimeout
		dirty = true
	}
	if req.RackID != nil && *req.RackID != m.rack {
		m.rack = *req.RackID
		dirty = true
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if m.refreshDenied(c.opts.Consumer.Topics(), req.TopicAllowed) {
		dirty = true
	}
	if changed || req.MemberEpoch == JoinEpoch && m.epoch == 0 && cg.target[m.id] == nil {
		g.bump()
		dirty = true
	} else if _, hash := cg.subscribed(c.opts.Consumer.Topics()); hash != cg.topicsHash {
		// Subscribed topics were created, deleted or grew partitions.
		g.bump()
		dirty = true
	}
	before := memberSnapshot(m)
	g.reconcile(m, req.Owned, now)
	if !before.same(m) {
		dirty = true
	}
	m.deadline = now.Add(c.opts.Consumer.SessionTimeout)
	g.syncClassicState()
	if dirty {
		g.persistConsumer()
	}
	g.reschedule()
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: c.opts.Consumer.HeartbeatInterval}
	if full || m.sendAssignment {
		res.Assignment = m.assigned.clone()
		m.sendAssignment = false
	}
	return res, nil
}

type regexpHolder struct {
	src string
	re  *regexp.Regexp
}

// consumerJoin handles epoch 0: a new member, a member rejoining after
// losing its state, or a static member's instance coming back.
func (g *group) consumerJoin(req *ConsumerHeartbeatRequest, now time.Time) (*cmember, error) {
	cg := g.cg
	id := req.MemberID
	if id == "" {
		id = newConsumerMemberID()
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	if m := cg.members[id]; m != nil && m.instance == instance {
		// It rejoins without its partitions (a join owns none): they
		// are free again.
		if m.assigned.count() > 0 || m.revoking.count() > 0 {
			m.assigned, m.revoking = Assignment{}, nil
		}
		m.state, m.epoch, m.prevEpoch, m.leftStatic = memberStable, 0, 0, false
		m.sendAssignment = true
		return m, nil
	}
	if instance != "" {
		if oldID, ok := cg.statics[instance]; ok {
			old := cg.members[oldID]
			if old != nil && !old.leftStatic {
				return nil, fmt.Errorf("%w: %q is held by member %q", ErrUnreleasedInstanceID, instance, oldID)
			}
			if old != nil {
				// The instance is back: the new member id takes over
				// the old one's assignment and target, with no new
				// epoch, as in Kafka.
				delete(cg.members, oldID)
				m := &cmember{id: id, instance: instance, epoch: 0, assigned: old.assigned, revoking: old.revoking,
					state: old.state, names: old.names, regex: old.regex, re: old.re, assignor: old.assignor,
					rebalance: old.rebalance, revokeDeadline: old.revokeDeadline, sendAssignment: true}
				if m.state != memberUnrevoked {
					m.state = memberUnreleased
				}
				cg.members[id] = m
				cg.target[id] = cg.target[oldID]
				delete(cg.target, oldID)
				cg.statics[instance] = id
				return m, nil
			}
		}
	}
	if len(cg.members) >= g.c.opts.Consumer.MaxSize {
		return nil, fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(cg.members))
	}
	m := &cmember{id: id, instance: instance, assigned: Assignment{}, sendAssignment: true}
	cg.members[id] = m
	if instance != "" {
		cg.statics[instance] = id
	}
	return m, nil
}

// checkEpoch applies KIP-848's fencing: an epoch ahead of the member's is
// fenced; one behind is accepted only as the previous epoch from a member
// that owns no more than it has (its last answer was lost).
func (m *cmember) checkEpoch(epoch int32, owned Assignment) error {
	if m.leftStatic {
		return fmt.Errorf("%w: static member %q left", ErrFencedMemberEpoch, m.id)
	}
	if epoch == m.epoch {
		return nil
	}
	if epoch < m.epoch && epoch == m.prevEpoch && owned != nil {
		ok := true
		for t, ps := range owned {
			for _, p := range ps {
				ok = ok && m.assigned.has(t, p)
			}
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: member %q sent epoch %d, is at %d", ErrFencedMemberEpoch, m.id, epoch, m.epoch)
}

// consumerLeave handles epochs -1 (leave) and -2 (a static member's
// temporary leave: it keeps its assignment until its session expires).
func (c *Coordinator) consumerLeave(req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, error) {
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, req.Group)
	if err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	if g == nil {
		return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return ConsumerHeartbeatResult{}, notOwned(req.Group)
	}
	if g.cg == nil || g.state == Dead {
		return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
	}
	cg := g.cg
	m := cg.members[req.MemberID]
	if req.MemberEpoch == StaticLeaveEpoch {
		id, ok := cg.statics[*req.InstanceID]
		if !ok {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: instance %q", ErrUnknownMemberID, *req.InstanceID)
		}
		if id != req.MemberID {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: instance %q is member %q", ErrFencedInstanceID, *req.InstanceID, id)
		}
		m.leftStatic = true
		m.deadline = time.Now().Add(c.opts.Consumer.SessionTimeout)
		g.persistConsumer()
		g.reschedule()
		return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: StaticLeaveEpoch}, nil
	}
	if m == nil {
		return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)
	}
	g.removeConsumer(m, "left the group")
	g.persistConsumer()
	g.maybeDowngrade(time.Now())
	g.reschedule()
	return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: LeaveEpoch}, nil
}

type snapshot struct {
	epoch      int32
	state      memberState
	revoking   int
	assigned   Assignment
	leftStatic bool
}

func memberSnapshot(m *cmember) snapshot {
	return snapshot{m.epoch, m.state, m.revoking.count(), m.assigned.clone(), m.leftStatic}
}

func (s snapshot) same(m *cmember) bool {
	return s.epoch == m.epoch && s.state == m.state && s.revoking == m.revoking.count() && s.assigned.equal(m.assigned) && s.leftStatic == m.leftStatic
}

func sameStrings(a, b []string) bool {
	a = dedupSorted(a)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func dedupSorted(s []string) []string {
	out := make([]string, len(s))
	copy(out, s)
	sort.Strings(out)
	j := 0
	for i := range out {
		if i == 0 || out[i] != out[j-1] {
			out[j] = out[i]
			j++
		}
	}
	return out[:j]
}
