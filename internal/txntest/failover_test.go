package txntest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// txnOutcome is what the producer learned of one transaction.
type txnOutcome int

const (
	txnCommitted txnOutcome = iota // EndTransaction(commit) succeeded
	txnAborted                     // aborted by the producer, acknowledged
	txnUnknown                     // an error left the outcome open
)

// TestTransactionCoordinatorFailover: three brokers on one Redis; a
// transactional producer commits transactions of 50 records while the
// broker coordinating its transactional id is SIGKILLed and later
// started again. Every transaction is atomic under read_committed: all
// of its records or none; every committed one is there, once; no
// aborted one is.
func TestTransactionCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs korvet brokers")
	}
	r := testbed.StartRedis(t)
	brokers := testbed.StartCluster(t, r.URL, 3)
	seeds := kafkaload.Seeds(brokers)
	adm := kafkaload.Admin(t, seeds)
	const topic, txnID, perTxn = "failover", "failover-producer", 50
	kafkaload.CreateTopic(t, adm, topic, 6, nil, 20*time.Second)

	var mu sync.Mutex
	outcomes := map[int]txnOutcome{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		produceTransactions(t, seeds, topic, txnID, perTxn, stop, func(n int, o txnOutcome) {
			mu.Lock()
			outcomes[n] = o
			mu.Unlock()
		})
	}()
	committed := func() int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for _, o := range outcomes {
			if o == txnCommitted {
				c++
			}
		}
		return c
	}
	testbed.WaitFor(t, time.Minute, "transactions to commit", func() bool { return committed() >= 5 })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	co := adm.FindTxnCoordinators(ctx, txnID)
	if err := co.Error(); err != nil || len(co) != 1 {
		t.Fatalf("find the coordinator of %s: %v (%d answers)", txnID, err, len(co))
	}
	node := co.Sorted()[0].NodeID
	var victim *testbed.Korvet
	for _, b := range brokers {
		if b.NodeID == node {
			victim = b
		}
	}
	if victim == nil {
		t.Fatalf("coordinator %d is none of the brokers", node)
	}
	before := committed()
	victim.Kill()
	t.Logf("SIGKILL node %d, the coordinator of %s, after %d commits", victim.NodeID, txnID, before)
	testbed.WaitFor(t, 2*time.Minute, "commits through the new coordinator", func() bool { return committed() >= before+5 })
	victim.Restart(t)
	mid := committed()
	testbed.WaitFor(t, 2*time.Minute, "commits after the restart", func() bool { return committed() >= mid+5 })
	close(stop)
	wg.Wait()

	visible := map[int]map[int]int{} // txn -> record -> times seen
	for _, rec := range readAll(t, seeds, adm, topic, true, 2*time.Minute) {
		var n, i int
		if _, err := fmt.Sscanf(string(rec.Key), "t%d-%d", &n, &i); err != nil {
			t.Fatalf("record with key %q", rec.Key)
		}
		if want := "value-" + strconv.Itoa(n) + "-" + strconv.Itoa(i); string(rec.Value) != want {
			t.Fatalf("%s: value %q, want %q", rec.Key, rec.Value, want)
		}
		if visible[n] == nil {
			visible[n] = map[int]int{}
		}
		visible[n][i]++
	}
	counts := map[txnOutcome]int{}
	for n, o := range outcomes {
		counts[o]++
		seen := visible[n]
		switch {
		case o == txnCommitted && len(seen) != perTxn:
			t.Errorf("committed transaction %d: %d of its %d records visible", n, len(seen), perTxn)
		case o == txnAborted && len(seen) != 0:
			t.Errorf("aborted transaction %d: %d records visible", n, len(seen))
		case len(seen) != 0 && len(seen) != perTxn:
			t.Errorf("transaction %d (outcome unknown to the producer) is torn: %d of %d records visible", n, len(seen), perTxn)
		}
		for i, k := range seen {
			if k != 1 {
				t.Errorf("transaction %d record %d visible %d times", n, i, k)
			}
		}
	}
	t.Logf("%d transactions: %d committed, %d aborted, %d with an outcome unknown to the producer", len(outcomes),
		counts[txnCommitted], counts[txnAborted], counts[txnUnknown])
}

// produceTransactions commits transactions of perTxn records, numbered
// from 0, until stop closes, reporting each one's outcome. On an error
// it aborts, or when that fails too starts a new client with the same
// transactional id (which fences the old one), as an application would.
func produceTransactions(t *testing.T, seeds []string, topic, txnID string, perTxn int, stop chan struct{}, report func(int, txnOutcome)) {
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
			kgo.TransactionTimeout(20*time.Second), kgo.RetryTimeout(45*time.Second))
		if err != nil {
			t.Errorf("new client: %v", err)
			return nil
		}
		return cl
	}
	cl := newClient()
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for n := 0; cl != nil; n++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := cl.BeginTransaction()
		if err == nil {
			recs := make([]*kgo.Record, perTxn)
			for i := range recs {
				recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "t%d-%d", n, i), Value: fmt.Appendf(nil, "value-%d-%d", n, i)}
			}
			err = cl.ProduceSync(ctx, recs...).FirstErr()
			commit := kgo.TryCommit
			if err != nil {
				commit = kgo.TryAbort
			}
			if endErr := cl.EndTransaction(ctx, commit); endErr != nil {
				err = endErr
				report(n, txnUnknown)
			} else if commit == kgo.TryCommit {
				report(n, txnCommitted)
			} else {
				report(n, txnAborted)
			}
		} else {
			report(n, txnUnknown)
		}
		cancel()
		if err != nil && !strings.Contains(err.Error(), "context canceled") {
			t.Logf("transaction %d: %v; starting a new client", n, err)
			cl.Close()
			cl = newClient()
		}
	}
}
