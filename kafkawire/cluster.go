package kafkawire

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
)

// Several brokers over one Redis: what a connection is told about the
// others, and the leader checks of the partition APIs.

// node is a live broker as a client on this connection reaches it.
type node struct {
	id   int32
	host string
	port int32
	rack *string
}

// nodes are the live brokers by node id, each at its address on the
// listener of the same name as this connection's (this broker at the
// address of the listener the client came in on). A broker with no
// listener at all is left out: clients could not reach it.
func (c *conn) nodes() []node {
	bs := c.s.eng.Brokers()
	out := make([]node, 0, len(bs))
	for _, b := range bs {
		n, ok := c.nodeOf(b)
		if ok {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b node) int { return int(a.id) - int(b.id) })
	return out
}

func (c *conn) nodeOf(b engine.BrokerInfo) (node, bool) {
	n := node{id: b.NodeID, rack: nonEmpty(b.Rack)}
	switch {
	case b.Self:
		n.host, n.port = c.advertised()
	case len(b.Listeners) == 0:
		return n, false
	default:
		l := b.Listeners[0]
		if i := slices.IndexFunc(b.Listeners, func(l engine.ListenerAddr) bool { return l.Name == c.l.Name }); i >= 0 {
			l = b.Listeners[i]
		}
		n.host, n.port = l.Host, l.Port
	}
	return n, true
}

// liveNode finds id among nodes.
func liveNode(nodes []node, id int32) (node, bool) {
	i := slices.IndexFunc(nodes, func(n node) bool { return n.id == id })
	if i < 0 {
		return node{}, false
	}
	return nodes[i], true
}

// controllerID is what Metadata and DescribeCluster name as the
// controller: korvet has none (Redis holds the shared state), so the
// lowest live node id, which every broker computes alike.
func controllerID(nodes []node) int32 {
	if len(nodes) == 0 {
		return -1
	}
	return nodes[0].id
}

// partitionLeader is a partition's leader as Metadata shows it: -1 with
// LEADER_NOT_AVAILABLE when the leader this broker knows is not live
// (its lease lapsed and nobody has claimed the partition yet).
func partitionLeader(p *engine.Partition, nodes []node) (leader, epoch int32, code int16) {
	leader, epoch = p.Leader()
	if _, ok := liveNode(nodes, leader); leader < 0 || !ok {
		return -1, epoch, kerr.LeaderNotAvailable.Code
	}
	return leader, epoch, 0
}

// replicas is the replica list of a partition led by leader: the leader
// alone, as Redis holds the only copy and any broker can take over.
func replicas(leader int32) []int32 {
	if leader < 0 {
		return []int32{}
	}
	return []int32{leader}
}

// leaderCode checks that this broker leads p and that the request's
// current leader epoch (KIP-320; -1: no check) matches, in Kafka's order:
// an older epoch is FENCED_LEADER_EPOCH (the client's metadata is stale:
// it refreshes), a newer one UNKNOWN_LEADER_EPOCH (this broker has not
// seen the move yet: the client retries), and then a broker that does not
// lead answers NOT_LEADER_OR_FOLLOWER. It returns the leader and epoch
// this broker knows, for KIP-951's CurrentLeader.
func leaderCode(p *engine.Partition, currentEpoch int32) (code int16, leader, epoch int32) {
	leader, epoch = p.Leader()
	switch {
	case currentEpoch >= 0 && currentEpoch < epoch:
		return kerr.FencedLeaderEpoch.Code, leader, epoch
	case currentEpoch > epoch:
		return kerr.UnknownLeaderEpoch.Code, leader, epoch
	case !p.IsLeader():
		return kerr.NotLeaderForPartition.Code, leader, epoch
	}
	return 0, leader, epoch
}

// leaderHints collects the leaders a response names in KIP-951
// CurrentLeader fields, so that it can list their endpoints.
type leaderHints struct {
	c   *conn
	ids []int32
}

// hint is the (leader, epoch) to put in CurrentLeader for an error code:
// only the leader errors carry one (-1, -1 otherwise, as Kafka), and
// NOT_LEADER_OR_FOLLOWER never names this broker (a deposed leader that
// has not yet heard who took over knows no better leader). Endpoints are
// listed for live leaders only.
func (h *leaderHints) hint(code int16, leader, epoch int32) (int32, int32) {
	switch {
	case leader < 0,
		code == kerr.NotLeaderForPartition.Code && leader == h.c.s.eng.NodeID(),
		code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code:
		return -1, -1
	}
	if !slices.Contains(h.ids, leader) {
		h.ids = append(h.ids, leader)
	}
	return leader, epoch
}

// endpoints are the live brokers among the hinted leaders.
func (h *leaderHints) endpoints() []node {
	if len(h.ids) == 0 {
		return nil
	}
	var out []node
	for _, n := range h.c.nodes() {
		if slices.Contains(h.ids, n.id) {
			out = append(out, n)
		}
	}
	return out
}

// coordinates is group.ErrNotCoordinator (NOT_COORDINATOR: the client
// asks FindCoordinator again) for a group another broker coordinates.
// Every group API checks it first, at the door, so that each agrees with
// FindCoordinator whatever the group coordinator holds in memory.
func (c *conn) coordinates(name string) error {
	if id := c.s.eng.Coordinator(name); id != c.s.eng.NodeID() {
		return fmt.Errorf("%w: broker %d coordinates group %q, this is broker %d", group.ErrNotCoordinator, id, name, c.s.eng.NodeID())
	}
	return nil
}
