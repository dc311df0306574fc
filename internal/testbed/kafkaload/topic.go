package kafkaload

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// CreateTopic creates topic with the given partitions and configs and
// waits, within, until every partition has a leader.
func CreateTopic(tb testing.TB, adm *kadm.Client, topic string, partitions int32, configs map[string]*string, within time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	res, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		tb.Fatalf("create topic %s: %v", topic, err)
	}
	WaitLeaders(tb, adm, topic, partitions, within, func(map[int32]int32) bool { return true })
}

// Leaders asks the brokers who leads each partition of topic, and which
// brokers are live (sorted; the admin client skips dead brokers).
func Leaders(adm *kadm.Client, topic string) (map[int32]int32, []int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	out := map[int32]int32{}
	for p, d := range td.Partitions {
		if d.Err == nil && d.Leader >= 0 {
			out[p] = d.Leader
		}
	}
	var nodes []int32
	for _, b := range md.Brokers {
		nodes = append(nodes, b.NodeID)
	}
	slices.Sort(nodes)
	return out, nodes, nil
}

// WaitLeaders waits until every partition of topic has a leader and ok
// holds for the leader map, and returns that map.
func WaitLeaders(tb testing.TB, adm *kadm.Client, topic string, partitions int32, within time.Duration, ok func(map[int32]int32) bool) map[int32]int32 {
	tb.Helper()
	var last map[int32]int32
	testbed.Eventually(tb, within, "leaders of "+topic, func() (bool, string) {
		m, _, err := Leaders(adm, topic)
		last = m
		return err == nil && len(m) == int(partitions) && ok(m), fmt.Sprintf("leaders %v, error %v", m, err)
	})
	return last
}

// LedBy lists the partitions node leads in a leader map, sorted.
func LedBy(leaders map[int32]int32, node int32) []int32 {
	var ps []int32
	for p, n := range leaders {
		if n == node {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// Admin is an admin client seeded with every broker in seeds, quick to
// notice leadership moves; it is closed when the test ends.
func Admin(tb testing.TB, seeds []string) *kadm.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		tb.Fatalf("admin client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// Seeds lists the Kafka listen addresses of brokers.
func Seeds(brokers []*testbed.Korvet) []string {
	s := make([]string, len(brokers))
	for i, k := range brokers {
		s[i] = k.KafkaAddr
	}
	return s
}
