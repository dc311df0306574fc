// Command soak drives a running korvet with steady produce, consume and
// consumer-group churn for a while, samples korvet's resident memory, and
// prints the figures. scripts/soak.sh starts Redis and korvet and runs it;
// it is not part of the test suite.
//
// It exits 1 when a record was lost, duplicated or reordered, and 2 when
// the resident memory of the last third of the run is more than 20% above
// that of the middle third.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type config struct {
	kafka, http string
	pid         int
	duration    time.Duration
	rate        int
	partitions  int
	valueBytes  int
	sample      time.Duration
	churn       time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.kafka, "kafka", "127.0.0.1:9092", "korvet's Kafka address")
	flag.StringVar(&c.http, "http", "http://127.0.0.1:8080", "korvet's HTTP base URL")
	flag.IntVar(&c.pid, "pid", 0, "korvet's process id (for its resident memory)")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long to run")
	flag.IntVar(&c.rate, "rate", 20000, "records produced per second")
	flag.IntVar(&c.partitions, "partitions", 4, "partitions of the soak topic")
	flag.IntVar(&c.valueBytes, "value-bytes", 100, "bytes per record value")
	flag.DurationVar(&c.sample, "sample", 10*time.Second, "resident memory sampling interval")
	flag.DurationVar(&c.churn, "churn", 20*time.Second, "how often a group member leaves and another joins")
	flag.Parse()
	if c.pid <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -pid is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, c))
}

// counters are the run's figures, updated by the workers.
type counters struct {
	produced, produceErrs atomic.Int64
	consumed, consumeErrs atomic.Int64
	groupConsumed         atomic.Int64
	groupErrs             atomic.Int64
	joins                 atomic.Int64
	lost, dups, reordered atomic.Int64
}

const topic = "soak"

func run(ctx context.Context, c config) int {
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.kafka))
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	defer adm.Close()
	// Retention keeps Redis's memory flat: segments of 8 MiB, 32 MiB kept
	// per partition.
	_, err = kadm.NewClient(adm).CreateTopic(ctx, int32(c.partitions), 1, map[string]*string{
		"segment.bytes":   new("8388608"),
		"retention.bytes": new("33554432"),
	}, topic)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: create topic: %v\n", err)
		return 2
	}

	var n counters
	runCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { produce(runCtx, c, &n) })
	wg.Go(func() { consume(runCtx, c, &n) })
	wg.Go(func() { groupChurn(runCtx, c, &n) })

	fmt.Printf("soak: %v at %d records/s into %d partitions (%d-byte values), group churn every %v, korvet pid %d\n",
		c.duration, c.rate, c.partitions, c.valueBytes, c.churn, c.pid)
	fmt.Printf("%8s %10s %12s %12s %12s %10s %12s\n", "t", "rss_MiB", "produced/s", "consumed/s", "group/s", "errors", "redis_MiB")
	var rss []int64
	start := time.Now()
	tick := time.NewTicker(c.sample)
	defer tick.Stop()
	var lastP, lastC, lastG int64
	last := start
	sample := func() {
		now := time.Now()
		r, err := residentBytes(c.pid)
		if err != nil {
			fmt.Printf("soak: read korvet's memory: %v\n", err)
			return
		}
		rss = append(rss, r)
		p, cs, g := n.produced.Load(), n.consumed.Load(), n.groupConsumed.Load()
		secs := max(now.Sub(last).Seconds(), 1)
		errs := n.produceErrs.Load() + n.consumeErrs.Load() + n.groupErrs.Load()
		fmt.Printf("%8s %10.1f %12.0f %12.0f %12.0f %10d %12s\n", now.Sub(start).Round(time.Second), mib(r),
			float64(p-lastP)/secs, float64(cs-lastC)/secs, float64(g-lastG)/secs, errs, redisMemory(c.http))
		lastP, lastC, lastG, last = p, cs, g, now
	}
	sample()
loop:
	for {
		select {
		case <-tick.C:
			sample()
		case <-runCtx.Done():
			break loop
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	sample()
	return report(c, &n, rss, elapsed)
}

func report(c config, n *counters, rss []int64, elapsed time.Duration) int {
	secs := elapsed.Seconds()
	var peak int64
	for _, r := range rss {
		peak = max(peak, r)
	}
	fmt.Println("--- soak figures")
	fmt.Printf("duration        %v\n", elapsed.Round(time.Second))
	fmt.Printf("korvet RSS      peak %.1f MiB, final %.1f MiB (%d samples)\n", mib(peak), mib(rss[len(rss)-1]), len(rss))
	fmt.Printf("produced        %d records, %.0f/s, %d errors\n", n.produced.Load(), float64(n.produced.Load())/secs, n.produceErrs.Load())
	fmt.Printf("consumed        %d records, %.0f/s, %d errors\n", n.consumed.Load(), float64(n.consumed.Load())/secs, n.consumeErrs.Load())
	fmt.Printf("group consumed  %d records, %.0f/s, %d errors, %d member joins\n", n.groupConsumed.Load(), float64(n.groupConsumed.Load())/secs, n.groupErrs.Load(), n.joins.Load())
	fmt.Printf("order check     %d lost, %d duplicated, %d out of order\n", n.lost.Load(), n.dups.Load(), n.reordered.Load())
	code := 0
	if n.lost.Load()+n.dups.Load()+n.reordered.Load() > 0 {
		code = 1
	}
	if len(rss) >= 6 {
		third := len(rss) / 3
		mid, end := avg(rss[third:2*third]), avg(rss[2*third:])
		growth := (end - mid) / mid * 100
		verdict := "ok"
		if growth > 20 {
			verdict = "GROWING"
			if code == 0 {
				code = 2
			}
		}
		fmt.Printf("RSS trend       middle third %.1f MiB, last third %.1f MiB: %+.1f%% (%s; > 20%% is flagged)\n", mid/(1<<20), end/(1<<20), growth, verdict)
	} else {
		fmt.Println("RSS trend       too few samples")
	}
	return code
}

// produce sends c.rate records a second with an idempotent acks=all
// producer. Partition p gets values starting with p's own sequence number,
// so the consumer can tell a loss, a duplicate or a reordering.
func produce(ctx context.Context, c config, n *counters) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		n.produceErrs.Add(1)
		return
	}
	defer cl.Close()
	seqs := make([]uint64, c.partitions)
	pad := bytes.Repeat([]byte("x"), max(c.valueBytes-8, 0))
	const tick = 10 * time.Millisecond
	perTick := max(c.rate/int(time.Second/tick), 1)
	t := time.NewTicker(tick)
	defer t.Stop()
	next := 0
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = cl.Flush(flushCtx)
			cancel()
			return
		case <-t.C:
		}
		for range perTick {
			p := next % c.partitions
			next++
			v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(pad)), seqs[p])
			seqs[p]++
			// Not ctx: records still buffered at the end are flushed, not
			// failed.
			cl.Produce(context.Background(), &kgo.Record{Partition: int32(p), Value: append(v, pad...)}, func(_ *kgo.Record, err error) {
				if err != nil {
					n.produceErrs.Add(1)
					return
				}
				n.produced.Add(1)
			})
		}
	}
}

// consume reads the topic from the start without a group and checks each
// partition's sequence numbers.
func consume(ctx context.Context, c config, n *counters) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		n.consumeErrs.Add(1)
		return
	}
	defer cl.Close()
	want := map[int32]uint64{}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) && !errors.Is(fe.Err, context.DeadlineExceeded) {
				n.consumeErrs.Add(1)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			n.consumed.Add(1)
			if len(r.Value) < 8 {
				n.reordered.Add(1)
				return
			}
			seq := binary.BigEndian.Uint64(r.Value)
			w := want[r.Partition]
			switch {
			case seq == w:
			case seq > w:
				n.lost.Add(int64(seq - w))
			case seq < w:
				if seq == w-1 {
					n.dups.Add(1)
				} else {
					n.reordered.Add(1)
				}
				return
			}
			want[r.Partition] = seq + 1
		})
	}
}

// groupChurn keeps three members in a consumer group; every c.churn the
// oldest leaves and a new one joins.
func groupChurn(ctx context.Context, c config, n *counters) {
	type member struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	join := func() member {
		mctx, cancel := context.WithCancel(ctx)
		m := member{cancel: cancel, done: make(chan struct{})}
		n.joins.Add(1)
		go func() {
			defer close(m.done)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka), kgo.ConsumerGroup("soak-group"), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
			if err != nil {
				n.groupErrs.Add(1)
				return
			}
			defer cl.Close() // leaves the group, committing what was polled
			for mctx.Err() == nil {
				fs := cl.PollFetches(mctx)
				for _, fe := range fs.Errors() {
					if !errors.Is(fe.Err, context.Canceled) && !errors.Is(fe.Err, context.DeadlineExceeded) {
						n.groupErrs.Add(1)
					}
				}
				n.groupConsumed.Add(int64(fs.NumRecords()))
			}
		}()
		return m
	}
	members := []member{join(), join(), join()}
	t := time.NewTicker(c.churn)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, m := range members {
				m.cancel()
				<-m.done
			}
			return
		case <-t.C:
			old := members[0]
			old.cancel()
			<-old.done
			members = append(members[1:], join())
		}
	}
}

// residentBytes is a process's resident set size from /proc.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// redisMemory is Redis's used memory as korvet's status API reports it.
func redisMemory(base string) string {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(base + "/api/v1/status")
	if err != nil {
		slog.Debug("status", "err", err)
		return "?"
	}
	defer resp.Body.Close()
	var st struct {
		Redis struct {
			UsedMemory int64 `json:"used_memory"`
		} `json:"redis"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f", mib(st.Redis.UsedMemory))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func avg(xs []int64) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}
