package kafkawire_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// TestConsumerGroupKcatMigration: kcat (librdkafka 2.0, classic protocol
// only) consumes through a group that a franz-go KIP-848 member then
// joins: the group becomes a consumer group in which kcat stays a classic
// member, with its share of the partitions handed out by SyncGroup, and
// between them they consume every record.
func TestConsumerGroupKcatMigration(t *testing.T) {
	kcat := kcatPath(t)
	const topic, grp, n = "kmig", "kmig-g", 400
	b := startBroker(t, consumerOpts(10*time.Second, 250*time.Millisecond))
	createTopics(t, b, 4, topic)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	produceAll(t, b.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), recs)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", b.addr, "-G", grp, "-o", "beginning", "-f", "%p:%s\n",
		"-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=250", "-X", "auto.commit.interval.ms=200", topic)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	defer stop()
	testbed.WaitFor(t, 30*time.Second, "kcat's classic group to be Stable", func() bool {
		ls, err := b.admin().ListGroups(context.Background())
		return err == nil && ls[grp].State == "Stable"
	})

	var mu sync.Mutex
	seen := map[string]bool{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)] = true
				mu.Unlock()
			})
		}
	}()
	testbed.WaitFor(t, time.Minute, "a consumer group with kcat as a classic member, both with partitions", func() bool {
		d := describeConsumerGroup(t, b, grp)
		if d.ErrorCode != 0 || len(d.Members) != 2 {
			return false
		}
		for _, m := range d.Members {
			if len(m.Assignment.TopicPartitions) == 0 {
				return false
			}
		}
		return (d.Members[0].MemberType == 0) != (d.Members[1].MemberType == 0)
	})
	// Every record is consumed once the commits reach the end.
	testbed.WaitFor(t, time.Minute, "commits at the end of every partition", func() bool {
		_ = cl.CommitUncommittedOffsets(context.Background())
		offs, err := b.admin().FetchOffsets(context.Background(), grp)
		if err != nil {
			return false
		}
		for p := int32(0); p < 4; p++ {
			if o, ok := offs.Lookup(topic, p); !ok || o.At != n/4 {
				return false
			}
		}
		return true
	})
	stop()
	kcatParts := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		p, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		kcatParts[p] = true
		mu.Lock()
		seen[v] = true
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("kcat and franz-go consumed %d distinct records, want %d\nkcat stderr:\n%s", len(seen), n, errb.String())
	}
	if len(kcatParts) == 0 {
		t.Fatal("kcat consumed nothing")
	}
	t.Logf("kcat read partitions %v", fmt.Sprint(kcatParts))
}
