package group

import (
	"bytes"
	"slices"
	"sort"
)

// TopicID is a topic's 16-byte id, which KIP-848 assignments carry.
type TopicID = [16]byte

// Assignment is the partitions of some topics, by topic id, each list
// sorted and without duplicates.
type Assignment map[TopicID][]int32

func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a Assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a Assignment) has(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// Add adds partition p of topic t.
func (a Assignment) Add(t TopicID, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a Assignment) remove(t TopicID, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}

// filter returns the partitions of a for which keep is true.
func (a Assignment) filter(keep func(TopicID, int32) bool) Assignment {
	out := Assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if keep(t, p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

func (a Assignment) equal(b Assignment) bool {
	if a.count() != b.count() {
		return false
	}
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// SortedTopics returns a's topic ids in byte order.
func (a Assignment) SortedTopics() []TopicID {
	ts := make([]TopicID, 0, len(a))
	for t := range a {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return bytes.Compare(ts[i][:], ts[j][:]) < 0 })
	return ts
}

// AssignorMember is one member as an assignor sees it: the topics it is
// subscribed to (resolved, existing ones) and its current target, which a
// sticky assignor keeps where it can.
type AssignorMember struct {
	ID      string
	Topics  []TopicID
	Current Assignment
}

// AssignorTopic is a subscribed topic with its partition count; Name
// orders topics for the range assignor, as Kafka's does.
type AssignorTopic struct {
	ID         TopicID
	Name       string
	Partitions int32
}

// Assignors korvet's coordinator runs, by the names Kafka gives them.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// KnownAssignor reports whether name is a server assignor korvet runs.
func KnownAssignor(name string) bool { return name == AssignorUniform || name == AssignorRange }

// Assign runs the named assignor. Members come back with every partition
// of every topic they subscribe to assigned to exactly one subscriber.
func Assign(name string, members []AssignorMember, topics []AssignorTopic) map[string]Assignment {
	ms := slices.Clone(members)
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	ts := slices.Clone(topics)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	if name == AssignorRange {
		return assignRange(ms, ts)
	}
	return assignUniform(ms, ts)
}

// assignRange gives each subscriber of a topic a contiguous range of its
// partitions, the first (partitions % subscribers) members one more, in
// member id order: classic range semantics, per topic.
func assignRange(ms []AssignorMember, ts []AssignorTopic) map[string]Assignment {
	out := make(map[string]Assignment, len(ms))
	for _, m := range ms {
		out[m.ID] = Assignment{}
	}
	for _, t := range ts {
		var subs []string
		for _, m := range ms {
			if slices.Contains(m.Topics, t.ID) {
				subs = append(subs, m.ID)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n, extra := int(t.Partitions)/len(subs), int(t.Partitions)%len(subs)
		p := int32(0)
		for i, id := range subs {
			k := n
			if i < extra {
				k++
			}
			for j := 0; j < k; j++ {
				out[id][t.ID] = append(out[id][t.ID], p)
				p++
			}
		}
	}
	return out
}

// assignUniform spreads partitions evenly over their subscribers while
// keeping members' current partitions where balance allows: a member keeps
// what it has, free partitions go to the least loaded subscriber, then
// partitions move from a member to a subscriber holding at least two fewer
// until none can. With identical subscriptions counts then differ by at
// most one.
func assignUniform(ms []AssignorMember, ts []AssignorTopic) map[string]Assignment {
	out := make(map[string]Assignment, len(ms))
	load := make(map[string]int, len(ms))
	subs := make(map[TopicID][]string, len(ts))
	parts := make(map[TopicID]int32, len(ts))
	for _, t := range ts {
		parts[t.ID] = t.Partitions
	}
	for _, m := range ms {
		out[m.ID] = Assignment{}
		for _, t := range m.Topics {
			if _, ok := parts[t]; ok {
				subs[t] = append(subs[t], m.ID)
			}
		}
	}
	taken := make(map[TopicID]map[int32]bool, len(ts))
	for _, t := range ts {
		taken[t.ID] = make(map[int32]bool)
	}
	// Keep current partitions still valid and not yet taken.
	for _, m := range ms {
		for _, t := range m.Current.SortedTopics() {
			if !slices.Contains(m.Topics, t) {
				continue
			}
			n, ok := parts[t]
			if !ok {
				continue
			}
			for _, p := range m.Current[t] {
				if p < n && !taken[t][p] {
					taken[t][p] = true
					out[m.ID][t] = append(out[m.ID][t], p)
					load[m.ID]++
				}
			}
		}
	}
	leastLoaded := func(cands []string) string {
		best := ""
		for _, id := range cands {
			if best == "" || load[id] < load[best] {
				best = id
			}
		}
		return best
	}
	for _, t := range ts {
		if len(subs[t.ID]) == 0 {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			if taken[t.ID][p] {
				continue
			}
			id := leastLoaded(subs[t.ID])
			out[id].Add(t.ID, p)
			load[id]++
		}
	}
	// Balance: move a partition from a member to an eligible one with at
	// least two fewer. Each move lowers the sum of squared loads, so this
	// ends; the bound is a guard.
	total := 0
	for _, t := range ts {
		total += int(t.Partitions)
	}
	for range total * 2 {
		moved := false
		for _, m := range ms {
			a := out[m.ID]
			for _, t := range a.SortedTopics() {
				ps := a[t]
				if len(ps) == 0 {
					continue
				}
				to := leastLoaded(subs[t])
				if to == "" || load[to] >= load[m.ID]-1 {
					continue
				}
				p := ps[len(ps)-1]
				a.remove(t, p)
				out[to].Add(t, p)
				load[m.ID]--
				load[to]++
				moved = true
				break
			}
		}
		if !moved {
			break
		}
	}
	return out
}
