package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/txn"
	"github.com/korvet/korvet/internal/testbed"
)

// TestTxnCoordinatorMovesWithBrokers: a transactional id is coordinated
// by one live broker (the other answers ErrNotCoordinator); when that
// broker leaves, the other takes the id over from Redis with its Ongoing
// transaction, which a new producer then aborts and fences.
func TestTxnCoordinatorMovesWithBrokers(t *testing.T) {
	r := testbed.StartRedis(t)
	ctx := context.Background()
	a := openBroker(t, r, 1, engine.Options{})
	b := openBroker(t, r, 2, engine.Options{})
	testbed.WaitFor(t, 5*time.Second, "both brokers live on both", func() bool {
		return len(a.e.Brokers()) == 2 && len(b.e.Brokers()) == 2
	})
	var id string
	for i := 0; ; i++ {
		id = fmt.Sprintf("app-%d", i)
		if a.e.TxnCoordinator(id) == 1 && b.e.TxnCoordinator(id) == 1 {
			break
		}
	}
	init := txn.InitRequest{ID: id, TimeoutMs: 60000, ProducerID: -1, Epoch: -1}
	if _, _, err := b.e.Txns().InitProducerID(ctx, init); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("init on the other broker: %v, want ErrNotCoordinator", err)
	}
	pid, epoch, err := a.e.Txns().InitProducerID(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.e.Txns().AddPartitions(ctx, id, pid, epoch, []txn.TopicPartition{{Topic: "t", Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	a.stop(false)
	testbed.WaitFor(t, 5*time.Second, "b to own the id", func() bool { return b.e.OwnsTxn(id) })
	d, err := b.e.Txns().Describe(ctx, id)
	if err != nil || d.State != txn.Ongoing || d.ProducerID != pid || d.Epoch != epoch {
		t.Fatalf("taken over: %+v %v", d, err)
	}
	var p2 int64
	var e2 int16
	testbed.WaitFor(t, 10*time.Second, "the new producer initialized", func() bool {
		p2, e2, err = b.e.Txns().InitProducerID(ctx, init)
		if err != nil && !errors.Is(err, txn.ErrConcurrentTransactions) {
			t.Fatalf("init on the new coordinator: %v", err)
		}
		return err == nil
	})
	if p2 != pid || e2 != epoch+2 {
		t.Fatalf("new producer %d/%d, want %d/%d (fenced abort, then the bump)", p2, e2, pid, epoch+2)
	}
	if err := b.e.Txns().AddPartitions(ctx, id, pid, epoch, nil); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("the old producer: %v, want ErrProducerFenced", err)
	}
}
