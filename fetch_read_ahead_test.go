package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// kafka.fetch_read_ahead: on by default, a consumer whose fetches stop at
// their limits has the next read started for it (the read-ahead counter
// moves); with false none is, and the consumer still reads everything.
func TestFetchReadAheadConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c, err := loadConfig(writeConfig(t, ""))
	if err != nil || !c.Kafka.FetchReadAhead {
		t.Fatalf("default: fetch_read_ahead %v (%v), want true", c.Kafka.FetchReadAhead, err)
	}
	const n = 20000
	for _, tc := range []struct {
		set    string
		aheads bool
	}{{"", true}, {"fetch_read_ahead = false", false}} {
		p := startKorvetKafka(t, testbed.StartRedis(t), "", tc.set)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		producer, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("ahead"))
		if err != nil {
			t.Fatal(err)
		}
		value := []byte(strings.Repeat("v", 200))
		for i := 0; i < n; i += 1000 {
			rs := make([]*kgo.Record, 1000)
			for j := range rs {
				rs[j] = &kgo.Record{Value: value}
			}
			if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		producer.Close()
		consumer, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.ConsumeTopics("ahead"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < n {
			fs := consumer.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%q: consumed %d of %d: %v", tc.set, got, n, err)
			}
			for _, fe := range fs.Errors() {
				t.Fatalf("%q: consume: %v", tc.set, fe.Err)
			}
			got += fs.NumRecords()
		}
		consumer.Close()
		cancel()
		m := metrics(t, p)
		aheads := m[`korvet_kafka_fetch_read_ahead_total{result="used"}`] + m[`korvet_kafka_fetch_read_ahead_total{result="unused"}`]
		if (aheads > 0) != tc.aheads {
			t.Errorf("%q: %v read-aheads for %d records fetched 64 KiB at a time", tc.set, aheads, n)
		}
	}
}
