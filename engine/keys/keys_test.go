package keys

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKeysPinned pins the exact key strings: they are korvet's storage
// format, and a change here loses what users stored.
func TestKeysPinned(t *testing.T) {
	s := Space(Default)
	for _, c := range []struct{ got, want string }{
		{s.Topics(), "korvet:meta:topics"},
		{s.Cluster(), "korvet:meta:cluster"},
		{s.Partition("t", 0), "korvet:meta:partition:t:0"},
		{s.Stream("t", 0, 0), "korvet:storage:local:t:0:0"},
		{s.Stream("t", 0, 12), "korvet:storage:local:t:0:12"},
		{s.Batches("t", 0), "korvet:meta:batches:t:0"},
		{s.Segments("t", 0), "korvet:meta:segments:t:0"},
		{s.ColdGarbage(), "korvet:meta:coldgc"},
		{s.Events(), "korvet:meta:events"},
		{s.Brokers(), "korvet:meta:brokers"},
		{s.BrokerLease(3), "korvet:meta:broker:3"},
		{s.Groups(), "korvet:meta:groups"},
		{s.GroupState("g"), "korvet:group:g:state"},
		{s.GroupOffsets("g"), "korvet:group:g:offsets"},
		{s.ConsumerGroupState("g"), "korvet:group:g:consumer"},
		{s.SCRAM("SCRAM-SHA-256"), "korvet:meta:scram:SCRAM-SHA-256"},
		{s.ACLs(), "korvet:meta:acls"},
		{s.ShareGroups(), "korvet:meta:sharegroups"},
		{s.GroupConfigs(), "korvet:meta:groupconfigs"},
		{s.SharePartition("g", "t", 1), "korvet:share:g:t:1"},
		{s.ShareIndex("g"), "korvet:share:g:partitions"},
		{s.ShareCold("g", "t", 1), "korvet:share:g:t:1:cold"},
		{Space("kv1").Stream("a.b-c_d", 2147483647, 9223372036854775807), "kv1:storage:local:a.b-c_d:2147483647:9223372036854775807"},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
}

// TestKeysLayoutMatchesBuilders checks that Layout lists every key Space
// builds, with the pattern it builds: each builder, given distinct sample
// values, yields its pattern with the placeholders filled in.
func TestKeysLayoutMatchesBuilders(t *testing.T) {
	sample := strings.NewReplacer("{keyspace}", "ks", "{topic}", "orders", "{partition}", "3",
		"{segment}", "7", "{group}", "billing", "{mechanism}", "SCRAM-SHA-512", "{node}", "5")
	s := Space("ks")
	built := map[string]string{ // Space method -> its key for the sample
		"Topics":             s.Topics(),
		"Cluster":            s.Cluster(),
		"Partition":          s.Partition("orders", 3),
		"Stream":             s.Stream("orders", 3, 7),
		"Batches":            s.Batches("orders", 3),
		"Segments":           s.Segments("orders", 3),
		"ColdGarbage":        s.ColdGarbage(),
		"Events":             s.Events(),
		"Brokers":            s.Brokers(),
		"BrokerLease":        s.BrokerLease(5),
		"Groups":             s.Groups(),
		"GroupState":         s.GroupState("billing"),
		"GroupOffsets":       s.GroupOffsets("billing"),
		"SCRAM":              s.SCRAM("SCRAM-SHA-512"),
		"ACLs":               s.ACLs(),
		"ShareGroups":        s.ShareGroups(),
		"GroupConfigs":       s.GroupConfigs(),
		"SharePartition":     s.SharePartition("billing", "orders", 3),
		"ShareIndex":         s.ShareIndex("billing"),
		"ShareCold":          s.ShareCold("billing", "orders", 3),
		"ConsumerGroupState": s.ConsumerGroupState("billing"),
	}
	typ := reflect.TypeFor[Space]()
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; built[name] == "" {
			t.Errorf("Space.%s is not in this test: add it here and to Layout", name)
		}
	}
	layout := Layout()
	byKey := map[string]Key{}
	for _, k := range layout {
		if !slices.Contains([]string{"hash", "stream", "set", "string"}, k.Type) {
			t.Errorf("%s: unknown Redis type %q", k.Pattern, k.Type)
		}
		if k.Holds == "" {
			t.Errorf("%s: no description", k.Pattern)
		}
		key := sample.Replace(k.Pattern)
		if strings.ContainsAny(key, "{}") {
			t.Errorf("%s: unknown placeholder", k.Pattern)
		}
		if prev, dup := byKey[key]; dup {
			t.Errorf("%s and %s build the same key", prev.Pattern, k.Pattern)
		}
		byKey[key] = k
	}
	for name, key := range built {
		if _, ok := byKey[key]; !ok {
			t.Errorf("Space.%s builds %q, which no Layout pattern gives", name, key)
		}
		delete(byKey, key)
	}
	for _, k := range byKey {
		t.Errorf("Layout has %s, which no Space method builds", k.Pattern)
	}
}
