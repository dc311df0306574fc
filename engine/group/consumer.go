package group

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Consumer groups: Kafka's next-generation consumer group protocol
// (KIP-848). Members heartbeat (ConsumerGroupHeartbeat) with their
// subscription and the partitions they own; the coordinator keeps a group
// epoch (bumped whenever membership, subscriptions or the subscribed
// topics' metadata change), computes a target assignment for that epoch
// with a server-side assignor, and reconciles each member towards its
// target incrementally: a member first revokes what it must give up
// (keeping its epoch), then moves to the target epoch and receives the
// partitions no other member still holds. A partition so has at most one
// owner at any time. A consumer group lives in the same group map as
// classic groups (offsets, deletion and cleanup are shared); g.cg holds
// its state.

// ConsumerOptions configure consumer groups.
type ConsumerOptions struct {
	// SessionTimeout: a member that does not heartbeat for this long is
	// removed (group.consumer.session.timeout.ms, default 45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at
	// (group.consumer.heartbeat.interval.ms, default 5s).
	HeartbeatInterval time.Duration
	// Assignor is used when members name none (default "uniform").
	Assignor string
	// MaxSize bounds a group's members (group.consumer.max.size;
	// default 1000).
	MaxSize int
	// Topics lists the topics subscriptions resolve against.
	Topics func() []TopicMeta
	// MigrationPolicy is Kafka's group.consumer.migration.policy:
	// "bidirectional" (default), "upgrade", "downgrade" or "disabled".
	MigrationPolicy string
}

// TopicMeta is a topic as subscriptions see it.
type TopicMeta struct {
	Name       string
	ID         TopicID
	Partitions int32
}

// Bounds on what a member may send, checked before anything is kept.
const (
	MaxSubscribedTopics = 10000
	MaxRegexLen         = 1024
	MaxIDLen            = 255 // member, instance and rack ids, assignor names
)

func (o *ConsumerOptions) setDefaults() {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 45 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 5 * time.Second
	}
	if o.Assignor == "" {
		o.Assignor = AssignorUniform
	}
	if o.MaxSize <= 0 {
		o.MaxSize = 1000
	}
	if o.MigrationPolicy == "" {
		o.MigrationPolicy = MigrationBidirectional
	}
	if o.Topics == nil {
		o.Topics = func() []TopicMeta { return nil }
	}
}

// memberState is where a member is in its reconciliation, named as Kafka
// names them.
type memberState int

const (
	memberStable memberState = iota
	memberUnrevoked
	memberUnreleased
)

var memberStateNames = [...]string{"stable", "unrevoked_partitions", "unreleased_partitions"}

func (s memberState) String() string { return memberStateNames[s] }

type cmember struct {
	id, instance, rack   string
	clientID, clientHost string
	epoch, prevEpoch     int32
	state                memberState
	// assigned is what the member owns (at epoch); revoking what it must
	// still give up. Both count as held: nobody else gets them.
	assigned, revoking Assignment
	names              []string
	regex              string
	re                 *regexp.Regexp
	assignor           string
	rebalance          time.Duration
	// leftStatic: a static member that left with epoch -2; it keeps its
	// assignment until its session expires or its instance rejoins.
	leftStatic     bool
	deadline       time.Time // session expiry
	revokeDeadline time.Time // while unrevoked
	// sendAssignment: the member's assignment changed since it was last
	// sent.
	sendAssignment bool
	// classic is set for a member that uses the classic protocol in a
	// consumer group (consumer_migrate.go).
	classic *classicState
	// denied: topics its regex matches that its principal may not
	// describe, as of its last heartbeat; they are not subscribed.
	denied map[string]bool
	// assignedAt: the epoch at which each partition it owns was given to
	// it; a commit from an earlier epoch is stale for that partition.
	assignedAt map[partKey]int32
}

type partKey struct {
	t TopicID
	p int32
}

// refreshDenied recomputes the topics m's regex may not resolve to and
// reports a change.
func (m *cmember) refreshDenied(topics []TopicMeta, allowed func(string) bool) bool {
	var denied map[string]bool
	if m.re != nil && allowed != nil {
		for _, t := range topics {
			if m.re.MatchString(t.Name) && !allowed(t.Name) {
				if denied == nil {
					denied = map[string]bool{}
				}
				denied[t.Name] = true
			}
		}
	}
	changed := len(denied) != len(m.denied)
	for t := range denied {
		changed = changed || !m.denied[t]
	}
	m.denied = denied
	return changed
}

type consumerGroup struct {
	epoch, targetEpoch int32
	members            map[string]*cmember
	statics            map[string]string // instance id -> member id
	target             map[string]Assignment
	assignor           string
	// topicsHash describes the subscribed topics (names, ids, partition
	// counts) the target was computed from; a change bumps the epoch.
	topicsHash string
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cmember{}, statics: map[string]string{}, target: map[string]Assignment{}}
}

// held returns every partition some member other than except owns or
// is revoking.
func (cg *consumerGroup) held(except string) Assignment {
	h := Assignment{}
	for id, m := range cg.members {
		if id == except {
			continue
		}
		for t, ps := range m.assigned {
			for _, p := range ps {
				h.Add(t, p)
			}
		}
		for t, ps := range m.revoking {
			for _, p := range ps {
				h.Add(t, p)
			}
		}
	}
	return h
}

// subscribes reports whether m's subscription includes the topic.
func (m *cmember) subscribes(name string) bool {
	if m.re != nil && m.re.MatchString(name) && !m.denied[name] {
		return true
	}
	return slices.Contains(m.names, name)
}

// compileRegex compiles a subscription regex: RE2, as Kafka's (which
// uses re2j), matched against the whole topic name.
func compileRegex(s string) (*regexp.Regexp, error) {
	if len(s) > MaxRegexLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidRegex, len(s), MaxRegexLen)
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRegex, err)
	}
	return re, nil
}

// subscribed resolves the group's subscriptions against topics: the
// topics some member subscribes to, sorted by name, and a description of
// them whose change means the target must be recomputed.
func (cg *consumerGroup) subscribed(topics []TopicMeta) ([]TopicMeta, string) {
	var out []TopicMeta
	var b strings.Builder
	for _, t := range topics {
		for _, m := range cg.members {
			if m.subscribes(t.Name) {
				out = append(out, t)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for _, t := range out {
		b.WriteString(t.Name)
		b.WriteByte('/')
		b.WriteString(hex.EncodeToString(t.ID[:]))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(int(t.Partitions)))
		b.WriteByte(';')
	}
	return out, b.String()
}

// computeTarget bumps nothing; it recomputes the target assignment for
// the current group epoch.
func (g *group) computeTarget() {
	cg := g.cg
	topics, hash := cg.subscribed(g.c.opts.Consumer.Topics())
	cg.topicsHash = hash
	cg.assignor = g.groupAssignor()
	ms := make([]AssignorMember, 0, len(cg.members))
	ats := make([]AssignorTopic, len(topics))
	for i, t := range topics {
		ats[i] = AssignorTopic{ID: t.ID, Name: t.Name, Partitions: t.Partitions}
	}
	for _, m := range cg.members {
		am := AssignorMember{ID: m.id, Current: cg.target[m.id]}
		for _, t := range topics {
			if m.subscribes(t.Name) {
				am.Topics = append(am.Topics, t.ID)
			}
		}
		ms = append(ms, am)
	}
	cg.target = Assign(cg.assignor, ms, ats)
	cg.targetEpoch = cg.epoch
}

// groupAssignor is the assignor the members ask for most (ties by name),
// else the default, as Kafka picks.
func (g *group) groupAssignor() string {
	votes := map[string]int{}
	for _, m := range g.cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := ""
	for name, n := range votes {
		if best == "" || n > votes[best] || (n == votes[best] && name < best) {
			best = name
		}
	}
	if best == "" {
		return g.c.opts.Consumer.Assignor
	}
	return best
}

// bump starts a new group epoch and computes its target.
func (g *group) bump() {
	g.cg.epoch++
	g.computeTarget()
}

// reconcile moves m towards its target. owned is what the member says it
// owns (nil: it did not say).
func (g *group) reconcile(m *cmember, owned Assignment, now time.Time) {
	cg := g.cg
	for range 3 {
		switch {
		case m.state == memberUnrevoked:
			if owned == nil {
				return
			}
			for t, ps := range m.revoking {
				for _, p := range ps {
					if owned.has(t, p) {
						return // not revoked yet
					}
				}
			}
			m.revoking = nil
			m.revokeDeadline = time.Time{}
			m.state = memberStable
			if m.epoch == cg.targetEpoch {
				// Revoked for an epoch already reached: look again for
				// partitions freed meanwhile.
				m.state = memberUnreleased
			}
		case m.epoch != cg.targetEpoch || m.state == memberUnreleased:
			tgt := cg.target[m.id]
			if tgt == nil {
				tgt = Assignment{}
			}
			revoke := m.assigned.filter(func(t TopicID, p int32) bool { return !tgt.has(t, p) })
			if revoke.count() > 0 {
				m.assigned = m.assigned.filter(func(t TopicID, p int32) bool { return tgt.has(t, p) })
				m.revoking = revoke
				m.state = memberUnrevoked
				m.revokeDeadline = now.Add(m.rebalance)
				m.sendAssignment = true
				return
			}
			held := cg.held(m.id)
			next := m.assigned.clone()
			if m.assignedAt == nil {
				m.assignedAt = map[partKey]int32{}
			}
			for t, ps := range tgt {
				for _, p := range ps {
					if !held.has(t, p) && !next.has(t, p) {
						next.Add(t, p)
						m.assignedAt[partKey{t, p}] = cg.targetEpoch
					}
				}
			}
			if !next.equal(m.assigned) {
				m.sendAssignment = true
			}
			m.assigned = next
			if m.epoch != cg.targetEpoch {
				m.prevEpoch, m.epoch = m.epoch, cg.targetEpoch
			}
			m.state = memberStable
			if !next.equal(tgt) {
				m.state = memberUnreleased
			}
			return
		default:
			return
		}
	}
}

// consumerState is the group's state as Kafka names a consumer group's.
func (g *group) consumerState() string {
	cg := g.cg
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.targetEpoch != cg.epoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.targetEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// syncClassicState keeps the classic state in step: Empty while no
// member is left (so deletion and the cleanup apply), Stable otherwise.
func (g *group) syncClassicState() {
	if len(g.cg.members) == 0 {
		g.state = Empty
	} else {
		g.state = Stable
	}
}

// removeConsumer drops a member, frees its partitions and starts a new
// epoch for the others.
func (g *group) removeConsumer(m *cmember, why string) {
	cg := g.cg
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instance != "" && cg.statics[m.instance] == m.id {
		delete(cg.statics, m.instance)
	}
	g.c.log.Info("consumer group member removed", "group", g.name, "member", m.id, "reason", why)
	g.bump()
	g.syncClassicState()
}

// expireConsumers removes members whose session or revocation deadline
// has passed; under g.mu.
func (g *group) expireConsumers(now time.Time) {
	if g.cg == nil {
		return
	}
	changed := false
	for _, m := range g.sortedConsumers() {
		switch {
		case !now.Before(m.deadline):
			g.removeConsumer(m, "session timed out")
			changed = true
		case m.state == memberUnrevoked && !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			g.removeConsumer(m, "did not revoke partitions within its rebalance timeout")
			changed = true
		}
	}
	if changed {
		g.persistConsumer()
		g.maybeDowngrade(now)
	}
}

// considerConsumerDeadlines offers the members' deadlines to the timer.
func (g *group) considerConsumerDeadlines(consider func(time.Time)) {
	if g.cg == nil {
		return
	}
	for _, m := range g.cg.members {
		consider(m.deadline)
		if m.state == memberUnrevoked {
			consider(m.revokeDeadline)
		}
	}
}

func (g *group) sortedConsumers() []*cmember {
	ms := make([]*cmember, 0, len(g.cg.members))
	for _, m := range g.cg.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// ConsumerMemberDescription is a member as ConsumerGroupDescribe shows
// it.
type ConsumerMemberDescription struct {
	MemberID, InstanceID, RackID string
	ClientID, ClientHost         string
	MemberEpoch                  int32
	State                        string
	SubscribedTopics             []string
	SubscribedRegex              string
	Assignment, Target           Assignment
	// Revoking is what the member still has to give up.
	Revoking Assignment
	// Classic: the member uses the classic protocol (a migrating group).
	Classic bool
}

// ConsumerDescription is a consumer group as ConsumerGroupDescribe shows
// it.
type ConsumerDescription struct {
	Group           string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// DescribeConsumer returns the named consumer group: ErrGroupNotFound if
// there is none or it is a classic group.
func (c *Coordinator) DescribeConsumer(name string) (ConsumerDescription, error) {
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, name)
	if err != nil {
		return ConsumerDescription{}, err
	}
	if g == nil {
		return ConsumerDescription{}, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return ConsumerDescription{}, notOwned(name)
	}
	if g.state == Dead || g.cg == nil {
		return ConsumerDescription{}, fmt.Errorf("%w: %q is not a consumer group", ErrGroupNotFound, name)
	}
	cg := g.cg
	assignor := cg.assignor
	if assignor == "" {
		assignor = g.c.opts.Consumer.Assignor
	}
	d := ConsumerDescription{Group: name, State: g.consumerState(), Epoch: cg.epoch, AssignmentEpoch: cg.targetEpoch, Assignor: assignor}
	for _, m := range g.sortedConsumers() {
		epoch := m.epoch
		if m.leftStatic {
			// Kafka shows a static member that left, and keeps its
			// partitions until its session ends, at epoch -2.
			epoch = StaticLeaveEpoch
		}
		d.Members = append(d.Members, ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.instance, RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: epoch, State: m.state.String(), SubscribedTopics: slices.Clone(m.names), SubscribedRegex: m.regex,
			Assignment: m.assigned.clone(), Target: cg.target[m.id].clone(), Revoking: m.revoking.clone(),
			Classic: m.classic != nil,
		})
	}
	return d, nil
}
