package web

import (
	"testing"
	"time"

	"github.com/korvet/korvet/engine/group"
)

// TestAPIConsumerGroup: /api/v1/groups shows a KIP-848 consumer group with
// its type, epochs, assignor and members with their assignments.
func TestAPIConsumerGroup(t *testing.T) {
	eng, _ := openEngine(t)
	fill(t, eng, "events", 3, 6, "", 0)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	res, err := eng.Groups().ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Group: "next", MemberID: "m1", ClientID: "app",
		RebalanceTimeout: time.Second, TopicNames: []string{"events"}, Owned: group.Assignment{}})
	if err != nil || res.MemberEpoch != 1 {
		t.Fatalf("heartbeat: %+v %v", res, err)
	}
	var groups []groupJSON
	get(t, h, "/api/v1/groups", &groups)
	if len(groups) != 1 {
		t.Fatalf("groups = %+v", groups)
	}
	g := groups[0]
	if g.Group != "next" || g.Type != "consumer" || g.State != "Stable" || g.GroupEpoch != 1 || g.AssignmentEpoch != 1 || g.Assignor != "uniform" || g.Members != 1 || len(g.MemberList) != 1 {
		t.Fatalf("consumer group = %+v", g)
	}
	m := g.MemberList[0]
	if m.MemberID != "m1" || m.ClientID != "app" || m.Epoch != 1 || m.Protocol != "consumer" || len(m.Assignment) != 1 ||
		m.Assignment[0].Topic != "events" || len(m.Assignment[0].Partitions) != 3 || len(m.Target) != 1 {
		t.Fatalf("member = %+v", m)
	}
}
