package txntest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// eosWorker is one stage of an exactly-once pipeline: a
// GroupTransactSession reading in (read_committed) and writing
// out-<value> to out, one transaction per poll. It starts a new session
// (same transactional id) whenever the old one fails, as an application
// would after a crash of its broker.
type eosWorker struct {
	t         *testing.T
	seeds     []string
	txnID     string
	in, out   string
	group     string
	committed atomic.Int64 // transactions committed
	aborted   atomic.Int64 // transactions that ended in an abort
	restarts  atomic.Int64 // sessions started again after an error
	stop      chan struct{}
	done      sync.WaitGroup
}

func startWorker(t *testing.T, seeds []string, txnID, in, out, group string) *eosWorker {
	w := &eosWorker{t: t, seeds: seeds, txnID: txnID, in: in, out: out, group: group, stop: make(chan struct{})}
	w.done.Add(1)
	go w.run()
	return w
}

func (w *eosWorker) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *eosWorker) run() {
	defer w.done.Done()
	for !w.stopped() {
		if err := w.session(); err != nil && !w.stopped() {
			w.restarts.Add(1)
			w.t.Logf("worker %s: session ended: %v; starting a new one", w.txnID, err)
			select {
			case <-w.stop:
			case <-time.After(200 * time.Millisecond): // a crashed broker is restarting
			}
		}
	}
}

// session runs one GroupTransactSession until it fails or the worker stops.
func (w *eosWorker) session() error {
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(w.seeds...),
		kgo.TransactionalID(w.txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(w.group),
		kgo.ConsumeTopics(w.in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second),
		kgo.RetryTimeout(30*time.Second),
		kgo.DefaultProduceTopic(w.out),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	defer s.Close()
	for !w.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := s.PollFetches(ctx)
		cancel()
		if errs := fs.Errors(); len(errs) > 0 {
			for _, e := range errs {
				if !errors.Is(e.Err, context.DeadlineExceeded) {
					w.t.Logf("worker %s: fetch: %v", w.txnID, e.Err)
				}
			}
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			// Same partition number in the output: the check can then
			// tell each input record's output by key.
			s.Produce(context.Background(), &kgo.Record{Partition: r.Partition, Key: slices.Clone(r.Key), Value: append([]byte("out-"), r.Value...)}, nil)
		})
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		committed, err := s.End(ctx, kgo.TryCommit)
		cancel()
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if committed {
			w.committed.Add(1)
		} else {
			w.aborted.Add(1)
		}
	}
	return nil
}

func (w *eosWorker) close() {
	close(w.stop)
	w.done.Wait()
}

// TestExactlyOncePipeline: two GroupTransactSession workers copy an input
// topic to an output topic, one transaction per poll, while korvet is
// SIGKILLed three times mid-transaction. The committed output holds every
// input record exactly once, byte for byte; a read_committed consumer
// never sees a record of an aborted transaction (the output read
// uncommitted may hold such records: what was written before a crash).
func TestExactlyOncePipeline(t *testing.T) {
	b := startBroker(t, "")
	const in, out, group, n = "eos-in", "eos-out", "eos", 6000
	b.createTopic(t, in, 3, nil)
	b.createTopic(t, out, 3, nil)
	seeds := []string{b.KafkaAddr}
	produceInput(t, seeds, in, n)

	workers := []*eosWorker{
		startWorker(t, seeds, "eos-worker-1", in, out, group),
		startWorker(t, seeds, "eos-worker-2", in, out, group),
	}
	commits := func() int64 {
		var c int64
		for _, w := range workers {
			c += w.committed.Load()
		}
		return c
	}
	for kill := 1; kill <= 3; kill++ {
		// Kill while transactions are in flight: after more commits.
		before := commits()
		testbed.WaitFor(t, 2*time.Minute, fmt.Sprintf("transactions to commit before kill %d", kill), func() bool { return commits() > before+2 })
		b.Kill()
		t.Logf("kill %d after %d committed transactions", kill, commits())
		b.Restart(t)
	}
	// The group has consumed everything once its commits reach the
	// input's end.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ends, err := b.adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 3*time.Minute, "the group's commits to reach the input's end", func() bool {
		got, err := b.adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := got.Lookup(in, o.Partition); !ok || c.Err != nil || c.At < o.Offset {
				done = false
			}
		})
		return done
	})
	for _, w := range workers {
		w.close()
		t.Logf("worker %s: %d committed, %d aborted, %d new sessions", w.txnID, w.committed.Load(), w.aborted.Load(), w.restarts.Load())
	}

	recs := readAll(t, seeds, b.adm, out, true, 2*time.Minute)
	seen := make(map[int]int, n)
	for _, r := range recs {
		i, err := strconv.Atoi(string(r.Key))
		if err != nil || i < 0 || i >= n {
			t.Fatalf("output record with key %q", r.Key)
		}
		if want := fmt.Sprintf("out-in-%d", i); string(r.Value) != want {
			t.Fatalf("output key %d: value %q, want %q", i, r.Value, want)
		}
		seen[i]++
	}
	for i := range n {
		if seen[i] != 1 {
			t.Errorf("input %d is %d times in the committed output", i, seen[i])
		}
	}
	all := readAll(t, seeds, b.adm, out, false, 2*time.Minute)
	t.Logf("output: %d committed records, %d records in all (the rest aborted)", len(recs), len(all))
	if len(all) < len(recs) {
		t.Fatalf("read_uncommitted saw %d records, fewer than the %d committed", len(all), len(recs))
	}
}
