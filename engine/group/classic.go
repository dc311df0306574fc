package group

import (
	"bytes"
	"context"
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
	stored  bool
	offsets map[TopicPartition]Commit
	// txn: offsets pending in open transactions, per producer id
	// (txn_offsets.go); loaded with offsets.
	txn          map[int64]map[TopicPartition]Commit
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

	// gone: another broker coordinates the group now (ownership.go);
	// nothing more is written for it from here.
	gone bool

	// cg is set while the group is a consumer group (KIP-848,
	// consumer.go); the classic fields above then stay Empty.
	cg *consumerGroup
}

func (c *Coordinator) newGroup(name string) *group {
	return &group{
		c:       c,
		name:    name,
		offsets: make(map[TopicPartition]Commit),
		txn:     make(map[int64]map[TopicPartition]Commit),
		members: make(map[string]*member),
		statics: make(map[string]string),
		pending: make(map[string]time.Time),
	}
}

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
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
