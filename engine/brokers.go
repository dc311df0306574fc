package engine

import (
	"errors"
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

// Brokers lists the live brokers by node id, this one included.
func (e *Engine) Brokers() []BrokerInfo {
	return []BrokerInfo{{NodeID: e.opts.NodeID, Rack: e.opts.Rack, Listeners: e.opts.Listeners, Started: e.started, Renewed: time.Now(), Self: true}}
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
// group (or transactional id) key.
func (e *Engine) Coordinator(key string) int32 { return e.opts.NodeID }

// Leader is the partition's leader and leader epoch as this broker last
// saw them; node -1 when it has none.
func (p *Partition) Leader() (node, epoch int32) { return p.t.e.opts.NodeID, 0 }

// IsLeader tells whether this broker leads the partition now.
func (p *Partition) IsLeader() bool { return true }

// EpochEnd answers OffsetForLeaderEpoch: for a leader epoch, the largest
// epoch not above it that the partition had and the offset where that
// epoch's records end (the log end offset for the current epoch); epoch
// -1 and offset -1 when the log has no epoch that old.
func (p *Partition) EpochEnd(epoch int32) (int32, int64) {
	return 0, p.HighWatermark()
}
