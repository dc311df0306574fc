package kafkawire_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/internal/testbed"
)

// TestConsumerGroupMigration: a classic group (kgo eager or cooperative
// balancer) is joined by a KIP-848 member and becomes a consumer group
// that keeps serving its classic members; when that member leaves it
// turns back into a classic group. Records flow throughout; none is lost
// and no partition has two owners at once.
func TestConsumerGroupMigration(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"eager", kgo.RangeBalancer()},
		{"cooperative", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const total = 20000
			b := startBroker(t, consumerOpts(10*time.Second, 250*time.Millisecond))
			createTopics(t, b, 4, "mig")
			f := newGroupFlow(t, b, "mig-group", "mig")
			own, seen := f.own, f.seen
			start := func(name string, opts ...kgo.Opt) *kgo.Client {
				return f.start(name, append([]kgo.Opt{kgo.HeartbeatInterval(250 * time.Millisecond), kgo.SessionTimeout(6 * time.Second)}, opts...)...)
			}
			owners := func(who ...string) func() bool {
				return func() bool {
					own.mu.Lock()
					defer own.mu.Unlock()
					got := map[string]int{}
					for _, o := range own.owner {
						got[o]++
					}
					n := 0
					for _, w := range who {
						if got[w] == 0 {
							return false
						}
						n += got[w]
					}
					return n == 4
				}
			}
			groupType := func() string {
				req := kmsg.NewPtrListGroupsRequest()
				resp, err := req.RequestWith(context.Background(), b.client())
				if err != nil {
					return ""
				}
				for _, g := range resp.Groups {
					if g.Group == "mig-group" {
						return g.GroupType
					}
				}
				return ""
			}

			var producedN atomic.Int64
			producer := b.client(kgo.DefaultProduceTopic("mig"))
			produced := make(chan error, 1)
			go func() {
				for i := 0; i < total; i += 200 {
					rs := make([]*kgo.Record, 0, 200)
					for j := i; j < i+200; j++ {
						rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(j)), Value: []byte(strconv.Itoa(j))})
					}
					if err := producer.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
						produced <- err
						return
					}
					producedN.Add(int64(len(rs)))
					time.Sleep(50 * time.Millisecond)
				}
				produced <- nil
			}()

			c1 := start("c1", kgo.Balancers(tc.balancer))
			c2 := start("c2", kgo.Balancers(tc.balancer))
			testbed.WaitFor(t, time.Minute, "the classic members to share the partitions", owners("c1", "c2"))
			if typ := groupType(); typ != "classic" {
				t.Fatalf("group type %q before the upgrade, want classic", typ)
			}
			n1 := start("n1", kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
			testbed.WaitFor(t, time.Minute, "the consumer protocol member to get partitions next to the classic ones", owners("c1", "c2", "n1"))
			if typ := groupType(); typ != "consumer" {
				t.Fatalf("group type %q with a consumer protocol member, want consumer", typ)
			}
			d := describeConsumerGroup(t, b, "mig-group")
			types := map[int8]int{}
			for _, m := range d.Members {
				types[m.MemberType]++
			}
			if types[0] != 2 || types[1] != 1 {
				t.Fatalf("members of the migrating group by type: %v, want 2 classic and 1 consumer", types)
			}
			t.Logf("upgraded with %d records produced, %d consumed", producedN.Load(), seen.len())
			n1.Close()
			testbed.WaitFor(t, time.Minute, "the group to turn classic again", func() bool { return groupType() == "classic" })
			testbed.WaitFor(t, time.Minute, "the classic members to own every partition", owners("c1", "c2"))
			if err := <-produced; err != nil {
				t.Fatal(err)
			}
			testbed.WaitFor(t, time.Minute, "every record consumed", func() bool { return seen.len() == total })
			c1.Close()
			c2.Close()
			f.wg.Wait()
			own.mu.Lock()
			defer own.mu.Unlock()
			for _, v := range own.violations {
				t.Error(v)
			}
		})
	}
}
