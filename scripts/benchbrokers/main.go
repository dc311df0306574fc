// Command benchbrokers is scripts/bench-brokers.sh's helper for several
// korvet brokers on one Redis.
//
//	benchbrokers -mode leader -brokers A,B,C -topic T -partition 0
//	    prints the node id leading the partition
//	benchbrokers -mode create -brokers A,B,C -topic T -partitions 6
//	    creates the topic (an existing one is fine)
//	benchbrokers -mode wait-brokers -brokers A,B,C -n 3
//	    waits until Metadata lists n brokers
//	benchbrokers -mode failover -brokers A,B,C -topic T -partition 0 -pid PID
//	    produces to the partition steadily, SIGKILLs process PID (the
//	    partition's leader, started by the script) and prints
//	    "RESULT failover_ms=..." : the time from the kill to the first
//	    acknowledgement of a record handed to the client after it.
//
// Every wait is bounded by -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	var (
		mode, brokers, topic string
		partition            int
		n, pid, partitions   int
		timeout              time.Duration
	)
	flag.StringVar(&mode, "mode", "", "create, leader, wait-brokers or failover")
	flag.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flag.StringVar(&topic, "topic", "bench-failover", "topic")
	flag.IntVar(&partition, "partition", 0, "partition")
	flag.IntVar(&partitions, "partitions", 6, "partitions (create)")
	flag.IntVar(&n, "n", 3, "brokers to wait for (wait-brokers)")
	flag.IntVar(&pid, "pid", 0, "process to SIGKILL (failover)")
	flag.DurationVar(&timeout, "timeout", 60*time.Second, "give up after this long")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seeds := strings.Split(brokers, ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(0))
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch mode {
	case "leader":
		node, err := leader(ctx, adm, topic, int32(partition))
		if err != nil {
			fail(err)
		}
		fmt.Println(node)
	case "create":
		res, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
		if err == nil && res.Err != nil && !errors.Is(res.Err, kerr.TopicAlreadyExists) {
			err = res.Err
		}
		if err != nil {
			fail(fmt.Errorf("create %s: %w", topic, err))
		}
	case "wait-brokers":
		for {
			md, err := adm.BrokerMetadata(ctx)
			if err == nil && len(md.Brokers) == n {
				return
			}
			if ctx.Err() != nil {
				fail(fmt.Errorf("metadata does not list %d brokers (last: %d, %v)", n, len(md.Brokers), err))
			}
			time.Sleep(50 * time.Millisecond)
		}
	case "failover":
		if pid <= 0 {
			fail(errors.New("-pid is required"))
		}
		d, err := failover(ctx, cl, int32(partition), pid)
		if err != nil {
			fail(err)
		}
		fmt.Printf("RESULT failover_ms=%d\n", d.Milliseconds())
	default:
		fail(fmt.Errorf("unknown -mode %q", mode))
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "benchbrokers: %v\n", err)
	os.Exit(1)
}

func leader(ctx context.Context, adm *kadm.Client, topic string, p int32) (int32, error) {
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if d, ok := md.Topics[topic].Partitions[p]; ok && d.Err == nil && d.Leader >= 0 {
				return d.Leader, nil
			}
		}
		if ctx.Err() != nil {
			return -1, fmt.Errorf("no leader for %s[%d]: %v", topic, p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failover produces a record every 2ms, kills pid once a few are
// acknowledged, and returns the time from the kill to the first
// acknowledgement of a record handed to the client after the kill.
func failover(ctx context.Context, cl *kgo.Client, p int32, pid int) (time.Duration, error) {
	var (
		mu       sync.Mutex
		acked    int
		killedAt time.Time
		firstErr error
	)
	after := make(chan time.Time, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sent := time.Now()
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "failover-%d", i)}, func(_ *kgo.Record, err error) {
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					return
				}
				acked++
				if !killedAt.IsZero() && sent.After(killedAt) {
					select {
					case after <- now:
					default:
					}
				}
			})
		}
	}()
	for {
		mu.Lock()
		n := acked
		mu.Unlock()
		if n >= 50 {
			break
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("only %d records acknowledged before the kill", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	killedAt = time.Now()
	err := syscall.Kill(pid, syscall.SIGKILL)
	mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("kill %d: %w", pid, err)
	}
	select {
	case at := <-after:
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil {
			return 0, fmt.Errorf("a produce failed: %w", firstErr)
		}
		return at.Sub(killedAt), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("no produce acknowledged after the kill: %w", ctx.Err())
	}
}
