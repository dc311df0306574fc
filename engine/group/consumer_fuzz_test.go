package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzConsumerHeartbeat decodes arbitrary ConsumerGroupHeartbeat v1
// bodies and hands them to one coordinator in sequence (each input splits
// into several requests): whatever arrives, it answers or refuses without
// panicking, and no partition is ever held by two members.
func FuzzConsumerHeartbeat(f *testing.F) {
	seed := func(reqs ...*kmsg.ConsumerGroupHeartbeatRequest) {
		var b []byte
		for _, r := range reqs {
			r.Version = 1
			body := r.AppendTo(nil)
			b = append(b, byte(len(body)>>8), byte(len(body)))
			b = append(b, body...)
		}
		f.Add(b)
	}
	join := func(id string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g", id, epoch, 1000
		r.SubscribedTopicNames = []string{"a", "b"}
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}
	re := join("r", 0)
	pat := "a|b.*"
	re.SubscribedTopicRegex, re.SubscribedTopicNames = &pat, nil
	seed(join("x", 0), join("y", 0), join("x", 1), join("y", 2), join("x", -1))
	seed(re, join("r", 1), join("z", 0))

	c, _ := openTest(f, Options{Consumer: ConsumerOptions{
		SessionTimeout: time.Minute,
		Topics: func() []TopicMeta {
			return []TopicMeta{{Name: "a", ID: TopicID{1}, Partitions: 3}, {Name: "b", ID: TopicID{2}, Partitions: 2}}
		},
	}})
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) >= 2 {
			n := int(b[0])<<8 | int(b[1])
			b = b[2:]
			if n > len(b) {
				n = len(b)
			}
			var r kmsg.ConsumerGroupHeartbeatRequest
			r.Version = 1
			if err := r.ReadFrom(b[:n]); err != nil {
				b = b[n:]
				continue
			}
			b = b[n:]
			hr := ConsumerHeartbeatRequest{Group: r.Group, MemberID: r.MemberID, MemberEpoch: r.MemberEpoch,
				InstanceID: r.InstanceID, RackID: r.RackID, RebalanceTimeout: -1, TopicNames: r.SubscribedTopicNames,
				Regex: r.SubscribedTopicRegex, Assignor: r.ServerAssignor}
			if r.RebalanceTimeoutMillis >= 0 {
				hr.RebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
			}
			if r.Topics != nil {
				hr.Owned = Assignment{}
				for _, tp := range r.Topics {
					for _, p := range tp.Partitions {
						hr.Owned.Add(tp.TopicID, p)
					}
				}
			}
			_, _ = c.ConsumerHeartbeat(hr)
		}
		for _, g := range c.all() {
			g.mu.Lock()
			if g.cg != nil {
				seen := Assignment{}
				for _, m := range g.sortedConsumers() {
					for _, a := range []Assignment{m.assigned, m.revoking} {
						for tid, ps := range a {
							for _, p := range ps {
								if seen.has(tid, p) {
									g.mu.Unlock()
									t.Fatalf("group %q: partition %x/%d held twice", g.name, tid[:1], p)
								}
								seen.Add(tid, p)
							}
						}
					}
				}
			}
			g.mu.Unlock()
		}
	})
}
