package web

import (
	"context"
	"net/http"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/events"
)

// Several brokers over one Redis: /api/v1/brokers and the status page's
// Brokers section. Anyone who may see the status page sees them, as any
// Kafka client sees the brokers in Metadata.

type brokerListJSON struct {
	Self int32 `json:"self"` // the node id of the broker that answered
	// Groups is false when the stored groups could not be read: the
	// groups_coordinated counts are then absent, not zero.
	Groups  bool             `json:"groups_counted"`
	Error   string           `json:"error,omitempty"`
	Brokers []liveBrokerJSON `json:"brokers"`
}

type liveBrokerJSON struct {
	NodeID    int32          `json:"node_id"`
	Self      bool           `json:"self"`
	Rack      string         `json:"rack"`
	Listeners []listenerJSON `json:"listeners"`
	Started   time.Time      `json:"started"`
	Renewed   time.Time      `json:"renewed"`
	// LeaseAgeSeconds is how long ago its lease was last renewed: a
	// broker whose lease is older than kafka.broker_session_timeout is
	// gone.
	LeaseAgeSeconds   float64 `json:"lease_age_seconds"`
	PartitionsLed     int     `json:"partitions_led"`
	GroupsCoordinated *int    `json:"groups_coordinated,omitempty"`
}

type listenerJSON struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

func (s *server) apiBrokers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, s.brokerViews(ctx))
}

// brokerViews lists the live brokers with what each leads and
// coordinates, as this broker sees it.
func (s *server) brokerViews(ctx context.Context) brokerListJSON {
	now := time.Now()
	out := brokerListJSON{Self: s.eng.NodeID(), Brokers: []liveBrokerJSON{}}
	led := s.partitionsLed()
	groups, err := s.groupsCoordinated(ctx)
	if err != nil {
		out.Error = err.Error()
	} else {
		out.Groups = true
	}
	for _, b := range s.eng.Brokers() {
		v := liveBrokerJSON{NodeID: b.NodeID, Self: b.Self, Rack: b.Rack, Listeners: []listenerJSON{},
			Started: b.Started, Renewed: b.Renewed, LeaseAgeSeconds: max(now.Sub(b.Renewed).Seconds(), 0),
			PartitionsLed: led[b.NodeID]}
		for _, l := range b.Listeners {
			v.Listeners = append(v.Listeners, listenerJSON(l))
		}
		if out.Groups {
			n := groups[b.NodeID]
			v.GroupsCoordinated = &n
		}
		out.Brokers = append(out.Brokers, v)
	}
	return out
}

// partitionsLed counts the partitions of every topic by leader node id,
// as this broker last saw the leaders.
func (s *server) partitionsLed() map[int32]int {
	led := map[int32]int{}
	for _, t := range s.eng.Topics() {
		for _, p := range t.Partitions() {
			if node, _ := p.Leader(); node >= 0 {
				led[node]++
			}
		}
	}
	return led
}

// groupsCoordinated counts the stored groups (consumer and share) by the
// node id of their coordinator.
func (s *server) groupsCoordinated(ctx context.Context) (map[int32]int, error) {
	names, err := s.eng.StoredGroupNames(ctx)
	if err != nil {
		return nil, err
	}
	n := map[int32]int{}
	for _, g := range names {
		n[s.eng.Coordinator(g)]++
	}
	return n, nil
}

// countLeaderMoves counts the partition leadership moves this broker
// hears of (every broker hears of every move) for /metrics. The
// subscription lasts as long as the engine: the handler serves until the
// process ends.
func (s *server) countLeaderMoves(eng *engine.Engine) {
	eng.Events().Subscribe(events.Leader, func(events.Event) { s.leaderMoves.Add(1) })
}
