package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// TestTxnOffsetsCompletedAcrossEngines: two brokers on one Redis. The
// transaction's end reaches a group's offsets through a broker that does
// not coordinate the group; the coordinator learns of it on the event
// stream and answers the committed offset, stable, within a deadline
// (well before the periodic resync would catch it).
func TestTxnOffsetsCompletedAcrossEngines(t *testing.T) {
	r := testbed.StartRedis(t)
	e1, _ := enginetest.Open(t, r, engine.Options{NodeID: 1})
	e2, _ := enginetest.Open(t, r, engine.Options{NodeID: 2})
	ctx := context.Background()
	const name = "txg"
	testbed.WaitFor(t, 5*time.Second, "both brokers agree on the coordinator", func() bool {
		return e1.Coordinator(name) == e2.Coordinator(name)
	})
	co, other := e1, e2
	if e1.Coordinator(name) != e1.NodeID() {
		co, other = e2, e1
	}
	tp := group.TopicPartition{Topic: "t", Partition: 0}
	req := group.TxnCommitRequest{Group: name, Generation: -1, ProducerID: 11,
		Offsets: []group.PartitionCommit{{TopicPartition: tp, Commit: group.Commit{Offset: 77, LeaderEpoch: -1}}}}
	if _, err := other.Groups().TxnCommit(ctx, req); !errors.Is(err, group.ErrNotCoordinator) {
		t.Fatalf("transactional commit at the broker not coordinating the group: %v", err)
	}
	if _, err := co.Groups().TxnCommit(ctx, req); err != nil {
		t.Fatal(err)
	}
	stable := func() (int64, error) {
		got, err := co.Groups().Fetch(ctx, name, []group.TopicPartition{tp}, true)
		if err != nil {
			return 0, err
		}
		return got[0].Offset, got[0].Err
	}
	if _, err := stable(); !errors.Is(err, group.ErrUnstableOffsetCommit) {
		t.Fatalf("pending offset: %v", err)
	}
	if err := other.Groups().CompleteTxn(ctx, name, 11, true); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 5*time.Second, "the coordinator answers the committed offset", func() bool {
		off, err := stable()
		return err == nil && off == 77
	})
}
