package engine

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/korvet/korvet/engine/events"
)

// ListenerAddr is one of a broker's Kafka listeners as clients reach it.
type ListenerAddr struct {
	Name string // "PLAINTEXT" (kafka.listen) or "TLS" (kafka.tls)
	Host string
	Port int32
}

// BrokerInfo is a live broker as registered in Redis.
type BrokerInfo struct {
	NodeID    int32
	Rack      string
	Listeners []ListenerAddr
	Started   time.Time
	Renewed   time.Time // when its lease was last renewed
	Self      bool      // this process
}

// ErrNotLeader: this broker does not lead the partition (any more): the
// client should refresh its metadata and go to the leader. A deposed
// leader's in-flight appends fail with it too; none of them was written.
var ErrNotLeader = errors.New("this broker is not the partition's leader")

// NodeID is this broker's kafka.node_id.
func (e *Engine) NodeID() int32 { return e.opts.NodeID }

// Events is the bus on which brokers sharing the keyspace announce
// changes to shared state.
func (e *Engine) Events() *events.Bus { return e.events }

// Brokers lists the live brokers by node id, this one included while it
// holds its lease (a leaving broker is listed until it has left).
func (e *Engine) Brokers() []BrokerInfo {
	c := &e.cl
	c.mu.Lock()
	out := make([]BrokerInfo, 0, len(c.live)+1)
	self := false
	for id, rec := range c.live {
		if id == e.opts.NodeID {
			if c.token == "" {
				continue
			}
			self = true
		}
		out = append(out, rec.info(id == e.opts.NodeID))
	}
	if !self && c.token != "" {
		rec := e.record(stateLive)
		rec.Renewed = c.renewedAt.UnixMilli()
		out = append(out, rec.info(true))
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b BrokerInfo) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return out
}

func (r brokerRecord) info(self bool) BrokerInfo {
	b := BrokerInfo{NodeID: r.Node, Rack: r.Rack, Started: time.UnixMilli(r.Started), Renewed: time.UnixMilli(r.Renewed), Self: self}
	for _, l := range r.Listeners {
		b.Listeners = append(b.Listeners, ListenerAddr(l))
	}
	return b
}

// Broker returns one live broker.
func (e *Engine) Broker(id int32) (BrokerInfo, bool) {
	for _, b := range e.Brokers() {
		if b.NodeID == id {
			return b, true
		}
	}
	return BrokerInfo{}, false
}

// Coordinator is the node id of the live broker that coordinates the
// group (or transactional id) key: the rendezvous-hash winner among live,
// non-leaving brokers (this one when it knows no other).
func (e *Engine) Coordinator(key string) int32 {
	if n := hrw(key, e.liveNodes()); n >= 0 {
		return n
	}
	return e.opts.NodeID
}

// Leader is the partition's leader and leader epoch as this broker last
// saw them; node -1 when it has none.
func (p *Partition) Leader() (node, epoch int32) { return p.leaderNode.Load(), p.leaderEpoch.Load() }

// IsLeader tells whether this broker leads the partition now.
func (p *Partition) IsLeader() bool { return p.lead.Load() }

// PreferredLeader is the broker that should lead the partition by this
// broker's view of the live brokers: leadership moves there when it can.
// -1 when this broker knows no live broker.
func (p *Partition) PreferredLeader() int32 { return hrw(p.hrwKey(), p.t.e.liveNodes()) }

// EpochEnd answers OffsetForLeaderEpoch as Kafka's leader epoch cache
// does: for the current epoch, it and the log end offset; for an older
// one, the largest epoch not above it that the partition had and the
// start offset of the epoch after it (where its records end); for one
// older than every epoch kept, the epoch asked and the first kept
// epoch's start; for one newer than the current epoch, or -1, epoch -1
// and offset -1. Records written before korvet kept epochs count as
// epoch 0, which ends where epoch 1 starts.
func (p *Partition) EpochEnd(epoch int32) (int32, int64) {
	cur := p.leaderEpoch.Load()
	switch {
	case epoch < 0 || epoch > cur:
		return -1, -1
	case epoch == cur:
		return cur, p.HighWatermark()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	floor, higher, end := int32(-1), int32(-1), int64(-1)
	for e, start := range p.epochs {
		if e <= epoch && e > floor {
			floor = e
		}
		if e > epoch && (higher < 0 || e < higher) {
			higher, end = e, start
		}
	}
	switch {
	case higher < 0: // the history lost the epochs after it: it runs to the end
		return max(floor, epoch), p.HighWatermark()
	case floor < 0:
		return epoch, end
	}
	return floor, end
}
