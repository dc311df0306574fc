package engine_test

import (
	"context"
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

// txnWriter appends transactional batches for the KV and compaction
// tests, one producer per transactional id, with their sequences.
type txnWriter struct {
	t   *testing.T
	rc  *resp.Client
	seq map[int64]int32
}

func newTxnWriter(t *testing.T, rc *resp.Client) *txnWriter {
	return &txnWriter{t: t, rc: rc, seq: map[int64]int32{}}
}

// begin records an Ongoing coordinator state for pid, so that the
// resolver leaves its transactions to the test.
func (w *txnWriter) begin(pid int64) {
	w.t.Helper()
	setTxnState(w.t, w.rc, fmt.Sprintf("tid-%d", pid), map[string]any{"pid": pid, "epoch": 0, "state": "Ongoing"})
}

// put appends recs as one transactional batch of pid and returns its base.
func (w *txnWriter) put(p *engine.Partition, pid int64, recs ...record.Record) int64 {
	w.t.Helper()
	base, _, err := p.AppendFrom(txnProd(pid, 0, w.seq[pid], fmt.Sprintf("tid-%d", pid)), recs).Wait(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq[pid] += int32(len(recs))
	return base
}

// end writes pid's marker and returns its offset.
func (w *txnWriter) end(p *engine.Partition, pid int64, commit bool) int64 {
	w.t.Helper()
	off, err := p.WriteMarker(context.Background(), engine.Marker{ProducerID: pid, Commit: commit})
	if err != nil || off < 0 {
		w.t.Fatalf("marker of %d: %d %v", pid, off, err)
	}
	return off
}

// kvIs checks key's value through the KV view; want tomb: not found.
func kvIs(t *testing.T, e *engine.Engine, topic, key, want string) {
	t.Helper()
	got, err := e.KV().Get(context.Background(), topic, []byte(key))
	if want == tomb {
		if !errors.Is(err, engine.ErrKVNotFound) {
			t.Fatalf("%s: %q %v, want not found", key, got.Value, err)
		}
		return
	}
	if err != nil || string(got.Value) != want {
		t.Fatalf("%s: %q %v, want %q", key, got.Value, err, want)
	}
}

// kvPartStats returns the index figures of partition 0 of topic.
func kvPartStats(t *testing.T, e *engine.Engine, topic string) engine.KVPartitionStats {
	t.Helper()
	for _, ts := range e.KV().Stats().Topics {
		if ts.Topic == topic {
			return ts.Partitions[0]
		}
	}
	t.Fatalf("no index stats for %s", topic)
	return engine.KVPartitionStats{}
}

// The KV view shows a transaction's values once its commit marker is
// written and never an aborted one's; what follows an open transaction's
// first record waits for its end (the index stops at the LSO, yet counts
// as caught up there); a restart mid-transaction keeps that; control
// records are no key's value; a rebuild (offline, online) and verify agree.
func TestKVTransactions(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "kt", 1, map[string]string{"korvet.index.enable": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	w := newTxnWriter(t, n.rc)
	w.begin(7)
	put(t, p, kvRec("k", "v0"))                          // 0
	w.put(p, 7, kvRec("k", "v1"), kvRec("n", "x"))       // 1 2
	put(t, p, kvRec("p", "after"))                       // 3
	w.put(p, 7, kvRec("gone", "1"), kvRec("gone", tomb)) // 4 5
	kvIs(t, n.e, "kt", "k", "v0")
	kvIs(t, n.e, "kt", "n", tomb)
	kvIs(t, n.e, "kt", "p", tomb)
	if s := kvPartStats(t, n.e, "kt"); s.Checkpoint != 1 || s.LastStable != 1 || s.HighWatermark != 6 || s.Lag != 0 || !s.Ready {
		t.Fatalf("stats inside a transaction: %+v", s)
	}

	// Restart mid-transaction: the checkpoint is at the LSO; nothing of
	// the open transaction is in the index.
	n.restart()
	n.waitReady()
	p = n.e.Topic("kt").Partition(0)
	kvIs(t, n.e, "kt", "k", "v0")
	kvIs(t, n.e, "kt", "n", tomb)
	w.rc = n.rc

	// Commit: the transaction and the plain record behind it show.
	if off := w.end(p, 7, true); off != 6 {
		t.Fatalf("commit marker at %d", off)
	}
	kvIs(t, n.e, "kt", "k", "v1")
	kvIs(t, n.e, "kt", "n", "x")
	kvIs(t, n.e, "kt", "p", "after")
	kvIs(t, n.e, "kt", "gone", tomb)
	if s := kvPartStats(t, n.e, "kt"); s.Checkpoint != 7 || s.LastStable != 7 {
		t.Fatalf("stats after the commit: %+v", s)
	}

	// Abort: an overwrite and a new key, never shown; the old value stays.
	w.begin(8)
	w.put(p, 8, kvRec("k", "v2-aborted"), kvRec("new", "aborted")) // 7 8
	put(t, p, kvRec("q", "1"))                                     // 9
	w.put(p, 8, kvRec("n", tomb))                                  // 10
	kvIs(t, n.e, "kt", "q", tomb)
	w.end(p, 8, false) // 11
	kvIs(t, n.e, "kt", "q", "1")
	kvIs(t, n.e, "kt", "k", "v1")
	kvIs(t, n.e, "kt", "new", tomb)
	kvIs(t, n.e, "kt", "n", "x")

	// Two transactions interleaved, the later one ending first: the
	// index waits for the older.
	w.begin(9)
	w.begin(10)
	w.put(p, 9, kvRec("a", "9"))   // 12
	w.put(p, 10, kvRec("b", "10")) // 13
	w.end(p, 10, true)             // 14
	kvIs(t, n.e, "kt", "b", tomb)
	w.end(p, 9, false) // 15
	kvIs(t, n.e, "kt", "b", "10")
	kvIs(t, n.e, "kt", "a", tomb)

	// One left open at the end: rebuilds and verify stop at the LSO too.
	w.begin(11)
	w.put(p, 11, kvRec("k", "v3-open")) // 16
	kvIs(t, n.e, "kt", "k", "v1")
	verifyEqualsRebuild(t, n)
	if _, err := n.e.KV().RebuildOnline(ctx); err != nil {
		t.Fatal(err)
	}
	n.waitReady()
	kvIs(t, n.e, "kt", "k", "v1")
	kvIs(t, n.e, "kt", "new", tomb)
	kvIs(t, n.e, "kt", "b", "10")
	p = n.e.Topic("kt").Partition(0)
	w.rc = n.rc
	w.end(p, 11, true)
	kvIs(t, n.e, "kt", "k", "v3-open")
	verifyEqualsRebuild(t, n)
}

// A rebuild of keys that come in key order writes each partition's table
// while it reads the log (index.Loader streams them) and gives what the
// commit path gave: keys repeated in a row, tombstones, records without a
// key, an aborted and a committed transaction amid the run, a key written
// again out of order (the table ends there), and an open transaction at
// the end (rebuilds stop at the LSO); offline and online.
func TestKVRebuildKeysInOrder(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "ord", 1, map[string]string{"korvet.index.enable": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	w := newTxnWriter(t, n.rc)
	k := 0
	batch := func(count int) []record.Record {
		var recs []record.Record
		for i := range count {
			key := fmt.Sprintf("k%07d", k)
			switch {
			case i%97 == 0:
				recs = append(recs, record.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("no key")})
			case i%50 == 0:
				recs = append(recs, kvRec(key, "v"), kvRec(key, tomb))
			case i%7 == 0:
				recs = append(recs, kvRec(key, "old"), kvRec(key, "v"))
			default:
				recs = append(recs, kvRec(key, "v"))
			}
			k++
		}
		return recs
	}
	for range 6 {
		put(t, p, batch(1000)...)
	}
	w.begin(7)
	w.put(p, 7, batch(500)...)
	put(t, p, batch(300)...) // waits behind the open transaction
	w.end(p, 7, false)
	w.begin(8)
	w.put(p, 8, batch(500)...)
	w.end(p, 8, true)
	put(t, p, kvRec("k0000010", "again")) // out of order
	for range 6 {
		put(t, p, batch(1000)...)
	}
	w.begin(9)
	w.put(p, 9, batch(200)...)
	kvIs(t, n.e, "ord", "k0000010", "again")
	kvIs(t, n.e, "ord", "k0006001", tomb) // aborted
	kvIs(t, n.e, "ord", "k0006601", "v")  // behind the aborted one
	kvIs(t, n.e, "ord", "k0006901", "v")  // committed
	kvIs(t, n.e, "ord", "k0013301", tomb) // open
	verifyEqualsRebuild(t, n)
	if _, err := n.e.KV().RebuildOnline(ctx); err != nil {
		t.Fatal(err)
	}
	n.waitReady()
	kvIs(t, n.e, "ord", "k0000010", "again")
	kvIs(t, n.e, "ord", "k0006001", tomb)
	kvIs(t, n.e, "ord", "k0006901", "v")
	kvIs(t, n.e, "ord", "k0013301", tomb)
	w.rc = n.rc
	w.end(n.e.Topic("ord").Partition(0), 9, true)
	kvIs(t, n.e, "ord", "k0013301", "v")
	verifyEqualsRebuild(t, n)
}

// Records deleted past an open transaction's first offset (DeleteRecords
// up to the high watermark): the index moves to the new log start and no
// further, and the transaction's later records still wait for its end.
func TestKVTransactionDeletedBelow(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "kd", 1, map[string]string{"korvet.index.enable": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	w := newTxnWriter(t, n.rc)
	w.begin(3)
	put(t, p, kvRec("k", "v0"))   // 0
	w.put(p, 3, kvRec("k", "v1")) // 1
	put(t, p, kvRec("m", "1"))    // 2
	if _, err := p.DeleteRecords(ctx, 3); err != nil {
		t.Fatal(err)
	}
	w.put(p, 3, kvRec("k", "v2")) // 3
	put(t, p, kvRec("m", "2"))    // 4
	testbed.WaitFor(t, 10*time.Second, "the index at the new log start", func() bool {
		s := kvPartStats(t, n.e, "kd")
		return s.Checkpoint == 3 && s.Ready
	})
	kvIs(t, n.e, "kd", "m", tomb)
	w.end(p, 3, true) // 5
	kvIs(t, n.e, "kd", "m", "2")
	kvIs(t, n.e, "kd", "k", "v2")
	n.restart()
	n.waitReady()
	kvIs(t, n.e, "kd", "k", "v2")
}

// A broker that follows the partition (the tail and its catch-up) shows
// the same: a committed value once its marker is in, never an aborted one.
func TestKVTransactionsAcrossEngines(t *testing.T) {
	r := testbed.StartRedis(t)
	e1, rc := enginetest.Open(t, r, engine.Options{NodeID: 1, Index: engine.IndexOptions{Dir: t.TempDir()}})
	e2, _ := enginetest.Open(t, r, engine.Options{NodeID: 2, Index: engine.IndexOptions{Dir: t.TempDir()}})
	ctx := context.Background()
	if _, err := e1.CreateTopic(ctx, "kx", 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 5*time.Second, "topic seen by e2", func() bool { return e2.Topic("kx") != nil })
	lead, follow := leaderOf(t, "kx", 0, e1, e2)
	p := lead.Topic("kx").Partition(0)
	w := newTxnWriter(t, rc)
	shows := func(key, want string) {
		t.Helper()
		testbed.WaitFor(t, 10*time.Second, "the follower shows "+key+" = "+want, func() bool {
			got, err := follow.KV().Get(ctx, "kx", []byte(key))
			return err == nil && string(got.Value) == want
		})
	}
	put(t, p, kvRec("k", "v0"))
	shows("k", "v0")
	w.begin(5)
	w.put(p, 5, kvRec("k", "v1"))
	put(t, p, kvRec("m", "1"))
	testbed.WaitFor(t, 10*time.Second, "the follower sees the open transaction", func() bool {
		return follow.Topic("kx").Partition(0).LastStable() == 1 && follow.Topic("kx").Partition(0).HighWatermark() == 3
	})
	kvIs(t, follow, "kx", "k", "v0")
	kvIs(t, follow, "kx", "m", tomb)
	w.end(p, 5, true)
	shows("m", "1")
	kvIs(t, follow, "kx", "k", "v1")

	w.begin(6)
	w.put(p, 6, kvRec("k", "v2-aborted"), kvRec("new", "x"))
	w.end(p, 6, false)
	put(t, p, kvRec("m", "2"))
	shows("m", "2")
	kvIs(t, follow, "kx", "k", "v1")
	kvIs(t, follow, "kx", "new", tomb)
}

// Compaction works below the LSO only: records of aborted transactions go
// (an aborted overwrite never costs the committed value before it),
// committed latest records stay, markers stay, and nothing at or after
// the first record of an open transaction is touched.
func TestCompactionTransactions(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "ct", 1, map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	w := newTxnWriter(t, n.rc)
	for _, pid := range []int64{7, 8, 9} {
		w.begin(pid)
	}
	put(t, p, kvRec("a", "1"))                        // 0
	w.put(p, 7, kvRec("a", "x"), kvRec("b", "x"))     // 1 2
	w.put(p, 7, kvRec("a", tomb))                     // 3
	w.end(p, 7, false)                                // 4: abort
	w.put(p, 8, kvRec("c", "1"), kvRec("c", "2"))     // 5 6
	w.end(p, 8, true)                                 // 7: commit
	w.put(p, 9, kvRec("d", "1"))                      // 8: open
	put(t, p, kvRec("a", "late"), kvRec("c", "late")) // 9 10: after the LSO
	w.put(p, 9, kvRec("d", "2"))                      // 11
	if lso := p.LastStable(); lso != 8 {
		t.Fatalf("LSO %d", lso)
	}
	offsets := func() []int64 {
		t.Helper()
		var offs []int64
		for _, rec := range readAll(t, p) {
			offs = append(offs, rec.Offset)
		}
		return offs
	}
	res, err := n.e.CompactTopic(ctx, "ct")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := offsets(), []int64{0, 4, 6, 7, 8, 9, 10, 11}; !slices.Equal(got, want) {
		t.Fatalf("after compaction below the LSO: %v, want %v (%+v)", got, want, res)
	}
	if res.Deleted != 4 || res.Tombstones != 0 {
		t.Fatalf("result %+v", res)
	}
	kvIs(t, n.e, "ct", "a", "1")
	kvIs(t, n.e, "ct", "b", tomb)
	kvIs(t, n.e, "ct", "c", "2")
	kvIs(t, n.e, "ct", "d", tomb)
	// The markers are still there, as control records.
	_, txns := readTxns(t, p)
	if len(txns) != 8 || !txns[1].Control || txns[1].ProducerID != 7 || !txns[3].Control || txns[3].ProducerID != 8 {
		t.Fatalf("transactions after compaction: %+v", txns)
	}
	// A read_committed reader still learns of the abort.
	if ab := p.AbortedTxns(0, 11); !slices.Equal(ab, []engine.AbortedTxn{{ProducerID: 7, FirstOffset: 1}}) {
		t.Fatalf("aborted %+v", ab)
	}

	// The open transaction commits: the LSO moves and the next pass
	// compacts what it held back.
	w.end(p, 9, true) // 12
	n.waitReady()
	if _, err := n.e.CompactTopic(ctx, "ct"); err != nil {
		t.Fatal(err)
	}
	if got, want := offsets(), []int64{4, 7, 9, 10, 11, 12}; !slices.Equal(got, want) {
		t.Fatalf("after the commit: %v, want %v", got, want)
	}
	kvIs(t, n.e, "ct", "a", "late")
	kvIs(t, n.e, "ct", "c", "late")
	kvIs(t, n.e, "ct", "d", "2")
	verifyEqualsRebuild(t, n)
}

// BenchmarkKVTxnAppend is BenchmarkTxnAppend on an indexed topic, with
// keys (1,000 distinct), timed until the index has applied everything: a
// transaction's records reach the index from the log once its marker is
// in (the catch-up), instead of on the commit path. Reported: records/s;
// compare the sub-benchmarks' ratio.
func BenchmarkKVTxnAppend(b *testing.B) {
	r := testbed.StartRedis(b)
	e, rc := enginetest.Open(b, r, engine.Options{Index: engine.IndexOptions{Dir: b.TempDir()}})
	ctx := context.Background()
	const perBatch, inFlight = 10, 5
	value := make([]byte, 100)
	topics := 0
	for _, c := range []struct {
		name  string
		txn   bool
		perTx int
	}{{"idempotent", false, 0}, {"txn-per-1000", true, 1000}, {"txn-per-100", true, 100}} {
		b.Run(c.name, func(b *testing.B) {
			topics++
			name := fmt.Sprintf("kvbench-%s-%d", c.name, topics)
			tp, err := e.CreateTopic(ctx, name, 1, map[string]string{"retention.ms": "-1", "korvet.index.enable": "true"}, false)
			if err != nil {
				b.Fatal(err)
			}
			p := tp.Partition(0)
			pid, _ := e.NewProducerID(ctx)
			tid := fmt.Sprintf("kvbench-%d", pid)
			if c.txn {
				// Ongoing, so that the resolver leaves the transactions be.
				b.StopTimer()
				if _, err := rc.Do(ctx, "HSET", keys.New("korvet", false).Transactions(), tid, fmt.Sprintf(`{"pid":%d,"epoch":0,"state":"Ongoing"}`, pid)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			prod := engine.Producer{ID: pid, Transactional: c.txn, TransactionalID: tid}
			var pend []*engine.Pending
			drain := func() {
				for _, pd := range pend {
					if _, _, err := pd.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				pend = pend[:0]
			}
			inTx, key := 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				recs := make([]record.Record, perBatch)
				for j := range recs {
					recs[j] = record.Record{Timestamp: 1, Key: []byte(fmt.Sprintf("k%d", key%1000)), Value: value}
					key++
				}
				pend = append(pend, p.AppendFrom(prod, recs))
				prod.FirstSeq += perBatch
				inTx += perBatch
				if len(pend) == inFlight {
					drain()
				}
				if c.txn && inTx >= c.perTx {
					drain()
					if _, err := p.WriteMarker(ctx, engine.Marker{ProducerID: pid, Commit: true}); err != nil {
						b.Fatal(err)
					}
					inTx = 0
				}
			}
			drain()
			if c.txn && inTx > 0 {
				if _, err := p.WriteMarker(ctx, engine.Marker{ProducerID: pid, Commit: true}); err != nil {
					b.Fatal(err)
				}
			}
			// Until the index has it all.
			for {
				s := e.KV().Stats()
				done := false
				for _, ts := range s.Topics {
					if ts.Topic == name {
						done = ts.Partitions[0].Checkpoint >= p.HighWatermark()
					}
				}
				if done {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
