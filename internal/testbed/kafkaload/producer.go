package kafkaload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// Ack is one acknowledged record: its sequence number, where korvet put
// it, when it was handed to the client and when it was acknowledged.
type Ack struct {
	Seq       int
	Partition int32
	Offset    int64
	Sent      time.Time
	Acked     time.Time
}

// Options tune a Producer; the zero value is the usual load.
type Options struct {
	FirstSeq    int           // the first record's sequence number
	PauseEvery  int           // a 5 ms pause after every PauseEvery records (default 20)
	Backoff     time.Duration // franz-go's retry backoff (default 50ms)
	FlushWithin time.Duration // how long Finish waits for every answer (default 60s)
	Client      []kgo.Opt     // more client options, applied last
}

// Producer produces numbered, keyed records (value "seq=N", key
// key-NNN for N mod 200) with franz-go's idempotent acks=all producer,
// retrying without limit, and notes every error franz-go saw on the way,
// retried or not.
type Producer struct {
	cl    *kgo.Client
	log   *errorLog
	flush time.Duration
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	acked  []Ack
	failed []error
	sent   int
}

// StartProducer starts producing to topic, seeded with seeds, until
// Finish; the client is closed when the test ends.
func StartProducer(tb testing.TB, seeds []string, topic string, o Options) *Producer {
	tb.Helper()
	if o.PauseEvery <= 0 {
		o.PauseEvery = 20
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	if o.FlushWithin <= 0 {
		o.FlushWithin = 60 * time.Second
	}
	el := &errorLog{retried: map[string]int{}}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(2000), kgo.MetadataMinAge(100 * time.Millisecond), kgo.WithLogger(el),
		kgo.RetryBackoffFn(func(int) time.Duration { return o.Backoff })}, o.Client...)...)
	if err != nil {
		tb.Fatalf("load producer client: %v", err)
	}
	tb.Cleanup(cl.Close)
	lp := &Producer{cl: cl, log: el, flush: o.FlushWithin, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(lp.done)
		for seq := o.FirstSeq; ; seq++ {
			select {
			case <-lp.stop:
				return
			default:
			}
			lp.produce(seq)
			if seq%o.PauseEvery == o.PauseEvery-1 {
				time.Sleep(5 * time.Millisecond) // a steady stream, not a flood
			}
		}
	}()
	return lp
}

func (lp *Producer) produce(seq int) {
	lp.mu.Lock()
	lp.sent++
	lp.mu.Unlock()
	sent := time.Now()
	rec := &kgo.Record{Key: fmt.Appendf(nil, "key-%03d", seq%200), Value: fmt.Appendf(nil, "seq=%d", seq)}
	lp.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		now := time.Now()
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if err != nil {
			lp.failed = append(lp.failed, fmt.Errorf("seq %d: %w", seq, err))
			return
		}
		lp.acked = append(lp.acked, Ack{Seq: seq, Partition: r.Partition, Offset: r.Offset, Sent: sent, Acked: now})
	})
}

// AckedCount is how many records are acknowledged so far.
func (lp *Producer) AckedCount() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.acked)
}

// Sent is how many records were handed to the client so far.
func (lp *Producer) Sent() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.sent
}

// Acked is a copy of the acknowledgements so far, in the order they came.
func (lp *Producer) Acked() []Ack {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return slices.Clone(lp.acked)
}

// WaitMore waits until n more records than now are acknowledged.
func (lp *Producer) WaitMore(tb testing.TB, n int, within time.Duration) {
	tb.Helper()
	want := lp.AckedCount() + n
	testbed.Eventually(tb, within, fmt.Sprintf("%d acknowledged records", want), func() (bool, string) {
		got := lp.AckedCount()
		return got >= want, fmt.Sprintf("%d acknowledged; the producer retried %s", got, lp.log.summary())
	})
}

// FirstAckAfter is, per partition in ps, the first acknowledgement of a
// record handed to the client after t0 (so written after t0); ok false
// while one of them has none yet.
func (lp *Producer) FirstAckAfter(t0 time.Time, ps []int32) (map[int32]time.Time, bool) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	first := map[int32]time.Time{}
	for _, a := range lp.acked {
		if !a.Sent.After(t0) || !slices.Contains(ps, a.Partition) {
			continue
		}
		if f, ok := first[a.Partition]; !ok || a.Acked.Before(f) {
			first[a.Partition] = a.Acked
		}
	}
	return first, len(first) == len(ps)
}

// PartitionAcked polls until a record to partition p is acknowledged
// after the first `after` acknowledgements and returns when it was; ok
// is false if none was within.
func (lp *Producer) PartitionAcked(p int32, after int, within time.Duration) (at time.Time, ok bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if at, ok := lp.ackedOn(p, after); ok {
			return at, true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, false
}

// WaitPartition waits until a record to partition p is acknowledged
// after the first `after` acknowledgements, and returns when it was.
func (lp *Producer) WaitPartition(tb testing.TB, p int32, after int, within time.Duration) time.Time {
	tb.Helper()
	var at time.Time
	testbed.Eventually(tb, within, fmt.Sprintf("an acknowledged record on partition %d", p), func() (bool, string) {
		var ok bool
		if at, ok = lp.ackedOn(p, after); ok {
			return true, ""
		}
		return false, fmt.Sprintf("%d acknowledged in all; the producer retried %s", lp.AckedCount(), lp.log.summary())
	})
	return at
}

// ackedOn is when the first acknowledgement to partition p after the
// first `after` ones came.
func (lp *Producer) ackedOn(p int32, after int) (time.Time, bool) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	for _, a := range lp.acked[min(after, len(lp.acked)):] {
		if a.Partition == p {
			return a.Acked, true
		}
	}
	return time.Time{}, false
}

// Retried sums up the produce errors franz-go retried so far, and the
// last warning it logged.
func (lp *Producer) Retried() string { return lp.log.summary() }

// Finish stops producing, waits until every record sent is answered and
// returns the acknowledgements: no record may fail, and franz-go may have
// seen only retriable errors.
func (lp *Producer) Finish(tb testing.TB) []Ack {
	tb.Helper()
	close(lp.stop)
	<-lp.done
	ctx, cancel := context.WithTimeout(context.Background(), lp.flush)
	defer cancel()
	if err := lp.cl.Flush(ctx); err != nil {
		tb.Fatalf("flush: %v", err)
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if len(lp.failed) > 0 {
		tb.Errorf("%d of %d records failed (franz-go retries retriable errors without limit, so none should); first: %v", len(lp.failed), lp.sent, lp.failed[0])
	}
	lp.log.check(tb)
	return slices.Clone(lp.acked)
}
