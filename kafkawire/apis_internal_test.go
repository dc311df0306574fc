package kafkawire

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// advertised is what ApiVersions answers a connection that is offered
// everything (a SASL listener, ACLs on, a user store). Clients pick their
// versions from it and librdkafka decides on compression by it (see
// apiTable), so a change here must be deliberate: write it out below.
var advertised = []struct {
	key      kmsg.Key
	min, max int16
}{
	{kmsg.Produce, 0, 13}, // v0-2 refused
	{kmsg.Fetch, 4, 18},
	{kmsg.ListOffsets, 0, 11},
	{kmsg.Metadata, 0, 13},
	{kmsg.OffsetCommit, 0, 9},
	{kmsg.OffsetFetch, 0, 9},
	{kmsg.FindCoordinator, 0, 6},
	{kmsg.JoinGroup, 0, 9},
	{kmsg.Heartbeat, 0, 4},
	{kmsg.LeaveGroup, 0, 5},
	{kmsg.SyncGroup, 0, 5},
	{kmsg.DescribeGroups, 0, 5},
	{kmsg.ListGroups, 0, 5},
	{kmsg.SASLHandshake, 0, 1},
	{kmsg.ApiVersions, 0, 5},
	{kmsg.CreateTopics, 0, 7},
	{kmsg.DeleteTopics, 0, 6},
	{kmsg.DeleteRecords, 0, 2},
	{kmsg.InitProducerID, 0, 5},
	{kmsg.OffsetForLeaderEpoch, 0, 4},
	{kmsg.AddPartitionsToTxn, 0, 5},
	{kmsg.AddOffsetsToTxn, 0, 4},
	{kmsg.EndTxn, 0, 5},
	{kmsg.TxnOffsetCommit, 0, 5},
	{kmsg.DescribeACLs, 0, 3},
	{kmsg.CreateACLs, 0, 3},
	{kmsg.DeleteACLs, 0, 3},
	{kmsg.DescribeConfigs, 0, 4},
	{kmsg.AlterConfigs, 0, 2},
	{kmsg.DescribeLogDirs, 0, 4},
	{kmsg.SASLAuthenticate, 0, 2},
	{kmsg.CreatePartitions, 0, 3},
	{kmsg.DeleteGroups, 0, 2},
	{kmsg.IncrementalAlterConfigs, 0, 1},
	{kmsg.OffsetDelete, 0, 0},
	{kmsg.DescribeUserSCRAMCredentials, 0, 0},
	{kmsg.AlterUserSCRAMCredentials, 0, 0},
	{kmsg.DescribeCluster, 0, 2},
	{kmsg.DescribeProducers, 0, 0},
	{kmsg.DescribeTransactions, 0, 0},
	{kmsg.ListTransactions, 0, 2},
	{kmsg.ConsumerGroupHeartbeat, 0, 1},
	{kmsg.ConsumerGroupDescribe, 0, 1},
	{kmsg.DescribeTopicPartitions, 0, 0},
	{kmsg.ShareGroupHeartbeat, 1, 1},
	{kmsg.ShareGroupDescribe, 1, 1},
	{kmsg.ShareFetch, 1, 2},
	{kmsg.ShareAcknowledge, 1, 2},
	{kmsg.DescribeShareGroupOffsets, 0, 1},
	{kmsg.AlterShareGroupOffsets, 0, 0},
	{kmsg.DeleteShareGroupOffsets, 0, 0},
}

// notOfferedPlain are the APIs a plain listener without SASL, ACLs or a
// user store leaves out of its answer (conn.offers).
var notOfferedPlain = map[kmsg.Key]bool{
	kmsg.SASLHandshake: true, kmsg.SASLAuthenticate: true,
	kmsg.DescribeACLs: true, kmsg.CreateACLs: true, kmsg.DeleteACLs: true,
	kmsg.DescribeUserSCRAMCredentials: true, kmsg.AlterUserSCRAMCredentials: true,
}

func apiVersionsLines(r *kmsg.ApiVersionsResponse) []string {
	var out []string
	for _, k := range r.ApiKeys {
		out = append(out, fmt.Sprintf("%s(%d) v%d-%d", kmsg.NameForKey(k.ApiKey), k.ApiKey, k.MinVersion, k.MaxVersion))
	}
	return out
}

func expectLines(plain bool) []string {
	var out []string
	for _, a := range advertised {
		if plain && notOfferedPlain[a.key] {
			continue
		}
		out = append(out, fmt.Sprintf("%s(%d) v%d-%d", a.key.Name(), int16(a.key), a.min, a.max))
	}
	return out
}

// TestApiVersionsAnswer: the ApiVersions answer, keys in order with their
// versions, is the list above, on a connection offered everything and on a
// plain one.
func TestApiVersionsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		mechs []string
		plain bool
	}{
		{"everything offered", Options{ACLs: true, Auth: new(auth.Store)}, []string{MechScramSHA256}, false},
		{"plain listener", Options{}, nil, true},
	} {
		c := &conn{s: &Server{apis: apiTable(), opts: tc.opts}, l: &listener{mechs: tc.mechs}}
		r := c.apiVersionsResponse(3)
		// transaction.version 2 (KIP-890 part 2): kgo reads the finalized
		// level, and only when the epoch is not -1.
		var feats []string
		for _, f := range r.SupportedFeatures {
			feats = append(feats, fmt.Sprintf("supported %s %d-%d", f.Name, f.MinVersion, f.MaxVersion))
		}
		for _, f := range r.FinalizedFeatures {
			feats = append(feats, fmt.Sprintf("finalized %s %d-%d", f.Name, f.MinVersionLevel, f.MaxVersionLevel))
		}
		if got := fmt.Sprint(feats); got != "[supported transaction.version 0-2 finalized transaction.version 2-2]" || r.FinalizedFeaturesEpoch != 1 {
			t.Errorf("%s: features %s at epoch %d", tc.name, got, r.FinalizedFeaturesEpoch)
		}
		got := apiVersionsLines(r)
		want := expectLines(tc.plain)
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("%s: ApiVersions entry %d is %q, want %q", tc.name, i, g, w)
			}
		}
	}
}

// TestEveryAPIHasACLRule: with ACLs on, an API without a rule is refused
// to everyone but super users, so every API in the table needs one (and a
// handler), and the table advertises nothing else.
func TestEveryAPIHasACLRule(t *testing.T) {
	table := apiTable()
	for key, a := range table {
		if a.rule == nil {
			t.Errorf("%s (key %d) has no authorization rule in apiTable", key.Name(), key)
		}
		if a.handle == nil {
			t.Errorf("%s (key %d) has no handler in apiTable", key.Name(), key)
		}
	}
	if len(table) != len(advertised) {
		t.Errorf("apiTable has %d APIs, ApiVersions advertises %d", len(table), len(advertised))
	}
	for _, a := range advertised {
		if _, ok := table[a.key]; !ok {
			t.Errorf("%s is advertised but not in apiTable", a.key.Name())
		}
	}
}
