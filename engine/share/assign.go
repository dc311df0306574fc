package share

import "slices"

// Assign is the "simple" assignor of share groups: every partition of a
// subscribed topic goes to at least one subscriber, and every subscriber
// gets at least one partition of each topic it subscribes to. With more
// subscribers than partitions, partitions are shared (several members read
// one partition, which share groups allow: records, not partitions, are
// handed out); with fewer, each member gets a disjoint slice. subs maps
// member id -> subscribed topics; counts holds each existing topic's
// partition count (topics missing from it are not assigned).
func Assign(subs map[string][]string, counts map[string]int32) map[string]map[string][]int32 {
	out := make(map[string]map[string][]int32, len(subs))
	byTopic := map[string][]string{}
	for id, topics := range subs {
		out[id] = map[string][]int32{}
		for _, t := range topics {
			if counts[t] > 0 {
				byTopic[t] = append(byTopic[t], id)
			}
		}
	}
	for t, members := range byTopic {
		slices.Sort(members)
		n := int(counts[t])
		// Start each topic at a different member so that several
		// one-partition topics do not all land on the first member.
		shift := int(fnv32(t)) % len(members)
		for i := range members {
			m := members[(i+shift)%len(members)]
			if len(members) >= n {
				out[m][t] = append(out[m][t], int32(i%n))
				continue
			}
			for p := i; p < n; p += len(members) {
				out[m][t] = append(out[m][t], int32(p))
			}
		}
	}
	return out
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
