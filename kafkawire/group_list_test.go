package kafkawire_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListGroupsVersions: ListGroups v0-5; v4's state filter and v5's
// type filter (KIP-848), alone and together. korvet's groups are all
// classic: a filter of only other types lists none.
func TestListGroupsVersions(t *testing.T) {
	b := startBroker(t, groupOpts())
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 1, 1, nil, "lg-topic"); err != nil {
		t.Fatal(err)
	}
	c := newRawGroupConn(t, b)
	// lg-stable: one member, joined and synced. lg-empty: offsets only.
	id := c.memberID("lg-stable")
	jr := c.do(joinReq(9, "lg-stable", id, "", "range")).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.LeaderID != id {
		t.Fatalf("join: %+v", jr)
	}
	if sr := c.do(syncReq("lg-stable", id, jr.Generation, map[string]string{id: "a"})).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	expectCode(t, "commit for lg-empty", commit(c, 2, "lg-empty", "", -1, "lg-topic", 5, ""), nil)

	list := func(v int16, states, types []string) []string {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter, req.TypesFilter = v, states, types
		resp := c.do(req).(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
		var out []string
		for _, g := range resp.Groups {
			desc := g.Group + "/" + g.ProtocolType
			if v >= 4 {
				desc += "/" + g.GroupState
			}
			if v >= 5 {
				desc += "/" + g.GroupType
			}
			out = append(out, desc)
		}
		slices.Sort(out)
		return out
	}
	for v := int16(0); v <= 5; v++ {
		want := []string{"lg-empty/", "lg-stable/consumer"}
		switch {
		case v >= 5:
			want = []string{"lg-empty//Empty/classic", "lg-stable/consumer/Stable/classic"}
		case v >= 4:
			want = []string{"lg-empty//Empty", "lg-stable/consumer/Stable"}
		}
		if got := list(v, nil, nil); !slices.Equal(got, want) {
			t.Errorf("v%d: %v, want %v", v, got, want)
		}
	}
	both := []string{"lg-empty//Empty/classic", "lg-stable/consumer/Stable/classic"}
	for _, tc := range []struct {
		states, types []string
		want          []string
	}{
		{nil, []string{"consumer"}, nil},
		{nil, []string{"share"}, nil},
		{nil, []string{"classic"}, both},
		{nil, []string{"Classic"}, both},
		{nil, []string{"consumer", "classic"}, both},
		{[]string{"stable"}, nil, both[1:]},
		{[]string{"Empty"}, []string{"classic"}, both[:1]},
		{[]string{"Empty", "Stable"}, []string{"classic"}, both},
		{[]string{"Empty"}, []string{"consumer"}, nil},
		{[]string{"Reconciling"}, []string{"classic"}, nil},
	} {
		if got := list(5, tc.states, tc.types); !slices.Equal(got, tc.want) {
			t.Errorf("states %v types %v: %v, want %v", tc.states, tc.types, got, tc.want)
		}
	}
	// kadm's ListGroupsByType sends the same filter.
	adm := b.admin()
	ctx := ctxT(t, 10*time.Second)
	for _, tc := range []struct {
		types []string
		want  int
	}{{[]string{"consumer"}, 0}, {[]string{"classic"}, 2}, {nil, 2}} {
		groups, err := adm.ListGroupsByType(ctx, tc.types)
		if err != nil || len(groups) != tc.want {
			t.Errorf("kadm ListGroupsByType(%v): %v %v, want %d groups", tc.types, err, groups.Groups(), tc.want)
		}
	}
}
