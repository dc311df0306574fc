package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/keys"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

// setTxnState writes a coordinator state as engine/txn does, so the
// resolver has something to read.
func setTxnState(t *testing.T, rc *resp.Client, id string, st map[string]any) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Do(context.Background(), "HSET", keys.New("korvet", false).Transactions(), id, b); err != nil {
		t.Fatal(err)
	}
}

func txnProd(pid int64, epoch int16, seq int32, id string) engine.Producer {
	return engine.Producer{ID: pid, Epoch: epoch, FirstSeq: seq, Transactional: true, TransactionalID: id}
}

// readTxns reads the whole partition with each record's transaction.
func readTxns(t *testing.T, p *engine.Partition) ([]record.Record, []record.Txn) {
	t.Helper()
	var out []record.Record
	var txns []record.Txn
	for off := p.LogStart(); off < p.HighWatermark(); {
		res, err := p.Read(context.Background(), off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Records {
			out = append(out, cloneRecord(r))
			tx := record.Txn{ProducerID: -1}
			if len(res.Txns) > 0 {
				if len(res.Txns) != len(res.Records) {
					t.Fatalf("%d txns for %d records", len(res.Txns), len(res.Records))
				}
				tx = res.Txns[i]
			}
			txns = append(txns, tx)
		}
		off = res.Records[len(res.Records)-1].Offset + 1
		res.Release()
	}
	return out, txns
}

// Transactional appends keep their producer per record and hold the LSO
// at the oldest open transaction; markers are control records at their
// own offsets that close it (an abort also in the aborted index); a
// marker without an open transaction writes nothing; old epochs are
// fenced; a restart mid-transaction keeps the open transaction, the LSO
// and the aborted index; a trim drops aborted entries below the start.
func TestTxnAppendMarkersAndLSO(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "tx", 1, map[string]string{"retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	// Ongoing states: the resolver must leave these transactions alone.
	setTxnState(t, rc, "a,1", map[string]any{"pid": 10, "epoch": 0, "state": "Ongoing"})
	setTxnState(t, rc, "b", map[string]any{"pid": 11, "epoch": 0, "state": "Ongoing"})

	mustAppend := func(prod engine.Producer, rs []record.Record) int64 {
		t.Helper()
		b, _, err := p.AppendFrom(prod, rs).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustAppend(engine.NoProducer, recs(2, 1, "plain"))                      // 0-1
	if b := mustAppend(txnProd(10, 0, 0, "a,1"), recs(2, 1, "a")); b != 2 { // 2-3
		t.Fatalf("base %d", b)
	}
	mustAppend(txnProd(11, 0, 0, "b"), recs(1, 1, "b"))    // 4
	mustAppend(txnProd(10, 0, 2, "a,1"), recs(1, 1, "a2")) // 5
	if lso, hw := p.LastStable(), p.HighWatermark(); lso != 2 || hw != 6 {
		t.Fatalf("LSO %d HW %d, want 2 6", lso, hw)
	}
	if !p.HasOpenTxn(10, 0) || p.HasOpenTxn(10, 1) || p.HasOpenTxn(12, 0) {
		t.Fatal("HasOpenTxn wrong")
	}
	wantOpen := []engine.OpenTxn{{ProducerID: 10, FirstOffset: 2, TransactionalID: "a,1"}, {ProducerID: 11, FirstOffset: 4, TransactionalID: "b"}}
	if got := p.OpenTxns(); !slices.Equal(got, wantOpen) {
		t.Fatalf("open %+v, want %+v", got, wantOpen)
	}
	// A plain batch of a producer in a transaction is refused.
	if _, _, err := p.AppendFrom(engine.Producer{ID: 10, FirstSeq: 3}, recs(1, 1, "x")).Wait(ctx); !errors.Is(err, engine.ErrInvalidTxnState) {
		t.Fatalf("plain batch in a transaction: %v", err)
	}

	// Restart mid-transaction.
	e.Close()
	e, rc = enginetest.Open(t, r, engine.Options{})
	p = e.Topic("tx").Partition(0)
	if got := p.OpenTxns(); !slices.Equal(got, wantOpen) || p.LastStable() != 2 {
		t.Fatalf("after restart: open %+v LSO %d", got, p.LastStable())
	}

	// Commit a: marker at 6; LSO moves to b's start.
	off, err := p.WriteMarker(ctx, engine.Marker{ProducerID: 10, Epoch: 0, Commit: true, CoordinatorEpoch: 3})
	if err != nil || off != 6 {
		t.Fatalf("commit marker: %d %v", off, err)
	}
	if p.LastStable() != 4 {
		t.Fatalf("LSO %d, want 4", p.LastStable())
	}
	if off, err := p.WriteMarker(ctx, engine.Marker{ProducerID: 10, Epoch: 0, Commit: true}); err != nil || off != -1 {
		t.Fatalf("second marker: %d %v, want -1", off, err)
	}
	// Abort b with a bumped epoch: it fences epoch 0.
	if off, err := p.WriteMarker(ctx, engine.Marker{ProducerID: 11, Epoch: 1, Commit: false, CoordinatorEpoch: 3}); err != nil || off != 7 {
		t.Fatalf("abort marker: %d %v", off, err)
	}
	if lso, hw := p.LastStable(), p.HighWatermark(); lso != 8 || hw != 8 {
		t.Fatalf("LSO %d HW %d, want 8 8", lso, hw)
	}
	if _, _, err := p.AppendFrom(txnProd(11, 0, 1, "b"), recs(1, 1, "zombie")).Wait(ctx); !errors.Is(err, engine.ErrInvalidProducerEpoch) {
		t.Fatalf("zombie: %v", err)
	}
	if got := p.AbortedTxns(0, 100); !slices.Equal(got, []engine.AbortedTxn{{ProducerID: 11, FirstOffset: 4}}) {
		t.Fatalf("aborted %+v", got)
	}
	if got := p.AbortedTxns(8, 100); len(got) != 0 {
		t.Fatalf("aborted after its marker: %+v", got)
	}
	if got := p.AbortedTxns(0, 3); len(got) != 0 {
		t.Fatalf("aborted before its first: %+v", got)
	}

	got, txns := readTxns(t, p)
	want := []struct {
		pid     int64
		control bool
		key     string
	}{{-1, false, "plain-0"}, {-1, false, "plain-1"}, {10, false, "a-0"}, {10, false, "a-1"}, {11, false, "b-0"}, {10, false, "a2-0"},
		{10, true, "\x00\x00\x00\x01"}, {11, true, "\x00\x00\x00\x00"}}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		if txns[i].ProducerID != w.pid || txns[i].Control != w.control || string(got[i].Key) != w.key {
			t.Fatalf("record %d: %+v key %q, want %+v", i, txns[i], got[i].Key, w)
		}
	}
	if !bytes.Equal(got[6].Value, []byte{0, 0, 0, 0, 0, 3}) || txns[7].Epoch != 1 {
		t.Fatalf("commit marker value %x, abort epoch %d", got[6].Value, txns[7].Epoch)
	}
	// The stream holds the documented layout.
	k := keys.New("korvet", false)
	rep, err := rc.Do(ctx, "XRANGE", k.Stream("tx", 0, 0), "6", "6")
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(replyStrings(rep)); s != "[6-1 __ts "+fmt.Sprint(got[6].Timestamp)+" __txn 10.0 __ctl  __key \x00\x00\x00\x01 __value \x00\x00\x00\x00\x00\x03]" {
		t.Fatalf("marker entry %q", s)
	}
	if n, err := rc.Do(ctx, "HEXISTS", k.Partition("tx", 0), "txn:10"); err != nil || fmt.Sprint(replyStrings(n)) != "[0]" {
		t.Fatalf("txn:10 still in the meta hash: %v", err)
	}

	// Restart: the aborted index comes back from Redis.
	e.Close()
	e, rc = enginetest.Open(t, r, engine.Options{})
	p = e.Topic("tx").Partition(0)
	if got := p.AbortedTxns(0, 100); !slices.Equal(got, []engine.AbortedTxn{{ProducerID: 11, FirstOffset: 4}}) || p.LastStable() != 8 {
		t.Fatalf("after restart: aborted %+v LSO %d", got, p.LastStable())
	}
	// A trim past the abort marker drops it, in memory and in Redis.
	if _, err := p.DeleteRecords(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if got := p.AbortedTxns(0, 100); len(got) != 0 {
		t.Fatalf("aborted after trim: %+v", got)
	}
	if n, err := rc.Do(ctx, "XLEN", k.Aborted("tx", 0)); err != nil || fmt.Sprint(replyStrings(n)) != "[0]" {
		t.Fatalf("aborted index after trim: %v %v", replyStrings(n), err)
	}
}

// replyStrings flattens a reply into its strings, for comparisons.
func replyStrings(r resp.Reply) []string {
	if r.Len() == 0 {
		return []string{string(r.Bytes())}
	}
	var out []string
	r.ForEach(func(x resp.Reply) bool {
		out = append(out, replyStrings(x)...)
		return true
	})
	return out
}

// The resolver ends each open transaction as the coordinator's stored
// state says: commit for PrepareCommit/CompleteCommit (also under a new
// producer id whose prev_pid is the transaction's), abort for
// PrepareAbort/CompleteAbort/Empty/no state/a newer epoch or producer; an
// Ongoing transaction at its own epoch is left open.
func TestTxnResolver(t *testing.T) {
	r := testbed.StartRedis(t)
	e, rc := enginetest.Open(t, r, engine.Options{TxnResolveInterval: 50 * time.Millisecond})
	ctx := context.Background()
	cases := []struct {
		name   string
		state  map[string]any // nil: none stored
		commit bool
		epoch  int16 // of the marker
	}{
		{"no state", nil, false, 2},
		{"PrepareCommit", map[string]any{"pid": 100, "epoch": 2, "state": "PrepareCommit"}, true, 2},
		{"CompleteCommit", map[string]any{"pid": 100, "epoch": 2, "state": "CompleteCommit"}, true, 2},
		{"PrepareCommit bumped (v2)", map[string]any{"pid": 100, "epoch": 3, "state": "PrepareCommit", "v2": true}, true, 3},
		{"PrepareAbort", map[string]any{"pid": 100, "epoch": 2, "state": "PrepareAbort"}, false, 2},
		{"CompleteAbort", map[string]any{"pid": 100, "epoch": 2, "state": "CompleteAbort"}, false, 2},
		{"Empty", map[string]any{"pid": 100, "epoch": 2, "state": "Empty"}, false, 2},
		{"Ongoing newer epoch", map[string]any{"pid": 100, "epoch": 4, "state": "Ongoing"}, false, 4},
		{"newer producer", map[string]any{"pid": 555, "epoch": 0, "state": "Ongoing"}, false, 2},
		{"commit under new pid", map[string]any{"pid": 556, "epoch": 0, "prev_pid": 100, "state": "PrepareCommit"}, true, 2},
		{"abort under new pid", map[string]any{"pid": 557, "epoch": 0, "prev_pid": 100, "state": "PrepareAbort"}, false, 2},
	}
	tp, err := e.CreateTopic(ctx, "res", int32(len(cases)+1), map[string]string{"retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	// States first: a transaction without one is aborted at the next sweep.
	for i, c := range cases {
		if c.state != nil {
			setTxnState(t, rc, fmt.Sprintf("id-%d", i), c.state)
		}
	}
	ongoing := len(cases)
	setTxnState(t, rc, "id-ongoing", map[string]any{"pid": 100, "epoch": 2, "state": "Ongoing"})
	for i := range cases {
		if _, _, err := tp.Partition(int32(i)).AppendFrom(txnProd(100, 2, 0, fmt.Sprintf("id-%d", i)), recs(2, 1, "r")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	po := tp.Partition(int32(ongoing))
	if _, _, err := po.AppendFrom(txnProd(100, 2, 0, "id-ongoing"), recs(2, 1, "r")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "the resolver ends every decided transaction", func() (bool, string) {
		for i, c := range cases {
			if p := tp.Partition(int32(i)); p.LastStable() != 3 {
				return false, fmt.Sprintf("%s: LSO %d", c.name, p.LastStable())
			}
		}
		return true, ""
	})
	for i, c := range cases {
		got, txns := readTxns(t, tp.Partition(int32(i)))
		if len(got) != 3 || !txns[2].Control || txns[2].ProducerID != 100 || txns[2].Epoch != c.epoch {
			t.Fatalf("%s: %d records, last %+v", c.name, len(got), txns[len(txns)-1])
		}
		if gotCommit := got[2].Key[3] == 1; gotCommit != c.commit {
			t.Fatalf("%s: commit %v, want %v", c.name, gotCommit, c.commit)
		}
		if aborted := len(tp.Partition(int32(i)).AbortedTxns(0, 10)) == 1; aborted == c.commit {
			t.Fatalf("%s: aborted index %v", c.name, aborted)
		}
	}
	if err := e.ResolveTxns(ctx, po); err != nil {
		t.Fatal(err)
	}
	if !po.HasOpenTxn(100, 2) || po.HighWatermark() != 2 {
		t.Fatalf("an Ongoing transaction was ended (HW %d)", po.HighWatermark())
	}
	// Once its coordinator decides, it ends too.
	setTxnState(t, rc, "id-ongoing", map[string]any{"pid": 100, "epoch": 2, "state": "PrepareCommit"})
	testbed.Eventually(t, 10*time.Second, "the decided transaction ends", func() (bool, string) {
		return po.LastStable() == 3, fmt.Sprintf("LSO %d", po.LastStable())
	})
}

// WriteTxnMarkers reaches partitions another broker leads: the leader
// hears of it (txn event) and writes the marker the coordinator's state
// decides; the caller returns once Redis shows every transaction ended.
func TestWriteTxnMarkersRemoteLeader(t *testing.T) {
	r := testbed.StartRedis(t)
	e0, rc := enginetest.Open(t, r, engine.Options{NodeID: 0, TxnResolveInterval: time.Hour})
	e1, _ := enginetest.Open(t, r, engine.Options{NodeID: 1, TxnResolveInterval: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e0.CreateTopic(ctx, "rm", 8, map[string]string{"retention.ms": "-1"}, false); err != nil {
		t.Fatal(err)
	}
	leaderOf := func(i int32) *engine.Partition {
		for _, e := range []*engine.Engine{e0, e1} {
			if tp := e.Topic("rm"); tp != nil && tp.Partition(i).IsLeader() {
				return tp.Partition(i)
			}
		}
		return nil
	}
	testbed.Eventually(t, 20*time.Second, "both brokers lead partitions", func() (bool, string) {
		n1 := 0
		for i := range int32(8) {
			p := leaderOf(i)
			if p == nil {
				return false, fmt.Sprintf("partition %d has no leader", i)
			}
			if e1.Topic("rm") != nil && p == e1.Topic("rm").Partition(i) {
				n1++
			}
		}
		return n1 > 0 && n1 < 8, fmt.Sprintf("broker 1 leads %d of 8", n1)
	})
	setTxnState(t, rc, "rid", map[string]any{"pid": 77, "epoch": 0, "state": "PrepareCommit"})
	var parts []engine.TopicPartition
	for i := range int32(8) {
		if _, _, err := leaderOf(i).AppendFrom(txnProd(77, 0, 0, "rid"), recs(1, 1, "x")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, engine.TopicPartition{Topic: "rm", Partition: i})
	}
	parts = append(parts, engine.TopicPartition{Topic: "gone", Partition: 0})
	if err := e0.WriteTxnMarkers(ctx, engine.Marker{ProducerID: 77, Epoch: 0, Commit: true}, parts); err != nil {
		t.Fatal(err)
	}
	for i := range int32(8) {
		p := leaderOf(i)
		got, txns := readTxns(t, p)
		if len(got) != 2 || !txns[1].Control || got[1].Key[3] != 1 || p.LastStable() != 2 {
			t.Fatalf("partition %d: %d records, %+v, LSO %d", i, len(got), txns, p.LastStable())
		}
	}
}

// A broker taking a partition up ends the open transactions the
// coordinator decided while nobody led it (no sweep needed), and reads
// below an offset stop there.
func TestTxnResolvedOnLeadership(t *testing.T) {
	r := testbed.StartRedis(t)
	opts := engine.Options{TxnResolveInterval: time.Hour}
	e, rc := enginetest.Open(t, r, opts)
	ctx := context.Background()
	tp, err := e.CreateTopic(ctx, "lead", 1, map[string]string{"retention.ms": "-1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	setTxnState(t, rc, "L", map[string]any{"pid": 5, "epoch": 0, "state": "Ongoing"})
	if _, _, err := tp.Partition(0).AppendFrom(engine.NoProducer, recs(2, 1, "p")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.Partition(0).AppendFrom(txnProd(5, 0, 0, "L"), recs(3, 1, "t")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	for _, c := range []struct{ below, n int64 }{{0, 0}, {1, 1}, {p.LastStable(), 2}, {-1, 5}} {
		res, err := p.ReadBelow(ctx, 0, 1<<20, c.below)
		if err != nil || int64(len(res.Records)) != c.n {
			t.Fatalf("ReadBelow %d: %v, %d records, want %d", c.below, err, len(res.Records), c.n)
		}
		res.Release()
	}
	e.Close()
	setTxnState(t, rc, "L", map[string]any{"pid": 5, "epoch": 0, "state": "PrepareCommit"})
	e, _ = enginetest.Open(t, r, opts)
	p = e.Topic("lead").Partition(0)
	testbed.Eventually(t, 10*time.Second, "the new leader commits", func() (bool, string) {
		return p.LastStable() == 6 && p.HighWatermark() == 6, fmt.Sprintf("LSO %d HW %d", p.LastStable(), p.HighWatermark())
	})
	if _, txns := readTxns(t, p); !txns[5].Control {
		t.Fatalf("last record %+v, want a marker", txns[5])
	}
}
