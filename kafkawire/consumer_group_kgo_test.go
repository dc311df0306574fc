package kafkawire_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// ownership follows which client owns which partition, from the clients'
// own assign/revoke/lost callbacks, and records every moment two clients
// owned the same partition.
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
}

func (o *ownership) assigned(who string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if prev, ok := o.owner[p]; ok && prev != who {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, who, prev))
		}
		o.owner[p] = who
	}
}

func (o *ownership) released(who string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == who {
			delete(o.owner, p)
		}
	}
}

// valueSet counts distinct record values consumed.
type valueSet struct {
	mu   sync.Mutex
	seen map[int]bool
}

func (s *valueSet) add(v int) {
	s.mu.Lock()
	s.seen[v] = true
	s.mu.Unlock()
}

func (s *valueSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// groupFlow runs franz-go members of one group on one topic for a test,
// tracking which member owns which partition (from the clients' own
// callbacks) and every value consumed.
type groupFlow struct {
	t            *testing.T
	b            *broker
	group, topic string
	own          *ownership
	seen         *valueSet
	wg           sync.WaitGroup
}

func newGroupFlow(t *testing.T, b *broker, group, topic string) *groupFlow {
	return &groupFlow{t: t, b: b, group: group, topic: topic,
		own: &ownership{owner: map[int32]string{}}, seen: &valueSet{seen: map[int]bool{}}}
}

// start starts member name, consuming from the start and committing as
// it goes (also when partitions are revoked), with opts on top.
func (f *groupFlow) start(name string, opts ...kgo.Opt) *kgo.Client {
	topic := f.topic
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(f.b.addr),
		kgo.ConsumerGroup(f.group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.AutoCommitInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { f.own.assigned(name, m[topic]) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			_ = cl.CommitMarkedOffsets(ctx)
			f.own.released(name, m[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { f.own.released(name, m[topic]) }),
	}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				if v, err := strconv.Atoi(string(r.Value)); err == nil {
					f.seen.add(v)
				}
			})
		}
	}()
	return cl
}

// TestConsumerGroupKgoFlowAndRestart: franz-go members with
// ServerSideBalancer (KIP-848) join and leave a 6-partition topic while
// 50,000 records flow, and korvet restarts under them. Every record is
// consumed at least once, the committed offsets reach the end, and no
// partition is ever owned by two members at once.
func TestConsumerGroupKgoFlowAndRestart(t *testing.T) {
	const total = 50000
	b := startBroker(t, consumerOpts(10*time.Second, 250*time.Millisecond))
	createTopics(t, b, 6, "flow")
	f := newGroupFlow(t, b, "flow-group", "flow")
	own, seen := f.own, f.seen
	start := func(name string) *kgo.Client {
		return f.start(name, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}

	var producedN atomic.Int64
	producer := b.client(kgo.DefaultProduceTopic("flow"), kgo.RecordRetries(100))
	produced := make(chan error, 1)
	go func() {
		ctx := ctxT(t, 2*time.Minute)
		for i := 0; i < total; i += 500 {
			rs := make([]*kgo.Record, 0, 500)
			for j := i; j < i+500; j++ {
				rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(j)), Value: []byte(strconv.Itoa(j))})
			}
			if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			producedN.Add(int64(len(rs)))
			time.Sleep(40 * time.Millisecond) // spread the flow over the membership changes
		}
		produced <- nil
	}()

	owns := func(who string, n int) func() bool {
		return func() bool {
			own.mu.Lock()
			defer own.mu.Unlock()
			k := 0
			for _, o := range own.owner {
				if o == who {
					k++
				}
			}
			return k >= n
		}
	}
	ownedBy := func(who ...string) func() bool {
		return func() bool {
			own.mu.Lock()
			defer own.mu.Unlock()
			k := 0
			for _, o := range own.owner {
				for _, w := range who {
					if o == w {
						k++
					}
				}
			}
			return k == 6
		}
	}
	c1, c2 := start("c1"), start("c2")
	testbed.WaitFor(t, time.Minute, "c1 and c2 to share the partitions", func() bool { return owns("c1", 1)() && owns("c2", 1)() && ownedBy("c1", "c2")() })
	c3 := start("c3")
	testbed.WaitFor(t, time.Minute, "c3 to get partitions", owns("c3", 2))
	c1.Close()
	testbed.WaitFor(t, time.Minute, "c2 and c3 to own every partition", ownedBy("c2", "c3"))
	mid := seen.len()
	t.Logf("restarting korvet with %d records produced, %d consumed", producedN.Load(), mid)
	if producedN.Load() == total {
		t.Log("warning: every record was produced before the restart")
	}
	b.restart()
	c4 := start("c4")
	testbed.WaitFor(t, time.Minute, "c4 to get partitions after the restart", owns("c4", 1))
	testbed.WaitFor(t, time.Minute, "records consumed after the restart", func() bool { return seen.len() > mid })
	c2.Close()
	testbed.WaitFor(t, time.Minute, "c3 and c4 to own every partition", ownedBy("c3", "c4"))
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	testbed.WaitFor(t, 2*time.Minute, "every record consumed", func() bool { return seen.len() == total })

	// Committed offsets reach the end of every partition.
	adm := b.admin()
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "flow")
	if err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, time.Minute, "commits at the end of every partition", func() bool {
		_ = c3.CommitUncommittedOffsets(context.Background())
		_ = c4.CommitUncommittedOffsets(context.Background())
		offs, err := adm.FetchOffsets(context.Background(), "flow-group")
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := offs.Lookup(e.Topic, e.Partition)
			done = done && ok && o.At == e.Offset
		})
		return done
	})
	c3.Close()
	c4.Close()
	f.wg.Wait()
	own.mu.Lock()
	defer own.mu.Unlock()
	for _, v := range own.violations {
		t.Error(v)
	}
}
