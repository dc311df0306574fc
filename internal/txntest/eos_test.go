package txntest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
			// The output names its input record: the check matches
			// every input offset to exactly one committed output.
			s.Produce(context.Background(), &kgo.Record{Partition: r.Partition, Key: slices.Clone(r.Key),
				Value: fmt.Appendf(nil, "%d/%d/%s", r.Partition, r.Offset, r.Value)}, nil)
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
// topic, written to all along, to an output topic, one transaction per
// poll, while korvet is SIGKILLed three times mid-transaction. The
// committed output holds every input record exactly once, byte for byte
// (each output names the input partition and offset it came from); a
// read_committed consumer never sees a record of an aborted transaction
// (the output read uncommitted may hold such records: what was written
// before a crash).
func TestExactlyOncePipeline(t *testing.T) {
	b := startBroker(t, "")
	const in, out, group = "eos-in", "eos-out", "eos"
	b.createTopic(t, in, 3, nil)
	b.createTopic(t, out, 3, nil)
	seeds := []string{b.KafkaAddr}
	input := startInput(t, seeds, in)

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
		t.Logf("kill %d after %d committed transactions, %d input records sent", kill, commits(), input.sent.Load())
		b.Restart(t)
	}
	last := commits()
	testbed.WaitFor(t, 2*time.Minute, "transactions to commit after the last restart", func() bool { return commits() > last+2 })
	input.stop()
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

	inRecs := readAll(t, seeds, b.adm, in, false, 2*time.Minute)
	want := make(map[string]string, len(inRecs))
	for _, r := range inRecs {
		want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = string(r.Value)
	}
	recs := readAll(t, seeds, b.adm, out, true, 2*time.Minute)
	seen := make(map[string]int, len(recs))
	for _, r := range recs {
		var p, off int
		var v string
		if _, err := fmt.Sscanf(string(r.Value), "%d/%d/%s", &p, &off, &v); err != nil {
			t.Fatalf("output record %q: %v", r.Value, err)
		}
		from := fmt.Sprintf("%d/%d", p, off)
		if w, ok := want[from]; !ok || w != v {
			t.Fatalf("output %q: input %s is %q (present %v)", r.Value, from, w, ok)
		}
		seen[from]++
	}
	for from := range want {
		if seen[from] != 1 {
			t.Errorf("input record %s is %d times in the committed output", from, seen[from])
		}
	}
	all := readAll(t, seeds, b.adm, out, false, 2*time.Minute)
	t.Logf("input: %d records; committed output: %d records; output in all: %d (the rest aborted)", len(want), len(recs), len(all))
	if len(all) < len(recs) {
		t.Fatalf("read_uncommitted saw %d records, fewer than the %d committed", len(all), len(recs))
	}
}

// inputProducer writes records to a topic in small batches, about 500
// a second, until stopped, riding out broker kills (a batch that fails is
// sent again, so the input may hold a record twice: the check goes by
// offset).
type inputProducer struct {
	sent atomic.Int64
	quit chan struct{}
	done chan struct{}
}

func startInput(t *testing.T, seeds []string, topic string) *inputProducer {
	ip := &inputProducer{quit: make(chan struct{}), done: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RetryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ip.stop(); cl.Close() })
	go func() {
		defer close(ip.done)
		// A steady stream, not one burst: the pipeline has work in every
		// moment a kill can land.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-ip.quit:
				return
			case <-tick.C:
			}
			batch := make([]*kgo.Record, 10)
			for j := range batch {
				batch[j] = &kgo.Record{Key: fmt.Appendf(nil, "%d", i+j), Value: fmt.Appendf(nil, "in-%d", i+j)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := cl.ProduceSync(ctx, batch...).FirstErr()
			cancel()
			if err != nil {
				t.Logf("input batch at %d: %v; sending it again", i, err)
				continue
			}
			i += len(batch)
			ip.sent.Store(int64(i))
		}
	}()
	return ip
}

// stop ends the input and waits until its last batch is acknowledged.
func (ip *inputProducer) stop() {
	select {
	case <-ip.quit:
	default:
		close(ip.quit)
	}
	<-ip.done
}
