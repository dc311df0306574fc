package group

import (
	"fmt"
	"testing"
)

func tid(b byte) TopicID { return TopicID{b} }

// checkComplete: every partition of every topic goes to exactly one
// member subscribed to it.
func checkComplete(t *testing.T, ms []AssignorMember, ts []AssignorTopic, got map[string]Assignment) {
	t.Helper()
	owner := map[string]string{}
	for id, a := range got {
		for topic, ps := range a {
			for _, p := range ps {
				k := fmt.Sprint(topic[0], "/", p)
				if o, ok := owner[k]; ok {
					t.Fatalf("partition %s given to %s and %s", k, o, id)
				}
				owner[k] = id
			}
		}
	}
	for _, tp := range ts {
		for p := int32(0); p < tp.Partitions; p++ {
			k := fmt.Sprint(tp.ID[0], "/", p)
			subscribed := false
			for _, m := range ms {
				for _, mt := range m.Topics {
					subscribed = subscribed || mt == tp.ID
				}
			}
			if _, ok := owner[k]; !ok && subscribed {
				t.Fatalf("partition %s unassigned: %v", k, got)
			}
		}
	}
}

func TestUniformBalancedAndSticky(t *testing.T) {
	ts := []AssignorTopic{{tid(1), "a", 6}, {tid(2), "b", 7}}
	both := []TopicID{tid(1), tid(2)}
	ms := []AssignorMember{{ID: "m1", Topics: both}, {ID: "m2", Topics: both}, {ID: "m3", Topics: both}}
	first := Assign(AssignorUniform, ms, ts)
	checkComplete(t, ms, ts, first)
	for id, a := range first {
		if n := a.count(); n < 4 || n > 5 {
			t.Fatalf("%s has %d of 13 partitions over 3 members: %v", id, n, first)
		}
	}
	// A fourth member joins: the others keep what they can and give up
	// just enough.
	for i := range ms {
		ms[i].Current = first[ms[i].ID]
	}
	ms = append(ms, AssignorMember{ID: "m4", Topics: both})
	second := Assign(AssignorUniform, ms, ts)
	checkComplete(t, ms, ts, second)
	moved := 0
	for _, m := range ms[:3] {
		for topic, ps := range m.Current {
			for _, p := range ps {
				if !second[m.ID].has(topic, p) {
					moved++
				}
			}
		}
	}
	if n := second["m4"].count(); n < 3 || n > 4 {
		t.Fatalf("new member got %d partitions: %v", n, second)
	}
	if moved != second["m4"].count() {
		t.Fatalf("%d partitions moved, but the new member got %d: only its share should move", moved, second["m4"].count())
	}
	// Heterogeneous: m2 subscribes to b only.
	ms = []AssignorMember{{ID: "m1", Topics: both}, {ID: "m2", Topics: []TopicID{tid(2)}}}
	got := Assign(AssignorUniform, ms, ts)
	checkComplete(t, ms, ts, got)
	if len(got["m2"][tid(1)]) != 0 {
		t.Fatalf("m2 got a partition of a topic it does not subscribe to: %v", got)
	}
	if n1, n2 := got["m1"].count(), got["m2"].count(); n1-n2 > 1 || n2-n1 > 1 {
		t.Fatalf("unbalanced: m1 %d, m2 %d", n1, n2)
	}
}

func TestRangeSemantics(t *testing.T) {
	ts := []AssignorTopic{{tid(1), "a", 7}, {tid(2), "b", 2}}
	both := []TopicID{tid(1), tid(2)}
	ms := []AssignorMember{{ID: "c", Topics: both}, {ID: "a", Topics: both}, {ID: "b", Topics: both}}
	got := Assign(AssignorRange, ms, ts)
	checkComplete(t, ms, ts, got)
	want := map[string]string{
		"a": "[0 1 2] [0]",
		"b": "[3 4] [1]",
		"c": "[5 6] []",
	}
	for id, w := range want {
		if g := fmt.Sprint(got[id][tid(1)], " ", got[id][tid(2)]); g != w {
			t.Errorf("range gave %s %s, want %s", id, g, w)
		}
	}
}
