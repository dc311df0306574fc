// Package group is korvet's group coordinator: Kafka's classic consumer
// group protocol (join, sync, heartbeat and leave, with generations,
// static members, session and rebalance timeouts) and committed offsets,
// which it keeps in Redis. It deals in plain Go values; the wire layer
// decodes requests and maps the errors to Kafka error codes.
//
// Membership and committed offsets are kept in Redis (persist.go,
// offsets.go), so groups carry on across a restart. A group whose members
// have all left stays, Empty, until the periodic cleanup (cleanup.go)
// finds it without commits and removes it, as Kafka's does.
package group

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/resp"
)

// Options configure a Coordinator.
type Options struct {
	// Keyspace prefixes every Redis key, as the engine's do.
	Keyspace string
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members before it completes (Kafka's
	// group.initial.rebalance.delay.ms). 0 means none.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for (group.min/max.session.timeout.ms). Defaults 6s
	// and 30 min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxMetadataBytes bounds a commit's metadata string
	// (offset.metadata.max.bytes). Default 4096.
	MaxMetadataBytes int
	// CleanupInterval is how often groups that are Empty and have no
	// committed offsets are removed (Kafka's
	// offsets.retention.check.interval.ms). Default 10 minutes.
	CleanupInterval time.Duration
	// HighWatermark reports a partition's high watermark for lag, and
	// false when the partition does not exist.
	HighWatermark func(topic string, partition int32) (int64, bool)
	Logger        *slog.Logger

	// Consumer groups (KIP-848), see consumer.go.
	Consumer ConsumerOptions

	// Announce tells the other brokers that a group's offsets changed
	// in Redis behind its coordinator's back: CompleteTxn calls it on a
	// broker that does not own the group, and the owner is to call
	// StaleOffsets. nil: a single broker, nothing to tell.
	Announce func(ctx context.Context, group string) error

	// Owns reports whether this broker coordinates the group now; nil
	// means every group (a single broker). Several brokers on one Redis
	// each hold only the groups they own (ownership.go).
	Owns func(group string) bool
}

// Coordinator runs every group of one korvet. It is safe for concurrent use.
type Coordinator struct {
	rc   *resp.Client
	opts Options
	k    keys.Space
	log  *slog.Logger

	mu     sync.Mutex
	groups map[string]*group
	closed bool

	// complete: every group in the registry this broker owns is in
	// groups, so a miss there means no such group (ownership.go).
	complete atomic.Bool

	// The cleanup loop: stop ends it, done is closed when it has.
	stop, done chan struct{}
}

// Open loads the groups stored in Redis that this broker owns with their
// membership, so that members carry on across a restart without
// rebalancing. Committed offsets are read from Redis on first use; a
// group owned later is restored on first use (ownership.go).
func Open(ctx context.Context, rc *resp.Client, opts Options) (*Coordinator, error) {
	if opts.Keyspace == "" {
		opts.Keyspace = keys.Default
	}
	if opts.InitialRebalanceDelay < 0 {
		opts.InitialRebalanceDelay = 0
	}
	if opts.MinSessionTimeout <= 0 {
		opts.MinSessionTimeout = 6 * time.Second
	}
	if opts.MaxSessionTimeout <= 0 {
		opts.MaxSessionTimeout = 30 * time.Minute
	}
	if opts.MaxMetadataBytes <= 0 {
		opts.MaxMetadataBytes = 4096
	}
	if opts.CleanupInterval <= 0 {
		opts.CleanupInterval = DefaultCleanupInterval
	}
	if opts.HighWatermark == nil {
		opts.HighWatermark = func(string, int32) (int64, bool) { return 0, false }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Consumer.setDefaults()
	c := &Coordinator{rc: rc, opts: opts, k: keys.New(opts.Keyspace, rc.IsCluster()), log: opts.Logger, groups: make(map[string]*group)}
	r, err := rc.Do(ctx, "HGETALL", c.k.Groups())
	if err != nil {
		return nil, fmt.Errorf("load groups from %s: %w", c.k.Groups(), err)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("load groups from %s: %w", c.k.Groups(), err)
	}
	var elems []resp.Reply
	elems = r.Elems(elems)
	var names []string
	var pl resp.Pipeline
	for i := 0; i+1 < len(elems); i += 2 {
		if name := string(elems[i].Bytes()); c.owns(name) {
			names = append(names, name)
			c.restoreCmds(&pl, name)
		}
	}
	if len(names) > 0 {
		rs, err := rc.Exec(ctx, &pl)
		if err != nil {
			return nil, fmt.Errorf("load group states: %w", err)
		}
		now := time.Now()
		for i, name := range names {
			g, found, err := c.rebuild(name, rs.At(3*i), rs.At(3*i+1), rs.At(3*i+2), now)
			if err != nil {
				rs.Release()
				for _, g := range c.groups { // stop the timers restored so far
					g.mu.Lock()
					g.gone = true
					g.shutdown()
					g.mu.Unlock()
				}
				return nil, err
			}
			if found {
				c.groups[name] = g
			}
		}
		rs.Release()
	}
	c.complete.Store(true)
	c.log.Info("groups loaded", "count", len(c.groups))
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.cleanupLoop()
	return c, nil
}

// Close stops the groups' timers and answers parked JoinGroup and
// SyncGroup calls with ErrNotCoordinator.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if !c.closed && c.stop != nil {
		close(c.stop)
	}
	c.closed = true
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.shutdown()
		g.mu.Unlock()
	}
	if c.done != nil {
		<-c.done
	}
}

// forget drops g from the map if it is still the group under its name.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.groups[g.name] == g {
		delete(c.groups, g.name)
	}
	c.mu.Unlock()
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Coordinator) all() []*group {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	return gs
}

// Summary is one group as ListGroups shows it.
type Summary struct {
	Group        string
	State        State
	ProtocolType string
	Protocol     string
	Generation   int32
	Members      int
	// Type is "classic" or "consumer" (KIP-848); StateName is the state
	// as Kafka names it for that type.
	Type      string
	StateName string
}

// List returns every group this broker coordinates and holds, sorted by
// name. A group owned since the last change of the live brokers shows
// once it has been used here (a member joined or an admin asked).
func (c *Coordinator) List() []Summary {
	c.DropUnowned()
	gs := c.all()
	out := make([]Summary, 0, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		switch {
		case g.state == Dead:
		case g.cg != nil:
			out = append(out, Summary{Group: g.name, State: g.state, ProtocolType: g.protocolType, Generation: g.cg.epoch, Members: len(g.cg.members), Type: "consumer", StateName: g.consumerState()})
		default:
			out = append(out, Summary{Group: g.name, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation, Members: len(g.members), Type: "classic", StateName: g.state.String()})
		}
		g.mu.Unlock()
	}
	return out
}

// MemberDescription is one member as DescribeGroups shows it.
type MemberDescription struct {
	MemberID, InstanceID string
	ClientID, ClientHost string
	// Metadata (for the chosen protocol) and Assignment are set only while
	// the group is Stable, as in Kafka.
	Metadata, Assignment []byte
}

// Description is a group as DescribeGroups shows it.
type Description struct {
	Group        string
	State        State
	ProtocolType string
	Protocol     string // set only while Stable
	Generation   int32
	Leader       string
	Members      []MemberDescription
}

// Exists reports whether name is a live group of either protocol,
// classic or consumer (KIP-848). Share groups ask before taking an id:
// all group types share one namespace, as in Kafka. Any broker may ask:
// for a group coordinated elsewhere it checks the registry in Redis.
func (c *Coordinator) Exists(name string) bool {
	if !c.owns(name) {
		return c.registered(name)
	}
	if c.complete.Load() {
		// The share paths ask on every fetch: answer from memory when it
		// has every group this broker owns.
		g := c.held(name)
		if g == nil {
			return false
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.state != Dead
	}
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, name)
	if g == nil || err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state != Dead
}

// Describe returns the named group; false if there is none.
func (c *Coordinator) Describe(name string) (Description, bool) {
	d, ok, err := c.DescribeOwned(name)
	return d, ok && err == nil
}

// DescribeOwned is Describe that also says why there is nothing:
// ErrNotCoordinator when another broker coordinates the group.
func (c *Coordinator) DescribeOwned(name string) (Description, bool, error) {
	ctx, cancel := quickContext()
	defer cancel()
	g, err := c.find(ctx, name)
	if err != nil {
		return Description{Group: name, State: Dead}, false, err
	}
	if g == nil {
		return Description{Group: name, State: Dead}, false, nil
	}
	d, ok := c.describe(g, name)
	return d, ok, nil
}

func (c *Coordinator) describe(g *group, name string) (Description, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead || g.cg != nil {
		// Kafka answers DescribeGroups for a consumer group as for no
		// group: GROUP_ID_NOT_FOUND, "not a classic group".
		return Description{Group: name, State: Dead}, false
	}
	d := Description{Group: name, State: g.state, ProtocolType: g.protocolType, Generation: g.generation, Leader: g.leader}
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instance, ClientID: m.clientID, ClientHost: m.clientHost}
		if stable {
			md.Metadata = m.metadataFor(g.protocol)
			md.Assignment = m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}

// PartitionLag is how far a group's commit trails a partition's end.
type PartitionLag struct {
	Topic         string
	Partition     int32
	Committed     int64
	HighWatermark int64
	// Lag is HighWatermark - Committed: exact, since offsets are dense.
	Lag int64
}

// Lag returns the lag of every partition the group has committed, sorted
// by topic and partition. Partitions whose topic is gone are left out.
func (c *Coordinator) Lag(ctx context.Context, name string) ([]PartitionLag, error) {
	g, err := c.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	if err := g.ensureLoaded(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	committed := g.sortedOffsets()
	g.mu.Unlock()
	out := make([]PartitionLag, 0, len(committed))
	for _, o := range committed {
		hw, ok := c.opts.HighWatermark(o.Topic, o.Partition)
		if !ok {
			continue
		}
		out = append(out, PartitionLag{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, HighWatermark: hw, Lag: max(hw-o.Offset, 0)})
	}
	return out, nil
}
