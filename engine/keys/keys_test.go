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
	s := New(Default, false)
	c := New(Default, true)
	for _, c := range []struct{ got, want string }{
		{s.Topics(), "korvet:meta:topics"},
		{s.Cluster(), "korvet:meta:cluster"},
		{s.Partition("t", 0), "korvet:meta:partition:t:0"},
		{s.Stream("t", 0, 0), "korvet:storage:local:t:0:0"},
		{s.Stream("t", 0, 12), "korvet:storage:local:t:0:12"},
		{s.Batches("t", 0), "korvet:meta:batches:t:0"},
		{s.Segments("t", 0), "korvet:meta:segments:t:0"},
		{s.ColdGarbage(), "korvet:meta:coldgc"},
		{s.ZstdDicts("t"), "korvet:meta:zdict:t"},
		{s.Aborted("t", 0), "korvet:meta:aborted:t:0"},
		{s.Fence("t", 0), "korvet:meta:fence:t:0"},
		{s.Transactions(), "korvet:meta:transactions"},
		{s.GroupTxnOffsets("g"), "korvet:group:g:txnoffsets"},
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
		{s.Schemas(), "korvet:meta:schemas"},
		{s.SchemaIDs(), "korvet:meta:schemaids"},
		{s.Subjects(), "korvet:meta:subjects"},
		{s.SchemaConfig(), "korvet:meta:schemaconfig"},
		{New("kv1", false).Stream("a.b-c_d", 2147483647, 9223372036854775807), "kv1:storage:local:a.b-c_d:2147483647:9223372036854775807"},
		// The Redis Cluster layout.
		{c.Topics(), "korvet:{meta}:topics"},
		{c.Cluster(), "korvet:{meta}:cluster"},
		{c.Partition("t", 0), "korvet:meta:partition:{t:0}"},
		{c.Stream("t", 0, 12), "korvet:storage:local:{t:0}:12"},
		{c.Batches("t", 0), "korvet:meta:batches:{t:0}"},
		{c.Segments("t", 0), "korvet:meta:segments:{t:0}"},
		{c.ColdGarbage(), "korvet:{meta}:coldgc"},
		{c.ZstdDicts("t"), "korvet:{meta}:zdict:t"},
		{c.Aborted("t", 0), "korvet:meta:aborted:{t:0}"},
		{c.Fence("t", 0), "korvet:meta:fence:{t:0}"},
		{c.Transactions(), "korvet:{txns}:transactions"},
		{c.GroupTxnOffsets("g"), "korvet:{groups}:group:g:txnoffsets"},
		{c.Events(), "korvet:{meta}:events"},
		{c.Brokers(), "korvet:{meta}:brokers"},
		{c.BrokerLease(3), "korvet:{meta}:broker:3"},
		{c.Groups(), "korvet:{groups}:groups"},
		{c.GroupState("g"), "korvet:{groups}:group:g:state"},
		{c.GroupOffsets("g"), "korvet:{groups}:group:g:offsets"},
		{c.ConsumerGroupState("g"), "korvet:{groups}:group:g:consumer"},
		{c.SCRAM("SCRAM-SHA-256"), "korvet:{meta}:scram:SCRAM-SHA-256"},
		{c.ACLs(), "korvet:{meta}:acls"},
		{c.ShareGroups(), "korvet:{meta}:sharegroups"},
		{c.GroupConfigs(), "korvet:{meta}:groupconfigs"},
		{c.SharePartition("g", "t", 1), "korvet:share:{t:1}:state:g"},
		{c.ShareIndex("g"), "korvet:{groups}:share:g:partitions"},
		{c.ShareCold("g", "t", 1), "korvet:share:{t:1}:cold:g"},
		{c.Schemas(), "korvet:{schemas}:schemas"},
		{c.SchemaIDs(), "korvet:{schemas}:schemaids"},
		{c.Subjects(), "korvet:{schemas}:subjects"},
		{c.SchemaConfig(), "korvet:{schemas}:schemaconfig"},
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
	for _, cluster := range []bool{false, true} {
		checkLayout(t, cluster)
	}
}

func checkLayout(t *testing.T, cluster bool) {
	sample := strings.NewReplacer("{keyspace}", "ks", "{topic}", "orders", "{partition}", "3",
		"{segment}", "7", "{group}", "billing", "{mechanism}", "SCRAM-SHA-512", "{node}", "5")
	s := New("ks", cluster)
	built := map[string]string{ // Space method -> its key for the sample
		"Topics":             s.Topics(),
		"Cluster":            s.Cluster(),
		"Partition":          s.Partition("orders", 3),
		"Stream":             s.Stream("orders", 3, 7),
		"Batches":            s.Batches("orders", 3),
		"Segments":           s.Segments("orders", 3),
		"ColdGarbage":        s.ColdGarbage(),
		"ZstdDicts":          s.ZstdDicts("orders"),
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
		"Aborted":            s.Aborted("orders", 3),
		"Fence":              s.Fence("orders", 3),
		"Transactions":       s.Transactions(),
		"GroupTxnOffsets":    s.GroupTxnOffsets("billing"),
		"Schemas":            s.Schemas(),
		"SchemaIDs":          s.SchemaIDs(),
		"Subjects":           s.Subjects(),
		"SchemaConfig":       s.SchemaConfig(),
	}
	typ := reflect.TypeFor[Space]()
	for i := range typ.NumMethod() {
		// AppendStream builds Stream's key (TestAppendStream).
		if name := typ.Method(i).Name; built[name] == "" && name != "Prefix" && name != "IsCluster" && name != "AppendStream" {
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
		pattern := k.Pattern
		if cluster {
			pattern = k.Cluster
		}
		key := sample.Replace(pattern)
		if tag, ok := hashTag(key); cluster && !ok {
			t.Errorf("%s: no hash tag", pattern)
		} else if strings.ContainsAny(strings.Replace(key, "{"+tag+"}", "", 1), "{}") {
			t.Errorf("%s: unknown placeholder", pattern)
		}
		if prev, dup := byKey[key]; dup {
			t.Errorf("%s and %s build the same key %s", prev.Pattern, k.Pattern, key)
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

// hashTag returns the text Redis Cluster hashes for key, if not the whole
// key: between the first '{' and the next '}', when not empty.
func hashTag(key string) (string, bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return key[i+1 : i+1+j], true
}

// TestClusterKeysShareSlots checks the promise the cluster layout makes:
// every key of one partition in one slot, different partitions in
// different slots, and the keys korvet changes together (metadata; group
// state) each in one slot. Group names that hold braces or colons must not
// move a key out of its slot.
func TestClusterKeysShareSlots(t *testing.T) {
	s := New("korvet", true)
	for _, g := range []string{"billing", "{x}", "a}b{c", "g:cold"} {
		tag := func(key string) string {
			tg, ok := hashTag(key)
			if !ok {
				t.Fatalf("%s has no hash tag", key)
			}
			return tg
		}
		part := []string{s.Stream("orders", 3, 0), s.Stream("orders", 3, 99), s.Partition("orders", 3), s.Batches("orders", 3),
			s.Segments("orders", 3), s.SharePartition(g, "orders", 3), s.ShareCold(g, "orders", 3)}
		for _, k := range part {
			if tag(k) != "orders:3" {
				t.Errorf("%s: tag %q, want orders:3", k, tag(k))
			}
		}
		if s.SharePartition(g, "orders", 3) == s.ShareCold(g, "orders", 3) {
			t.Errorf("share state and cold state of group %q build the same key", g)
		}
		for _, k := range []string{s.Groups(), s.GroupState(g), s.GroupOffsets(g), s.ConsumerGroupState(g), s.ShareIndex(g)} {
			if tag(k) != "groups" {
				t.Errorf("%s: tag %q, want groups", k, tag(k))
			}
		}
	}
	for _, k := range []string{s.Topics(), s.Cluster(), s.Events(), s.Brokers(), s.BrokerLease(7), s.ColdGarbage(), s.ZstdDicts("orders"),
		s.SCRAM("SCRAM-SHA-512"), s.ACLs(), s.ShareGroups(), s.GroupConfigs()} {
		if tg, _ := hashTag(k); tg != "meta" {
			t.Errorf("%s: tag %q, want meta", k, tg)
		}
	}
	if tg, _ := hashTag(s.Partition("orders", 4)); tg == "orders:3" {
		t.Error("partitions 3 and 4 share a tag")
	}
	for _, k := range []string{New("korvet", false).Stream("orders", 3, 0), New("korvet", false).Topics()} {
		if strings.ContainsAny(k, "{}") {
			t.Errorf("standalone key %s has braces", k)
		}
	}
}

// AppendStream builds Stream's bytes, in both layouts.
func TestAppendStream(t *testing.T) {
	for _, s := range []Space{New(Default, false), New(Default, true), New("other", false)} {
		for _, c := range []struct {
			topic string
			part  int32
			seg   int64
		}{{"t", 0, 0}, {"orders.v2", 11, 12345678901}, {"{x}", 3, 7}} {
			if got, want := string(s.AppendStream([]byte("junk"), c.topic, c.part, c.seg)), "junk"+s.Stream(c.topic, c.part, c.seg); got != want {
				t.Errorf("AppendStream %+v: %q, want %q", c, got, want)
			}
		}
	}
}
