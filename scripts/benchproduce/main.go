// Command benchproduce measures Kafka produce and consume throughput
// against a broker (korvet, or any Kafka) with franz-go.
//
//	go run ./scripts/benchproduce -brokers 127.0.0.1:9092 -topic b1 -partitions 1 -records 1000000 -size 100
//	go run ./scripts/benchproduce -mode consume -brokers 127.0.0.1:9092 -topic b1 -records 1000000
//
// Produce mode creates the topic (kadm) unless -create=false, produces
// -records records of -size bytes from -producers clients (acks=all and
// idempotence, franz-go's defaults) and reports records/s, MB/s and the
// p50/p99 latency from Produce to acknowledgement; with -txn N each client
// is transactional and commits a transaction every N records. Consume mode reads
// -records records from the start of the topic and reports records/s and
// MB/s. Either prints a last line "RESULT key=value ..." for scripts.
// -key gives every produced record that key (default: a null key). Create
// mode only creates the topic (for another client, such as kcat).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type options struct {
	mode       string
	brokers    []string
	topic      string
	partitions int
	records    int
	size       int
	key        string
	producers  int
	linger     time.Duration
	batchMax   int
	buffered   int
	create     bool
	fetchPart  int
	rate       int
	timeout    time.Duration
	txn        int
}

func main() {
	var o options
	var brokers string
	flag.StringVar(&o.mode, "mode", "produce", "produce or consume")
	flag.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flag.StringVar(&o.topic, "topic", "bench", "topic")
	flag.IntVar(&o.partitions, "partitions", 1, "partitions of the topic created in produce mode")
	flag.IntVar(&o.records, "records", 1_000_000, "records to produce, or to consume")
	flag.IntVar(&o.size, "size", 100, "value size in bytes (produce)")
	flag.StringVar(&o.key, "key", "", "key of every produced record (default: a null key)")
	flag.IntVar(&o.producers, "producers", 1, "concurrent producer clients (produce)")
	flag.DurationVar(&o.linger, "linger", time.Millisecond, "producer linger")
	flag.IntVar(&o.batchMax, "batch-max", 1_000_000, "max bytes of one record batch")
	flag.IntVar(&o.buffered, "max-buffered", 10_000, "max records buffered per producer client (franz-go's default)")
	flag.IntVar(&o.rate, "rate", 0, "produce at most this many records/s in all (0: as fast as possible); for latency at a given load")
	flag.BoolVar(&o.create, "create", true, "create the topic with kadm first (produce)")
	flag.IntVar(&o.fetchPart, "fetch-partition-bytes", 1<<20, "max bytes per partition in one fetch (consume)")
	flag.IntVar(&o.txn, "txn", 0, "records per transaction: each producer client is transactional and commits every this many records (0: idempotent, no transactions)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	o.brokers = strings.Split(brokers, ",")
	if o.records < 1 || o.size < 0 || o.producers < 1 || o.partitions < 1 || o.txn < 0 {
		fmt.Fprintln(os.Stderr, "benchproduce: -records, -producers and -partitions must be positive, -size and -txn not negative")
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var err error
	switch o.mode {
	case "produce":
		err = produce(ctx, o)
	case "consume":
		err = consume(ctx, o)
	case "create":
		err = createTopic(ctx, o)
	default:
		err = fmt.Errorf("unknown -mode %q (produce, consume or create)", o.mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchproduce: %v\n", err)
		os.Exit(1)
	}
}

func createTopic(ctx context.Context, o options) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// kadm returns the topic's error as err too.
	res, err := adm.CreateTopic(ctx, int32(o.partitions), 1, nil, o.topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", o.topic, err)
	}
	if res.Err != nil && !errors.Is(res.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", o.topic, res.Err)
	}
	if res.Err != nil {
		// It exists: it must have the partitions asked for.
		td, err := adm.ListTopics(ctx, o.topic)
		if err != nil {
			return err
		}
		if n := len(td[o.topic].Partitions); n != o.partitions {
			return fmt.Errorf("topic %s exists with %d partitions, not %d", o.topic, n, o.partitions)
		}
	}
	return nil
}

func produce(ctx context.Context, o options) error {
	if o.create {
		if err := createTopic(ctx, o); err != nil {
			return err
		}
	}
	value := make([]byte, o.size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	var key []byte
	if o.key != "" {
		key = []byte(o.key)
	}

	clients := make([]*kgo.Client, o.producers)
	for i := range clients {
		opts := []kgo.Opt{
			kgo.SeedBrokers(o.brokers...),
			kgo.DefaultProduceTopic(o.topic),
			kgo.ProducerLinger(o.linger),
			kgo.ProducerBatchMaxBytes(int32(o.batchMax)),
			kgo.MaxBufferedRecords(o.buffered),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
		}
		if o.txn > 0 {
			opts = append(opts, kgo.TransactionalID(fmt.Sprintf("benchproduce-%s-%d", o.topic, i)))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		// Connect and load metadata before the clock starts.
		if err := cl.Ping(ctx); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		clients[i] = cl
	}

	// Latencies in microseconds, one slot per record.
	lat := make([]int32, o.records)
	var failed atomic.Int64
	// The first error; errors of different types, so not an atomic.Value.
	var errMu sync.Mutex
	var firstErr error
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	var wg sync.WaitGroup
	start := time.Now()
	for pi, cl := range clients {
		lo, hi := pi*o.records/o.producers, (pi+1)*o.records/o.producers
		wg.Add(1)
		go func() {
			defer wg.Done()
			// With -rate, record i is due at start + i/rate.
			perRecord := time.Duration(0)
			if o.rate > 0 {
				perRecord = time.Duration(float64(time.Second) * float64(o.producers) / float64(o.rate))
			}
			inTxn := 0
			for i := lo; i < hi; i++ {
				if o.txn > 0 && inTxn == 0 {
					if err := cl.BeginTransaction(); err != nil {
						setErr(fmt.Errorf("begin transaction: %w", err))
						return
					}
				}
				if perRecord > 0 {
					if d := time.Until(start.Add(time.Duration(i-lo) * perRecord)); d > 0 {
						time.Sleep(d)
					}
				}
				t0 := time.Now()
				r := &kgo.Record{Key: key, Value: value}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					lat[i] = int32(min(time.Since(t0).Microseconds(), 1<<31-1))
					if err != nil {
						failed.Add(1)
						setErr(err)
					}
				})
				if inTxn++; o.txn > 0 && (inTxn == o.txn || i == hi-1) {
					// EndTransaction does not flush: without it a record
					// still in flight would race the commit (under KIP-890
					// its batch then carries a fenced epoch).
					if err := cl.Flush(ctx); err != nil {
						setErr(fmt.Errorf("flush transaction: %w", err))
						return
					}
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						setErr(fmt.Errorf("commit transaction: %w", err))
						return
					}
					inTxn = 0
				}
			}
			if err := cl.Flush(ctx); err != nil {
				setErr(err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d records failed, first: %v", n, o.records, firstErr)
	}
	if firstErr != nil {
		return firstErr
	}

	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1000 }
	rps := float64(o.records) / elapsed.Seconds()
	mbps := rps * float64(o.size) / 1e6
	limit := "as fast as possible"
	if o.rate > 0 {
		limit = fmt.Sprintf("at most %d records/s", o.rate)
	}
	fmt.Printf("produced %d records of %d B to %s (%d partitions, %d producers, %s) in %.2fs: %.0f records/s, %.1f MB/s, latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		o.records, o.size, o.topic, o.partitions, o.producers, limit, elapsed.Seconds(), rps, mbps, pct(0.5), pct(0.99), pct(1))
	fmt.Printf("RESULT mode=produce records=%d size=%d partitions=%d txn=%d seconds=%.3f rps=%.0f mbps=%.2f p50_ms=%.2f p99_ms=%.2f\n",
		o.records, o.size, o.partitions, o.txn, elapsed.Seconds(), rps, mbps, pct(0.5), pct(0.99))
	return nil
}

func consume(ctx context.Context, o options) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.brokers...),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(int32(o.fetchPart)),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}

	var n, bytes int
	next := map[int32]int64{} // per partition: the offset expected next
	gaps := 0
	start := time.Now()
	for n < o.records {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumed %d of %d records before giving up: %w", n, o.records, err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want, ok := next[r.Partition]; ok && r.Offset != want {
				gaps++
			}
			next[r.Partition] = r.Offset + 1
			n++
			bytes += len(r.Value)
		})
	}
	elapsed := time.Since(start)
	rps := float64(n) / elapsed.Seconds()
	mbps := float64(bytes) / elapsed.Seconds() / 1e6
	fmt.Printf("consumed %d records (%d value bytes) of %s from %d partitions in %.2fs: %.0f records/s, %.1f MB/s, %d offset gaps\n",
		n, bytes, o.topic, len(next), elapsed.Seconds(), rps, mbps, gaps)
	fmt.Printf("RESULT mode=consume records=%d partitions=%d seconds=%.3f rps=%.0f mbps=%.2f gaps=%d\n",
		n, len(next), elapsed.Seconds(), rps, mbps, gaps)
	return nil
}
