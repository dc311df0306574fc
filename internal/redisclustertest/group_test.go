package redisclustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// TestConsumerGroupOnCluster: a consumer group on the Redis Cluster
// commits part of a topic; a new member of the group resumes each
// partition exactly at its commit and reads the rest. Then korvet itself
// is stopped and started again: the commits are still there, and a fresh
// read from offset 0 returns every record byte for byte.
func TestConsumerGroupOnCluster(t *testing.T) {
	needRedisCluster(t)
	consumerGroup(t, startEnv(t, 1, ""))
}

func consumerGroup(t *testing.T, e *env) {
	const topic, group, partitions, n = "ledger", "billing", 6, 600
	e.createTopic(topic, partitions, nil)

	want := make([]record, n)
	krs := make([]*kgo.Record, n)
	for i := range want {
		want[i] = record{Partition: int32(i % partitions), Key: fmt.Appendf(nil, "k%d", i%37), Value: fmt.Appendf(nil, "entry %d %x", i, i*i)}
		krs[i] = &kgo.Record{Topic: topic, Partition: want[i].Partition, Key: want[i].Key, Value: want[i].Value}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := pcl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	member := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.FetchMaxPartitionBytes(2000)) // small fetches: the first member stops part way
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}

	// The first member reads at least a third and commits what it read.
	first := member()
	seen := map[int32]map[int64]bool{}
	committed := map[int32]int64{}
	for read := 0; read < n/3; {
		fs := first.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("first member: %d records read: %v", read, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("first member: %v", err)
		}
		recs := fs.Records()
		for _, r := range recs {
			if seen[r.Partition] == nil {
				seen[r.Partition] = map[int64]bool{}
			}
			seen[r.Partition][r.Offset] = true
			committed[r.Partition] = max(committed[r.Partition], r.Offset+1)
		}
		read += len(recs)
		if err := first.CommitRecords(ctx, recs...); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	first.Close() // leaves the group
	t.Logf("first member committed %v", committed)

	// The next member starts every partition at its commit (offset 0
	// where nothing was committed) and reads up to the end.
	second := member()
	start := map[int32]int64{}
	total := 0
	for _, offs := range seen {
		total += len(offs)
	}
	for total < n {
		fs := second.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("second member: %d of %d records: %v", total, n, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("second member: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := start[r.Partition]; !ok {
				start[r.Partition] = r.Offset
				if r.Offset != committed[r.Partition] {
					t.Errorf("second member resumed partition %d at %d, but the commit is %d", r.Partition, r.Offset, committed[r.Partition])
				}
			}
			if seen[r.Partition][r.Offset] {
				t.Errorf("partition %d offset %d read again after it was committed", r.Partition, r.Offset)
				return
			}
			if seen[r.Partition] == nil {
				seen[r.Partition] = map[int64]bool{}
			}
			seen[r.Partition][r.Offset] = true
			total++
		})
		if err := second.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("second member commit: %v", err)
		}
	}
	second.Close()

	// korvet restarts: commits and records come back from Redis.
	e.brokers[0].Stop()
	e.brokers[0].Restart(t)
	acl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...)) // no connection of the old process
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets after the restart: %v", err)
	}
	for p := range int32(partitions) {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.At != int64(n/partitions) {
			t.Errorf("after the restart partition %d is committed at %d (present %v), want %d", p, o.At, ok, n/partitions)
		}
	}
	checkRecords(t, "after the restart", asRecords(kafkaload.ReadAll(t, e.seeds(), adm, topic, 60*time.Second)), want)
}
