package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/resp"
)

// kvNode is an engine with a key index that a test can stop and start
// again on the same Redis and index directory.
type kvNode struct {
	t    *testing.T
	r    *testbed.Redis
	dir  string
	opts engine.Options
	rc   *resp.Client
	e    *engine.Engine
}

func startKV(t *testing.T, r *testbed.Redis, dir string, opts engine.Options) *kvNode {
	t.Helper()
	opts.Index.Dir = dir
	if opts.Index.StaleBudget == 0 {
		opts.Index.StaleBudget = 2 * time.Second
	}
	n := &kvNode{t: t, r: r, dir: dir, opts: opts}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *kvNode) start() {
	n.t.Helper()
	n.e, n.rc = enginetest.Open(n.t, n.r, n.opts)
}

func (n *kvNode) stop() {
	if n.e == nil {
		return
	}
	n.e.Close()
	n.rc.Close()
	n.e, n.rc = nil, nil
}

func (n *kvNode) restart() {
	n.t.Helper()
	n.stop()
	n.start()
}

// waitReady waits until the index has caught up with the log.
func (n *kvNode) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !n.e.KV().Ready() {
		if time.Now().After(deadline) {
			n.t.Fatalf("index not caught up: %+v", n.e.KV().Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func put(t *testing.T, p *engine.Partition, recs ...record.Record) int64 {
	t.Helper()
	base, _, err := p.Append(recs).Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return base
}

func kvRec(key, value string) record.Record {
	r := record.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(key)}
	if value != "\x00tomb" {
		r.Value = []byte(value)
	}
	return r
}

const tomb = "\x00tomb"

// Once an append is acknowledged, KV().Get returns it: the commit path
// indexes before the producer hears back.
func TestKVReadYourWrites(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "users", 2, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := n.e.CreateTopic(ctx, "plain", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		p := tp.Partition(int32(i % 2))
		val := fmt.Sprintf("v%d", i)
		off := put(t, p, kvRec(fmt.Sprintf("k%d", i%7), val))
		got, err := n.e.KV().Get(ctx, "users", []byte(fmt.Sprintf("k%d", i%7)))
		if err != nil || string(got.Value) != val || got.Offset != off || got.Partition != p.ID() {
			t.Fatalf("after write %d: %+v %v", i, got, err)
		}
	}
	put(t, tp.Partition(0), kvRec("k0", tomb))
	if _, err := n.e.KV().Get(ctx, "users", []byte("k0")); !errors.Is(err, engine.ErrKVNotFound) {
		t.Fatalf("tombstoned key: %v", err)
	}
	if _, err := n.e.KV().Get(ctx, "users", []byte("never")); !errors.Is(err, engine.ErrKVNotFound) {
		t.Fatalf("never written: %v", err)
	}
	put(t, plain.Partition(0), kvRec("a", "b"))
	if _, err := n.e.KV().Get(ctx, "plain", []byte("a")); !errors.Is(err, engine.ErrKVNotIndexed) {
		t.Fatalf("plain topic: %v", err)
	}
	if _, err := n.e.KV().Get(ctx, "nope", []byte("a")); !errors.Is(err, engine.ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	// A delete-policy topic indexed on request: tombstones delete keys.
	ix, err := n.e.CreateTopic(ctx, "docs", 1, map[string]string{"korvet.index.enable": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	put(t, ix.Partition(0), kvRec("d", "1"), kvRec("e", "2"), kvRec("d", tomb))
	if got, err := n.e.KV().Get(ctx, "docs", []byte("e")); err != nil || string(got.Value) != "2" {
		t.Fatalf("docs e: %+v %v", got, err)
	}
	if _, err := n.e.KV().Get(ctx, "docs", []byte("d")); !errors.Is(err, engine.ErrKVNotFound) {
		t.Fatalf("docs d: %v", err)
	}
	st, err := n.e.KV().TopicStats(ctx, "users", true)
	if err != nil || st.Keys != 6 || st.Tombstones != 1 || !st.Ready || len(st.Partitions) != 2 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	// A topic deleted and created again starts from an empty view; the
	// old keys leave the index at the next start.
	if err := n.e.DeleteTopic(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	again, err := n.e.CreateTopic(ctx, "users", 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.e.KV().Get(ctx, "users", []byte("k1")); !errors.Is(err, engine.ErrKVNotFound) {
		t.Fatalf("key of the deleted topic: %v", err)
	}
	put(t, again.Partition(0), kvRec("k1", "new"))
	if got, err := n.e.KV().Get(ctx, "users", []byte("k1")); err != nil || string(got.Value) != "new" {
		t.Fatalf("k1 in the new topic: %q %v", got.Value, err)
	}
	n.restart()
	if st := n.e.KV().Stats(); len(st.Topics) != 2 {
		t.Fatalf("after restart, indexed topics %+v", st.Topics)
	}
	verifyEqualsRebuild(t, n)
}

// model is what the log says each key's latest record is.
type model map[string]modelEntry

type modelEntry struct {
	value     string // tomb for a tombstone
	partition int32
	offset    int64
}

func (m model) check(t *testing.T, e *engine.Engine, topic string) {
	t.Helper()
	ctx := context.Background()
	for k, want := range m {
		got, err := e.KV().Get(ctx, topic, []byte(k))
		if want.value == tomb {
			if !errors.Is(err, engine.ErrKVNotFound) {
				t.Fatalf("key %q: want not found (tombstone), got %+v %v", k, got, err)
			}
			continue
		}
		if err != nil || string(got.Value) != want.value || got.Partition != want.partition || got.Offset != want.offset {
			t.Fatalf("key %q: want %+v, got %q %d/%d %v", k, want, got.Value, got.Partition, got.Offset, err)
		}
	}
}

// The index against a map model: random writes, tombstones, compactions
// and restarts (some with the index directory deleted); after each step
// every key reads as the model says.
func TestKVModel(t *testing.T) {
	r := testbed.StartRedis(t)
	dir := t.TempDir()
	n := startKV(t, r, dir, engine.Options{})
	ctx := context.Background()
	// delete.retention.ms=0: tombstones may go at once (they still read as
	// absent), so compaction exercises both paths.
	if _, err := n.e.CreateTopic(ctx, "m", 3, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0"}, false); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	m := model{}
	for step := range 40 {
		tp := n.e.Topic("m")
		for range 1 + rng.IntN(6) {
			// Keys stay in one partition, as Kafka's partitioners keep
			// them: the log orders a key's records only within one.
			part := int32(rng.IntN(3))
			var recs []record.Record
			for range 1 + rng.IntN(50) {
				k := "key-" + strconv.Itoa(3*rng.IntN(20)+int(part))
				v := fmt.Sprintf("s%d-%d", step, rng.IntN(1000))
				if rng.IntN(8) == 0 {
					v = tomb
				}
				recs = append(recs, kvRec(k, v))
			}
			base := put(t, tp.Partition(part), recs...)
			for i, rc := range recs {
				v := string(rc.Value)
				if rc.Value == nil {
					v = tomb
				}
				m[string(rc.Key)] = modelEntry{v, part, base + int64(i)}
			}
		}
		switch rng.IntN(6) {
		case 0:
			n.restart()
			n.waitReady()
		case 1:
			n.stop()
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			n.start()
			n.waitReady()
		case 2, 3:
			if _, err := n.e.CompactTopic(ctx, "m"); err != nil {
				t.Fatal(err)
			}
		}
		m.check(t, n.e, "m")
	}
	// The log holds each key's latest record (and nothing superseded)
	// after a last compaction; the index equals a rebuild.
	if _, err := n.e.CompactTopic(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	tp := n.e.Topic("m")
	seen := map[string]int{}
	for _, p := range tp.Partitions() {
		for _, rec := range readAll(t, p) {
			seen[string(rec.Key)]++
			if want := m[string(rec.Key)]; want.partition == p.ID() && want.offset != rec.Offset {
				t.Fatalf("superseded record %q at %d/%d survived compaction (latest %d)", rec.Key, p.ID(), rec.Offset, want.offset)
			}
		}
	}
	for k, c := range seen {
		if c > 1 {
			t.Fatalf("key %q has %d records after compaction", k, c)
		}
	}
	verifyEqualsRebuild(t, n)
}

// verifyEqualsRebuild stops the node, compares its index with a rebuild
// from the log, and starts it again.
func verifyEqualsRebuild(t *testing.T, n *kvNode) {
	t.Helper()
	n.stop()
	defer n.start()
	rc, err := resp.New(n.r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	e, err := engine.Open(context.Background(), rc, engine.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ix, err := index.Open(n.dir, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	res, err := e.KV().Verify(context.Background(), ix, t.TempDir(), nil, func(d engine.IndexDiff) {
		t.Errorf("difference: %s %q index %+v log %+v", d.Topic, d.Key, d.Index, d.Log)
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Diffs != 0 || res.Keys == 0 {
		t.Fatalf("verify: %+v", res)
	}
}

// Compaction honours min.compaction.lag.ms and delete.retention.ms, keeps
// a partition's last record, and leaves gaps that reads step over.
func TestCompactionLagsAndGaps(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "c", 1, map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000", "delete.retention.ms": "3600000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	at := func(ts int64, k, v string) record.Record { r := kvRec(k, v); r.Timestamp = ts; return r }
	put(t, p,
		at(old, "a", "1"), at(old, "b", "1"), at(old, "a", "2"), // 0 1 2: a@0 superseded, old enough
		at(time.Now().UnixMilli(), "b", "2"),  // 3: b@1 superseded but b@1 is old: goes
		at(time.Now().UnixMilli(), "c", "1"),  // 4
		at(time.Now().UnixMilli(), "c", "2"),  // 5: c@4 superseded, too recent: stays
		at(old, "d", "1"), at(old, "d", tomb), // 6 7: d@6 goes; tombstone old: goes
		at(time.Now().UnixMilli(), "e", tomb), // 8: recent tombstone stays
		at(old, "f", tomb),                    // 9: old tombstone but the last record: stays
	)
	res, err := n.e.CompactTopic(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, rec := range readAll(t, p) {
		offs = append(offs, rec.Offset)
	}
	if want := []int64{2, 3, 4, 5, 8, 9}; fmt.Sprint(offs) != fmt.Sprint(want) {
		t.Fatalf("after compaction offsets %v, want %v (%+v)", offs, want, res)
	}
	if res.Deleted != 3 || res.Tombstones != 1 {
		t.Fatalf("result %+v", res)
	}
	// Reads from a deleted offset step to the next record.
	rr, err := p.Read(ctx, 6, 1<<20)
	if err != nil || len(rr.Records) == 0 || rr.Records[0].Offset != 8 {
		t.Fatalf("read at a gap: %v %v", rr, err)
	}
	rr.Release()
	for k, want := range map[string]string{"a": "2", "b": "2", "c": "2"} {
		if got, err := n.e.KV().Get(ctx, "c", []byte(k)); err != nil || string(got.Value) != want {
			t.Fatalf("%s: %q %v", k, got.Value, err)
		}
	}
	for _, k := range []string{"d", "e", "f"} {
		if _, err := n.e.KV().Get(ctx, "c", []byte(k)); !errors.Is(err, engine.ErrKVNotFound) {
			t.Fatalf("%s: %v", k, err)
		}
	}
	verifyEqualsRebuild(t, n)
}

// A pointer below the log start answers ErrKVGone; one whose record no
// longer carries the key, and which the index does not fix, answers
// ErrKVUnavailable within the budget, never a wrong value.
func TestKVGoneAndStale(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{RetentionInterval: 50 * time.Millisecond, Index: engine.IndexOptions{StaleBudget: 300 * time.Millisecond}})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "r", 1, map[string]string{"korvet.index.enable": "true", "retention.ms": "3600000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	old := kvRec("old", "x")
	old.Timestamp = time.Now().Add(-2 * time.Hour).UnixMilli()
	put(t, p, old)
	put(t, p, kvRec("new", "y"), kvRec("other", "z"))
	deadline := time.Now().Add(5 * time.Second)
	for p.LogStart() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("retention did not trim")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := n.e.KV().Get(ctx, "r", []byte("old")); !errors.Is(err, engine.ErrKVGone) {
		t.Fatalf("trimmed key: %v", err)
	}
	// Remove "new"'s record behind korvet's back: the record the pointer
	// leads to is now "other", which must not be served as "new".
	if _, err := n.rc.Do(ctx, "XDEL", p.StreamKey(), "1-1"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = n.e.KV().Get(ctx, "r", []byte("new"))
	if !errors.Is(err, engine.ErrKVUnavailable) {
		t.Fatalf("stale pointer: %v", err)
	}
	if d := time.Since(began); d < 250*time.Millisecond || d > 2*time.Second {
		t.Fatalf("stale pointer answered after %v, want about the 300ms budget", d)
	}
	if got, err := n.e.KV().Get(ctx, "r", []byte("other")); err != nil || string(got.Value) != "z" {
		t.Fatalf("other: %q %v", got.Value, err)
	}
	st := n.e.KV().Stats()
	if st.Reads.Gone != 1 || st.Reads.Stale != 1 || st.Reads.Hit != 1 {
		t.Fatalf("read outcomes %+v", st.Reads)
	}
}

// Binary, empty and odd keys round-trip.
func TestKVOddKeys(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "odd", 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"", "a/b", "/", "ü€𝄞", "\x00\xff\x01", "with space", "%2F", "..", strings10k()}
	for i, k := range keys {
		put(t, tp.Partition(0), kvRec(k, fmt.Sprint(i)))
	}
	n.restart()
	n.waitReady()
	for i, k := range keys {
		got, err := n.e.KV().Get(ctx, "odd", []byte(k))
		if err != nil || string(got.Value) != fmt.Sprint(i) {
			t.Fatalf("key %q: %q %v", k, got.Value, err)
		}
	}
}

func strings10k() string { return string(bytes.Repeat([]byte("k"), 10000)) }

// The index survives a crash of the whole process in the middle of heavy
// appends: a child process appends until it is killed with SIGKILL (its
// unsynced Pebble writes die with it), then the index catches up from its
// checkpoints and equals a rebuild from the log.
func TestKVCrashDuringAppends(t *testing.T) {
	if os.Getenv("KORVET_KV_CRASH_CHILD") != "" {
		crashChild(t)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	r := testbed.StartRedis(t)
	dir := t.TempDir()
	for round := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKVCrashDuringAppends$", "-test.v")
		cmd.Env = append(os.Environ(), "KORVET_KV_CRASH_CHILD=1", "KORVET_KV_REDIS="+r.URL, "KORVET_KV_DIR="+dir)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it append for a while, then kill it mid-flight.
		marker := dir + ".appending"
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child did not start appending:\n%s", out)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(300+200*round) * time.Millisecond) // appends run on: a different crash point each round
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		os.Remove(marker)

		n := startKV(t, r, dir, engine.Options{})
		for _, tsx := range n.e.KV().Stats().Topics {
			for _, ps := range tsx.Partitions {
				t.Logf("round %d: partition %d restarts %d records behind", round, ps.Partition, ps.Lag)
			}
		}
		n.waitReady()
		st := n.e.KV().Stats()
		if len(st.Topics) != 1 || st.Topics[0].Partitions[0].HighWatermark == 0 {
			t.Fatalf("round %d: nothing appended? %+v\n%s", round, st, out)
		}
		t.Logf("round %d: high watermarks %d/%d", round, st.Topics[0].Partitions[0].HighWatermark, st.Topics[0].Partitions[1].HighWatermark)
		verifyEqualsRebuild(t, n)
		n.stop()
	}
}

// crashChild appends to a compacted topic as fast as it can, forever.
func crashChild(t *testing.T) {
	rc, err := resp.New(os.Getenv("KORVET_KV_REDIS"), resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("KORVET_KV_DIR")
	e, err := engine.Open(context.Background(), rc, engine.Options{Index: engine.IndexOptions{Dir: dir}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tp := e.Topic("crash")
	if tp == nil {
		if tp, err = e.CreateTopic(ctx, "crash", 2, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
			t.Fatal(err)
		}
	}
	var seq atomic.Int64
	var appending sync.Once
	for w := range 8 {
		go func() {
			part := w % 2
			p := tp.Partition(int32(part))
			for {
				recs := make([]record.Record, 20)
				for i := range recs {
					s := seq.Add(1)
					recs[i] = kvRec(fmt.Sprintf("k%d", 2*(s%2500)+int64(part)), fmt.Sprintf("v%d", s))
					if s%17 == 0 {
						recs[i].Value = nil
					}
				}
				if _, _, err := p.Append(recs).Wait(ctx); err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
				} else {
					appending.Do(func() { os.WriteFile(dir+".appending", nil, 0o644) })
				}
			}
		}()
	}
	select {}
}

// An online rebuild while producers append: the new index is swapped in,
// reads never return a wrong value, and afterwards the index equals a
// rebuild from the log and answers read-your-writes again.
func TestKVRebuildOnline(t *testing.T) {
	r := testbed.StartRedis(t)
	n := startKV(t, r, t.TempDir(), engine.Options{})
	ctx := context.Background()
	tp, err := n.e.CreateTopic(ctx, "live", 2, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		recs := make([]record.Record, 500)
		for j := range recs {
			recs[j] = kvRec(fmt.Sprintf("k%d", 2*((i*500+j)%3000)+i%2), fmt.Sprintf("v%d", i*500+j))
		}
		put(t, tp.Partition(int32(i%2)), recs...)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	var writes atomic.Int64
	go func() {
		// Each write is read back at once; during the swap a read may be
		// refused (ErrKVUnavailable), never answered wrongly.
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			writes.Add(1)
			k := fmt.Sprintf("w%d", i%50)
			v := fmt.Sprintf("w-%d", i)
			if _, _, err := tp.Partition(0).Append([]record.Record{kvRec(k, v)}).Wait(ctx); err != nil {
				done <- err
				return
			}
			got, err := n.e.KV().Get(ctx, "live", []byte(k))
			if err != nil && !errors.Is(err, engine.ErrKVUnavailable) {
				done <- fmt.Errorf("read %s: %v", k, err)
				return
			}
			if err == nil && string(got.Value) != v {
				done <- fmt.Errorf("read %s: %q, want %q", k, got.Value, v)
				return
			}
		}
	}()
	res, err := n.e.KV().RebuildOnline(ctx)
	if err != nil || res.Records < 10000 {
		t.Fatalf("online rebuild: %+v %v", res, err)
	}
	if _, err := n.e.KV().RebuildOnline(ctx); err != nil {
		t.Fatalf("second online rebuild: %v", err)
	}
	// Some writes and reads after the swap too (or the writer's error).
	after := writes.Load()
	testbed.WaitFor(t, 10*time.Second, "writes after the rebuild", func() bool { return writes.Load() >= after+20 || len(done) > 0 })
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := n.e.KV().RebuildState(); st.Running || st.Last.IsZero() || st.LastErr != "" {
		t.Fatalf("rebuild state %+v", st)
	}
	n.waitReady()
	got, err := n.e.KV().Get(ctx, "live", []byte("k1999"))
	if err != nil || string(got.Value) != "v9999" {
		t.Fatalf("k1999: %q %v", got.Value, err)
	}
	verifyEqualsRebuild(t, n)
}
