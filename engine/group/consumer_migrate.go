package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic and the consumer protocol, with
// Kafka 4.0's rules (KIP-848 "upgrade/downgrade"):
//
//   - upgrade: a non-empty classic group of the consumer protocol type
//     joined by a consumer group member becomes a consumer group. Its
//     classic members stay, as classic members of the consumer group:
//     their subscriptions come from their JoinGroup metadata, their
//     assignments from SyncGroup; the group epoch starts at the
//     generation.
//   - classic members of a consumer group keep using JoinGroup, SyncGroup,
//     Heartbeat and LeaveGroup. Their assignment is computed by the server
//     assignor and handed out by SyncGroup (ConsumerProtocolAssignment
//     bytes); a heartbeat answers REBALANCE_IN_PROGRESS when the member's
//     assignment must change, so that it rejoins. A rejoin reports what the
//     member owns (its subscription's owned partitions; none for eager
//     members, which revoke everything before rejoining), which is how it
//     acknowledges a revocation.
//   - downgrade: when the last consumer protocol member leaves and classic
//     members remain, the group turns back into a classic group, at a new
//     generation, and rebalances.
//
// The coordinator decodes and encodes the consumer protocol's embedded
// formats here (kmsg's ConsumerMemberMetadata and ConsumerMemberAssignment)
// because the assignments are its own.

// Migration policies (Kafka's group.consumer.migration.policy).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

// KnownMigrationPolicy reports whether name is a migration policy.
func KnownMigrationPolicy(name string) bool {
	return slices.Contains([]string{MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled}, name)
}

func (o *ConsumerOptions) upgrades() bool {
	return o.MigrationPolicy == MigrationBidirectional || o.MigrationPolicy == MigrationUpgrade
}

func (o *ConsumerOptions) downgrades() bool {
	return o.MigrationPolicy == MigrationBidirectional || o.MigrationPolicy == MigrationDowngrade
}

// classicState is what a classic member of a consumer group needs beyond a
// consumer member's.
type classicState struct {
	protocols []Protocol
	protocol  string // the one it was answered with
	session   time.Duration
}

// decodeSubscription reads a consumer protocol subscription: the topics
// and the partitions the member says it owns (by name).
func decodeSubscription(metadata []byte) ([]string, map[string][]int32, error) {
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(metadata); err != nil {
		return nil, nil, fmt.Errorf("%w: bad consumer protocol subscription: %v", ErrInconsistentProtocol, err)
	}
	if len(md.Topics) > MaxSubscribedTopics {
		return nil, nil, fmt.Errorf("%w: %d subscribed topics, at most %d", ErrInvalidRequest, len(md.Topics), MaxSubscribedTopics)
	}
	owned := map[string][]int32{}
	for _, t := range md.OwnedPartitions {
		owned[t.Topic] = append(owned[t.Topic], t.Partitions...)
	}
	return md.Topics, owned, nil
}

func decodeAssignmentBytes(b []byte) map[string][]int32 {
	out := map[string][]int32{}
	if len(b) == 0 {
		return out
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return out
	}
	for _, t := range a.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	return out
}

// byID turns partitions by topic name into an Assignment, dropping topics
// that do not exist.
func (g *group) byID(parts map[string][]int32) Assignment {
	ids := g.topicIDs()
	out := Assignment{}
	for name, ps := range parts {
		id, ok := ids[name]
		if !ok {
			continue
		}
		for _, p := range ps {
			out.Add(id, p)
		}
	}
	return out
}

// encodeClassicAssignment is a member's assignment as SyncGroup hands it
// to a classic consumer.
func (g *group) encodeClassicAssignment(a Assignment) []byte {
	names := map[TopicID]string{}
	for _, t := range g.c.opts.Consumer.Topics() {
		names[t.ID] = t.Name
	}
	var ca kmsg.ConsumerMemberAssignment
	for _, id := range a.SortedTopics() {
		name, ok := names[id]
		if !ok {
			continue
		}
		ca.Topics = append(ca.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: a[id]})
	}
	return ca.AppendTo(nil)
}

// upgrade turns a Stable classic group of the consumer protocol type into
// a consumer group, its members into classic members; under g.mu.
func (g *group) upgrade() error {
	if g.protocolType != "consumer" {
		return fmt.Errorf("%w: %q is a classic group of protocol type %q", ErrGroupNotFound, g.name, g.protocolType)
	}
	if g.state != Stable {
		// Its members are rebalancing; the joining member retries.
		return fmt.Errorf("%w: classic group %q is %s; it can be upgraded once Stable", ErrCoordinatorNotAvailable, g.name, g.state)
	}
	if len(g.members) >= g.c.opts.Consumer.MaxSize {
		return fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(g.members))
	}
	cg := newConsumerGroup()
	cg.epoch, cg.targetEpoch = g.generation, g.generation
	for _, m := range g.sortedMembers() {
		topics, _, err := decodeSubscription(m.metadataFor(g.protocol))
		if err != nil {
			return err
		}
		assigned := g.byID(decodeAssignmentBytes(m.assignment))
		cm := &cmember{id: m.id, instance: m.instance, clientID: m.clientID, clientHost: m.clientHost,
			epoch: g.generation, prevEpoch: g.generation, names: dedupSorted(topics), assigned: assigned,
			rebalance: m.rebalance, deadline: m.deadline,
			classic: &classicState{protocols: m.protocols, protocol: g.protocol, session: m.session}}
		cg.members[m.id] = cm
		cg.target[m.id] = assigned.clone()
		if m.instance != "" {
			cg.statics[m.instance] = m.id
		}
	}
	if g.timer != nil {
		g.timer.Stop()
		g.wakeAt = time.Time{}
	}
	g.cg = cg
	g.members, g.statics, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
	_, cg.topicsHash = cg.subscribed(g.c.opts.Consumer.Topics())
	g.c.log.Info("classic group upgraded to a consumer group", "group", g.name, "epoch", cg.epoch, "members", len(cg.members))
	return nil
}

// maybeDowngrade turns the group back into a classic group when only
// classic members are left; under g.mu.
func (g *group) maybeDowngrade(now time.Time) {
	cg := g.cg
	if cg == nil || len(cg.members) == 0 || !g.c.opts.Consumer.downgrades() {
		return
	}
	for _, m := range cg.members {
		if m.classic == nil {
			return
		}
	}
	g.cg = nil
	g.generation = cg.epoch
	for _, cm := range g.sortedConsumersOf(cg) {
		m := &member{id: cm.id, instance: cm.instance, clientID: cm.clientID, clientHost: cm.clientHost,
			session: cm.classic.session, rebalance: cm.rebalance, protocols: cm.classic.protocols,
			assignment: g.encodeClassicAssignment(cm.assigned), deadline: now.Add(cm.classic.session)}
		g.members[m.id] = m
		if m.instance != "" {
			g.statics[m.instance] = m.id
		}
	}
	g.protocol = g.selectProtocol()
	g.leader = ""
	g.state = Stable
	g.c.log.Info("consumer group downgraded to a classic group", "group", g.name, "generation", g.generation, "members", len(g.members))
	// Its members rejoin: their next heartbeat says REBALANCE_IN_PROGRESS.
	g.prepareRebalance("downgraded from a consumer group", now)
	g.persist()
}

func (g *group) sortedConsumersOf(cg *consumerGroup) []*cmember {
	saved := g.cg
	g.cg = cg
	defer func() { g.cg = saved }()
	return g.sortedConsumers()
}

// classicJoin handles a JoinGroup from a classic member of a consumer
// group; it answers at once, as the member's assignment is the server's.
func (g *group) classicJoin(req JoinRequest, now time.Time) (JoinResult, error) {
	cg := g.cg
	fail := func(err error) (JoinResult, error) { return JoinResult{MemberID: req.MemberID, Generation: -1}, err }
	if req.ProtocolType != "consumer" {
		return fail(fmt.Errorf("%w: consumer group %q takes only the consumer protocol type", ErrInconsistentProtocol, g.name))
	}
	var m *cmember
	if req.MemberID != "" {
		m = cg.members[req.MemberID]
		if m == nil || m.classic == nil {
			return fail(fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID))
		}
	} else if req.InstanceID != "" {
		if id, ok := cg.statics[req.InstanceID]; ok {
			if old := cg.members[id]; old != nil && old.classic != nil {
				m = old // a static classic member rejoining
			} else {
				return fail(fmt.Errorf("%w: instance %q is a consumer protocol member", ErrUnreleasedInstanceID, req.InstanceID))
			}
		}
	}
	if m == nil {
		if !g.c.opts.Consumer.upgrades() {
			return fail(fmt.Errorf("%w: consumer group %q takes no classic members (migration policy %q)", ErrInconsistentProtocol, g.name, g.c.opts.Consumer.MigrationPolicy))
		}
		if len(cg.members) >= g.c.opts.Consumer.MaxSize {
			return fail(fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(cg.members)))
		}
		m = &cmember{id: newMemberID(cmpOr(req.InstanceID, req.ClientID)), instance: req.InstanceID, assigned: Assignment{}}
		cg.members[m.id] = m
		if m.instance != "" {
			cg.statics[m.instance] = m.id
		}
	}
	protocol := req.Protocols[0]
	topics, ownedNames, err := decodeSubscription(protocol.Metadata)
	if err != nil {
		if m.classic == nil {
			delete(cg.members, m.id)
		}
		return fail(err)
	}
	isNew := m.classic == nil
	m.classic = &classicState{protocols: req.Protocols, protocol: protocol.Name, session: req.SessionTimeout}
	m.clientID, m.clientHost, m.rebalance = req.ClientID, req.ClientHost, req.RebalanceTimeout
	topics = dedupSorted(topics)
	changed := isNew || !slices.Equal(topics, m.names)
	m.names = topics
	// What it reports owning is what it has: eager members report
	// nothing, having revoked all.
	owned := g.byID(ownedNames)
	m.assigned = m.assigned.filter(owned.has)
	if changed {
		g.bump()
	} else if _, hash := cg.subscribed(g.c.opts.Consumer.Topics()); hash != cg.topicsHash {
		g.bump()
	}
	g.reconcile(m, owned, now)
	m.deadline = now.Add(req.SessionTimeout)
	g.syncClassicState()
	g.persistConsumer()
	g.reschedule()
	return JoinResult{MemberID: m.id, Generation: m.epoch, ProtocolType: "consumer", Protocol: protocol.Name}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// classicMember finds a classic member of the consumer group at its
// generation.
func (g *group) classicMember(id string, generation int32) (*cmember, error) {
	m := g.cg.members[id]
	if m == nil || m.classic == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMemberID, id)
	}
	if generation != m.epoch {
		return nil, fmt.Errorf("%w: %d, member is at %d", ErrIllegalGeneration, generation, m.epoch)
	}
	return m, nil
}

// classicSync hands a classic member its assignment.
func (g *group) classicSync(req SyncRequest, now time.Time) (SyncResult, error) {
	m, err := g.classicMember(req.MemberID, req.Generation)
	if err != nil {
		return SyncResult{}, err
	}
	m.deadline = now.Add(m.classic.session)
	m.sendAssignment = false
	return SyncResult{ProtocolType: "consumer", Protocol: m.classic.protocol, Assignment: g.encodeClassicAssignment(m.assigned)}, nil
}

// classicHeartbeat keeps a classic member alive and asks it to rejoin
// when its assignment must change.
func (g *group) classicHeartbeat(req HeartbeatRequest, now time.Time) error {
	m, err := g.classicMember(req.MemberID, req.Generation)
	if err != nil {
		return err
	}
	m.deadline = now.Add(m.classic.session)
	if _, hash := g.cg.subscribed(g.c.opts.Consumer.Topics()); hash != g.cg.topicsHash {
		g.bump()
		g.persistConsumer()
	}
	if m.epoch != g.cg.targetEpoch || m.state == memberUnrevoked || m.state == memberUnreleased && g.canGain(m) {
		return ErrRebalanceInProgress
	}
	return nil
}

// canGain: some partition of m's target that it lacks is free now.
func (g *group) canGain(m *cmember) bool {
	held := g.cg.held(m.id)
	for t, ps := range g.cg.target[m.id] {
		for _, p := range ps {
			if !m.assigned.has(t, p) && !held.has(t, p) {
				return true
			}
		}
	}
	return false
}

// classicLeave removes classic members of the consumer group.
func (g *group) classicLeave(members []LeaveMember, now time.Time) []error {
	errs := make([]error, len(members))
	for i, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != "" {
			sid, ok := g.cg.statics[lm.InstanceID]
			if !ok || (id != "" && id != sid) {
				errs[i] = ErrUnknownMemberID
				continue
			}
			id = sid
		}
		m := g.cg.members[id]
		if m == nil || m.classic == nil {
			errs[i] = ErrUnknownMemberID
			continue
		}
		g.removeConsumer(m, "left the group")
	}
	if g.cg != nil {
		g.persistConsumer()
	}
	g.maybeDowngrade(now)
	g.reschedule()
	return errs
}
