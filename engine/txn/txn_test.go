package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// fakeMarkers records the markers asked for; failing makes it refuse
// (as a partition leader that cannot be reached).
type fakeMarkers struct {
	mu      sync.Mutex
	calls   []markerCall
	failing atomic.Bool
	delay   atomic.Int64 // nanoseconds each call takes
}

type markerCall struct {
	m     Marker
	parts []TopicPartition
}

func (f *fakeMarkers) WriteTxnMarkers(ctx context.Context, m Marker, parts []TopicPartition) error {
	if d := time.Duration(f.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.failing.Load() {
		return errors.New("leader unreachable")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, markerCall{m, append([]TopicPartition(nil), parts...)})
	return nil
}

func (f *fakeMarkers) all() []markerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]markerCall(nil), f.calls...)
}

type offsetCall struct {
	group  string
	pid    int64
	commit bool
}

type fakeOffsets struct {
	mu    sync.Mutex
	calls []offsetCall
}

func (f *fakeOffsets) CompleteTxn(_ context.Context, group string, pid int64, commit bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, offsetCall{group, pid, commit})
	return nil
}

func (f *fakeOffsets) all() []offsetCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]offsetCall(nil), f.calls...)
}

type bed struct {
	t       testing.TB
	rc      *resp.Client
	markers *fakeMarkers
	offsets *fakeOffsets
	pids    atomic.Int64
}

func newBed(t testing.TB) *bed {
	t.Helper()
	r := testbed.StartRedis(t)
	rc, err := resp.New(r.URL, resp.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	b := &bed{t: t, rc: rc, markers: &fakeMarkers{}, offsets: &fakeOffsets{}}
	b.pids.Store(1000)
	return b
}

// open opens a coordinator on the bed's Redis; o's zero fields get test
// values.
func (b *bed) open(o Options) *Coordinator {
	b.t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	o.NewProducerID = func(context.Context) (int64, error) { return b.pids.Add(1), nil }
	if o.Markers == nil {
		o.Markers = b.markers
	}
	if o.Offsets == nil {
		o.Offsets = b.offsets
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = 20 * time.Millisecond
	}
	o.RetryBackoff = 10 * time.Millisecond
	c, err := Open(context.Background(), b.rc, o)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(c.Close)
	return c
}

// stored is id's state as Redis holds it.
func (b *bed) stored(c *Coordinator, id string) (record, bool) {
	b.t.Helper()
	rec, _, found, err := c.read(context.Background(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return rec, found
}

// waitState waits for id to be stored in state want.
func (b *bed) waitState(c *Coordinator, id string, want State) record {
	b.t.Helper()
	var rec record
	testbed.Eventually(b.t, 5*time.Second, fmt.Sprintf("%s in %s", id, want), func() (bool, string) {
		var found bool
		rec, found = b.stored(c, id)
		return found && rec.State == want, fmt.Sprintf("found %v state %s", found, rec.State)
	})
	return rec
}

func mustIs(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

var (
	ctx = context.Background()
	tp0 = TopicPartition{"orders", 0}
	tp1 = TopicPartition{"orders", 1}
)

func initID(t *testing.T, c *Coordinator, id string) (int64, int16) {
	t.Helper()
	pid, epoch, err := c.InitProducerID(ctx, InitRequest{ID: id, TimeoutMs: 60000, ProducerID: -1, Epoch: -1})
	if err != nil {
		t.Fatalf("init %s: %v", id, err)
	}
	return pid, epoch
}

func TestCommitAndAbort(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, epoch := initID(t, c, "tx")
	if epoch != 0 {
		t.Fatalf("new id: epoch %d, want 0", epoch)
	}
	if rec, _ := b.stored(c, "tx"); rec.State != Empty || rec.PID != pid {
		t.Fatalf("stored %+v", rec)
	}
	// Ending with no transaction is refused (v1).
	_, err := c.EndTxn(ctx, "tx", pid, epoch, true, false)
	mustIs(t, err, ErrInvalidTxnState)

	if err := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp0, tp1}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddOffsets(ctx, "tx", pid, epoch, "g1"); err != nil {
		t.Fatal(err)
	}
	rec, _ := b.stored(c, "tx")
	if rec.State != Ongoing || len(rec.Partitions) != 2 || len(rec.Groups) != 1 || rec.StartMs == 0 {
		t.Fatalf("after adds: %+v", rec)
	}
	if err := c.CheckOffsets(ctx, "tx", pid, epoch, "g1"); err != nil {
		t.Fatal(err)
	}
	mustIs(t, c.CheckOffsets(ctx, "tx", pid, epoch, "g2"), ErrInvalidTxnState)
	if err := c.VerifyPartition(ctx, "tx", pid, epoch, "orders", 1); err != nil {
		t.Fatal(err)
	}
	mustIs(t, c.VerifyPartition(ctx, "tx", pid, epoch, "orders", 7), ErrInvalidTxnState)
	mustIs(t, c.VerifyPartition(ctx, "tx", pid, epoch+1, "orders", 1), ErrProducerFenced)
	errs, err := c.VerifyPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp0, {"other", 0}})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalidTxnState) {
		t.Fatalf("verify: %v %v", errs, err)
	}

	res, err := c.EndTxn(ctx, "tx", pid, epoch, true, false)
	if err != nil || res.ProducerID != pid || res.Epoch != epoch {
		t.Fatalf("end: %+v %v", res, err)
	}
	b.waitState(c, "tx", CompleteCommit)
	calls := b.markers.all()
	if len(calls) != 1 || !calls[0].m.Commit || calls[0].m.ProducerID != pid || calls[0].m.Epoch != epoch || len(calls[0].parts) != 2 {
		t.Fatalf("markers: %+v", calls)
	}
	if oc := b.offsets.all(); len(oc) != 1 || oc[0] != (offsetCall{"g1", pid, true}) {
		t.Fatalf("offsets: %+v", oc)
	}
	// A retried commit is answered; an abort now is not.
	if _, err := c.EndTxn(ctx, "tx", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	_, err = c.EndTxn(ctx, "tx", pid, epoch, false, false)
	mustIs(t, err, ErrInvalidTxnState)

	// The next transaction, aborted.
	if err := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp1}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := b.stored(c, "tx"); rec.State != Ongoing || len(rec.Partitions) != 1 || len(rec.Groups) != 0 {
		t.Fatalf("second transaction: %+v", rec)
	}
	if _, err := c.EndTxn(ctx, "tx", pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	b.waitState(c, "tx", CompleteAbort)
	calls = b.markers.all()
	if len(calls) != 2 || calls[1].m.Commit || calls[1].parts[0] != tp1 {
		t.Fatalf("markers: %+v", calls)
	}
}

func TestFencing(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, e0 := initID(t, c, "tx")
	pid2, e1 := initID(t, c, "tx") // a second producer with the same id
	if pid2 != pid || e1 != e0+1 {
		t.Fatalf("second init: %d/%d, want %d/%d", pid2, e1, pid, e0+1)
	}
	mustIs(t, c.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{tp0}), ErrProducerFenced)
	mustIs(t, c.AddOffsets(ctx, "tx", pid, e0, "g"), ErrProducerFenced)
	mustIs(t, c.AddPartitions(ctx, "tx", pid+1, e1, []TopicPartition{tp0}), ErrInvalidProducerIDMapping)
	mustIs(t, c.AddPartitions(ctx, "nope", pid, e1, []TopicPartition{tp0}), ErrInvalidProducerIDMapping)
	if err := c.AddPartitions(ctx, "tx", pid, e1, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	_, err := c.EndTxn(ctx, "tx", pid, e0, true, false)
	mustIs(t, err, ErrProducerFenced)
	mustIs(t, c.CheckOffsets(ctx, "tx", pid, e0, "g"), ErrProducerFenced)
	_, _, err = c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 0, ProducerID: -1, Epoch: -1})
	mustIs(t, err, ErrInvalidTransactionTimeout)
	_, _, err = c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: int32(DefaultMaxTimeout/time.Millisecond) + 1, ProducerID: -1, Epoch: -1})
	mustIs(t, err, ErrInvalidTransactionTimeout)
	for _, bad := range []string{"", strings.Repeat("x", MaxIDBytes+1)} {
		_, _, err = c.InitProducerID(ctx, InitRequest{ID: bad, TimeoutMs: 1000, ProducerID: -1, Epoch: -1})
		mustIs(t, err, ErrInvalidRequest)
	}
	for i := range MaxGroupsPerTxn {
		if err := c.AddOffsets(ctx, "tx", pid, e1, fmt.Sprint("g", i)); err != nil {
			t.Fatal(err)
		}
	}
	mustIs(t, c.AddOffsets(ctx, "tx", pid, e1, "one-too-many"), ErrInvalidRequest)
}

// A new producer while a transaction is Ongoing: the transaction is
// aborted with the epoch bumped (markers carry it), the caller retries.
func TestInitAbortsOngoing(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, e0 := initID(t, c, "tx")
	if err := c.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: -1, Epoch: -1})
	mustIs(t, err, ErrConcurrentTransactions)
	b.waitState(c, "tx", CompleteAbort)
	calls := b.markers.all()
	if len(calls) != 1 || calls[0].m.Commit || calls[0].m.Epoch != e0+1 || calls[0].m.ProducerID != pid {
		t.Fatalf("markers: %+v", calls)
	}
	pid2, e2 := initID(t, c, "tx")
	if pid2 != pid || e2 != e0+2 {
		t.Fatalf("retry: %d/%d", pid2, e2)
	}
	_, err = c.EndTxn(ctx, "tx", pid, e0, false, false)
	mustIs(t, err, ErrProducerFenced)
}

// KIP-360: a producer naming its id and epoch is bumped; a retry of that
// bump is answered the same; a stale epoch or another id is fenced.
func TestRecoveringProducer(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, e0 := initID(t, c, "tx")
	req := InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: pid, Epoch: e0}
	p1, e1, err := c.InitProducerID(ctx, req)
	if err != nil || p1 != pid || e1 != e0+1 {
		t.Fatalf("bump: %d/%d %v", p1, e1, err)
	}
	p2, e2, err := c.InitProducerID(ctx, req) // the answer was lost: retry
	if err != nil || p2 != pid || e2 != e1 {
		t.Fatalf("retry: %d/%d %v", p2, e2, err)
	}
	initID(t, c, "tx") // a new producer: prev epoch forgotten
	_, _, err = c.InitProducerID(ctx, req)
	mustIs(t, err, ErrProducerFenced)
	_, _, err = c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: pid + 99, Epoch: 0})
	mustIs(t, err, ErrProducerFenced)
}

// An exhausted epoch gets a new producer id.
func TestEpochExhaustion(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, _ := initID(t, c, "tx")
	e := c.txns["tx"]
	e.mu.Lock()
	next := e.rec.clone()
	next.Epoch = math.MaxInt16 - 1
	if err := c.write(ctx, e, next); err != nil {
		t.Fatal(err)
	}
	e.mu.Unlock()
	p1, e1, err := c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: pid, Epoch: math.MaxInt16 - 1})
	if err != nil || p1 == pid || e1 != 0 {
		t.Fatalf("rotation: %d/%d %v", p1, e1, err)
	}
	// The retry of the rotation (old id, exhausted epoch) gets the new one.
	p2, e2, err := c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: pid, Epoch: math.MaxInt16 - 1})
	if err != nil || p2 != p1 || e2 != 0 {
		t.Fatalf("retry: %d/%d %v", p2, e2, err)
	}
}

// A transaction past its timeout is aborted with the epoch bumped; its
// producer is fenced.
func TestTimeoutAbortsAndFences(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, e0, err := c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 300, ProducerID: -1, Epoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rec := b.waitState(c, "tx", CompleteAbort)
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("aborted after %s, before its 300ms timeout", el)
	}
	if rec.Epoch != e0+1 {
		t.Fatalf("epoch %d, want %d", rec.Epoch, e0+1)
	}
	if calls := b.markers.all(); len(calls) != 1 || calls[0].m.Commit || calls[0].m.Epoch != e0+1 {
		t.Fatalf("markers: %+v", calls)
	}
	for _, v2 := range []bool{false, true} { // not taken for a v2 retry
		_, err = c.EndTxn(ctx, "tx", pid, e0, true, v2)
		mustIs(t, err, ErrProducerFenced)
	}
	mustIs(t, c.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{tp0}), ErrProducerFenced)
}

func TestExpiration(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{IDExpiration: 300 * time.Millisecond})
	pid, e0 := initID(t, c, "idle")
	busy, be := initID(t, c, "busy")
	if err := c.AddPartitions(ctx, "busy", busy, be, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, "idle id expired", func() (bool, string) {
		_, found := b.stored(c, "idle")
		return !found, "still stored"
	})
	_, err := c.Describe(ctx, "idle")
	mustIs(t, err, ErrTransactionalIDNotFound)
	mustIs(t, c.AddPartitions(ctx, "idle", pid, e0, []TopicPartition{tp0}), ErrInvalidProducerIDMapping)
	if rec, found := b.stored(c, "busy"); !found || rec.State != Ongoing {
		t.Fatalf("an Ongoing id expired: %v %+v", found, rec)
	}
}

// A coordinator closed (crashed) in each state; a new one on the same
// Redis ends each transaction the right way.
func TestCrashInEachState(t *testing.T) {
	b := newBed(t)
	c1 := b.open(Options{})
	b.markers.failing.Store(true)
	ids := map[string]State{"ongoing": CompleteAbort, "commit": CompleteCommit, "abort": CompleteAbort}
	for id := range ids {
		pid, epoch, err := c1.InitProducerID(ctx, InitRequest{ID: id, TimeoutMs: 500, ProducerID: -1, Epoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := c1.AddPartitions(ctx, id, pid, epoch, []TopicPartition{tp0}); err != nil {
			t.Fatal(err)
		}
		if id != "ongoing" {
			if _, err := c1.EndTxn(ctx, id, pid, epoch, id == "commit", false); err != nil {
				t.Fatal(err)
			}
		}
	}
	c1.Close()
	if rec, _ := b.stored(c1, "commit"); rec.State != PrepareCommit {
		t.Fatalf("commit before the restart: %s", rec.State)
	}
	b.markers.failing.Store(false)
	c2 := b.open(Options{})
	for id, want := range ids {
		b.waitState(c2, id, want)
	}
	got := map[bool]int{}
	for _, call := range b.markers.all() {
		got[call.m.Commit]++
	}
	if got[true] != 1 || got[false] != 2 {
		t.Fatalf("markers after the restart: %v", got)
	}
}

// The id moves to another coordinator while a commit waits for its
// markers: the new owner finishes it, and the old one, deposed, can
// write nothing.
func TestOwnershipMove(t *testing.T) {
	b := newBed(t)
	owner := &atomic.Int32{}
	owner.Store(1)
	c1 := b.open(Options{Owns: func(string) bool { return owner.Load() == 1 }})
	c2 := b.open(Options{Owns: func(string) bool { return owner.Load() == 2 }})
	pid, epoch := initID(t, c1, "tx")
	if _, _, err := c2.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: -1, Epoch: -1}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("non-owner: %v", err)
	}
	if err := c1.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	b.markers.failing.Store(true)
	if _, err := c1.EndTxn(ctx, "tx", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	owner.Store(2)
	b.markers.failing.Store(false)
	if _, err := c2.OwnershipChanged(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitState(c2, "tx", CompleteCommit)
	// c1 missed the move and still holds the id as it was; c2 bumps it.
	stale, staleRaw, _, err := c2.read(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	p2, e2 := initID(t, c2, "tx")
	owner.Store(1)
	before, _ := b.stored(c2, "tx")
	c1.mu.Lock()
	c1.txns["tx"] = &entry{id: "tx", rec: stale, raw: staleRaw}
	c1.mu.Unlock()
	// It reads Redis before it decides (refresh) and finds the producer
	// fenced; nothing is written.
	mustIs(t, c1.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp1}), ErrProducerFenced)
	if after, _ := b.stored(c2, "tx"); after.Ver != before.Ver || after.PID != p2 || after.Epoch != e2 || after.State != Empty {
		t.Fatalf("the deposed coordinator wrote: %+v, was %+v", after, before)
	}
}

// KIP-890: EndTxn v5+ bumps the epoch; a retry with the old epoch is
// answered; an abort with no transaction bumps too.
func TestEndTxnV2(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, e0 := initID(t, c, "tx")
	if err := c.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	res, err := c.EndTxn(ctx, "tx", pid, e0, true, true)
	if err != nil || res.ProducerID != pid || res.Epoch != e0+1 {
		t.Fatalf("end v2: %+v %v", res, err)
	}
	b.waitState(c, "tx", CompleteCommit)
	if calls := b.markers.all(); len(calls) != 1 || calls[0].m.Epoch != e0+1 {
		t.Fatalf("markers: %+v", calls)
	}
	res2, err := c.EndTxn(ctx, "tx", pid, e0, true, true)
	if err != nil || res2 != res {
		t.Fatalf("retry: %+v %v", res2, err)
	}
	_, err = c.EndTxn(ctx, "tx", pid, e0, false, true)
	mustIs(t, err, ErrInvalidTxnState)
	res3, err := c.EndTxn(ctx, "tx", pid, res.Epoch, false, true)
	if err != nil || res3.Epoch != res.Epoch+1 {
		t.Fatalf("empty abort: %+v %v", res3, err)
	}
	if rec, _ := b.stored(c, "tx"); rec.State != CompleteAbort || !rec.V2 {
		t.Fatalf("after empty abort: %+v", rec)
	}
}

func TestDescribeAndList(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pa, ea := initID(t, c, "a-1")
	initID(t, c, "b-1")
	if err := c.AddPartitions(ctx, "a-1", pa, ea, []TopicPartition{tp1, tp0}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Describe(ctx, "a-1")
	if err != nil || d.State != Ongoing || d.ProducerID != pa || len(d.Partitions) != 2 || d.Partitions[0] != tp0 || d.StartMs <= 0 || d.TimeoutMs != 60000 {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if d, _ := c.Describe(ctx, "b-1"); d.State != Empty || d.StartMs != -1 {
		t.Fatalf("describe empty: %+v", d)
	}
	_, err = c.Describe(ctx, "zzz")
	mustIs(t, err, ErrTransactionalIDNotFound)
	now := time.Now()
	names := func(ds []Description) (out []string) {
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    ListFilter
		want string
	}{
		{ListFilter{}, "[a-1 b-1]"},
		{ListFilter{States: []State{Ongoing}}, "[a-1]"},
		{ListFilter{ProducerIDs: []int64{pa}}, "[a-1]"},
		{ListFilter{IDPattern: regexp.MustCompile("^b-")}, "[b-1]"},
		{ListFilter{MinDuration: time.Hour}, "[]"},
	} {
		if got := fmt.Sprint(names(c.List(tc.f, now))); got != tc.want {
			t.Errorf("list %+v: %s, want %s", tc.f, got, tc.want)
		}
	}
}

// The next transaction begins while the last one's markers are being
// written: the call waits for the completion rather than answering
// CONCURRENT_TRANSACTIONS, unless the completion takes too long.
func TestNextTransactionWaitsForCompletion(t *testing.T) {
	b := newBed(t)
	c := b.open(Options{})
	pid, epoch := initID(t, c, "tx")
	if err := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp0}); err != nil {
		t.Fatal(err)
	}
	b.markers.delay.Store(int64(300 * time.Millisecond))
	if _, err := c.EndTxn(ctx, "tx", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp1}); err != nil {
		t.Fatalf("next transaction: %v", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("answered after %s, before the completion (300ms of markers) was done", el)
	}
	if calls := b.markers.all(); len(calls) != 1 || !calls[0].m.Commit {
		t.Fatalf("markers: %+v", calls)
	}
	if rec, _ := b.stored(c, "tx"); rec.State != Ongoing || len(rec.Partitions) != 1 {
		t.Fatalf("next transaction stored as %+v", rec)
	}
	// Markers that cannot be written: CONCURRENT_TRANSACTIONS after the wait.
	b.markers.delay.Store(0)
	b.markers.failing.Store(true)
	if _, err := c.EndTxn(ctx, "tx", pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	mustIs(t, c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp1}), ErrConcurrentTransactions)
	_, _, err := c.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 60000, ProducerID: -1, Epoch: -1})
	mustIs(t, err, ErrConcurrentTransactions)
	b.markers.failing.Store(false)
	b.waitState(c, "tx", CompleteAbort)
}

// KIP-890 part 2: a broker that does not coordinate the id (the
// partition's leader, the group's coordinator) adds a partition and a
// group implicitly, beginning the transaction; the coordinator, which
// holds the id in memory, sees both when the producer ends it, and
// writes the markers with the bumped epoch. A wrong epoch is fenced, and
// the v1 check still refuses a partition never added.
func TestImplicitAddFromAnotherBroker(t *testing.T) {
	b := newBed(t)
	owner := b.open(Options{Owns: func(string) bool { return true }})
	other := b.open(Options{Owns: func(string) bool { return false }})
	pid, e0 := initID(t, owner, "tx")
	if err := other.AddPartitionImplicit(ctx, "tx", pid, e0, tp0.Topic, tp0.Partition); err != nil {
		t.Fatal(err)
	}
	if err := other.AddOffsetsImplicit(ctx, "tx", pid, e0, "g"); err != nil {
		t.Fatal(err)
	}
	if err := other.CheckOffsets(ctx, "tx", pid, e0, "g"); err != nil {
		t.Fatalf("check after the implicit add: %v", err)
	}
	mustIs(t, other.AddPartitionImplicit(ctx, "tx", pid, e0+1, tp1.Topic, tp1.Partition), ErrProducerFenced)
	mustIs(t, other.VerifyPartition(ctx, "tx", pid, e0, tp1.Topic, tp1.Partition), ErrInvalidTxnState)
	d, err := owner.Describe(ctx, "tx")
	if err != nil || d.State != Ongoing || len(d.Partitions) != 1 || d.Partitions[0] != tp0 || len(d.Groups) != 1 || d.StartMs <= 0 {
		t.Fatalf("owner describes %+v %v", d, err)
	}
	res, err := owner.EndTxn(ctx, "tx", pid, e0, true, true)
	if err != nil || res.Epoch != e0+1 {
		t.Fatalf("end: %+v %v", res, err)
	}
	b.waitState(owner, "tx", CompleteCommit)
	if calls := b.markers.all(); len(calls) != 1 || calls[0].m.Epoch != e0+1 || calls[0].m.ProducerID != pid || !calls[0].m.Commit ||
		len(calls[0].parts) != 1 || calls[0].parts[0] != tp0 {
		t.Fatalf("markers: %+v", calls)
	}
	if calls := b.offsets.all(); len(calls) != 1 || calls[0] != (offsetCall{"g", pid, true}) {
		t.Fatalf("offsets: %+v", calls)
	}
	// The old epoch is fenced now; the new one begins the next one.
	mustIs(t, other.AddPartitionImplicit(ctx, "tx", pid, e0, tp0.Topic, tp0.Partition), ErrProducerFenced)
	if err := other.AddPartitionImplicit(ctx, "tx", pid, res.Epoch, tp1.Topic, tp1.Partition); err != nil {
		t.Fatal(err)
	}
	if rec := b.waitState(owner, "tx", Ongoing); rec.TxnEpoch != res.Epoch || !rec.hasPart(tp1) || rec.hasPart(tp0) {
		t.Fatalf("next transaction: %+v", rec)
	}
}

// Implicit adds racing each other and the coordinator's own adds all
// land (compare-and-set retries), and the next transaction's first add,
// arriving while the last one's markers are written, waits for them.
func TestImplicitAddRaces(t *testing.T) {
	b := newBed(t)
	owner := b.open(Options{Owns: func(string) bool { return true }})
	other := b.open(Options{Owns: func(string) bool { return false }})
	pid, e0 := initID(t, owner, "tx")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				errs <- other.AddPartitionImplicit(ctx, "tx", pid, e0, "t", int32(i))
			case 1:
				errs <- owner.AddPartitionImplicit(ctx, "tx", pid, e0, "t", int32(i))
			default:
				errs <- owner.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{{"t", int32(i)}})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// A coordinator's own write that lost to an implicit add answers
		// NOT_COORDINATOR (the client asks again): retry those.
		if err != nil && !errors.Is(err, ErrNotCoordinator) {
			t.Fatal(err)
		}
	}
	for i := 2; i < 16; i += 3 {
		if err := owner.AddPartitions(ctx, "tx", pid, e0, []TopicPartition{{"t", int32(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if rec, _ := b.stored(owner, "tx"); len(rec.Partitions) != 16 {
		t.Fatalf("partitions: %v", rec.Partitions)
	}
	b.markers.delay.Store(int64(300 * time.Millisecond))
	res, err := owner.EndTxn(ctx, "tx", pid, e0, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AddPartitionImplicit(ctx, "tx", pid, res.Epoch, "t", 0); err != nil {
		t.Fatalf("add while the last transaction completes: %v", err)
	}
	if calls := b.markers.all(); len(calls) != 1 || calls[0].m.Commit {
		t.Fatalf("the add did not wait for the abort's markers: %+v", calls)
	}
}

// A transaction begun by an implicit add on another broker times out at
// its coordinator like any other: aborted, epoch bumped.
func TestImplicitTxnTimesOut(t *testing.T) {
	b := newBed(t)
	owner := b.open(Options{Owns: func(string) bool { return true }})
	other := b.open(Options{Owns: func(string) bool { return false }})
	pid, e0, err := owner.InitProducerID(ctx, InitRequest{ID: "tx", TimeoutMs: 100, ProducerID: -1, Epoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AddPartitionImplicit(ctx, "tx", pid, e0, tp0.Topic, tp0.Partition); err != nil {
		t.Fatal(err)
	}
	if rec := b.waitState(owner, "tx", CompleteAbort); rec.Epoch != e0+1 {
		t.Fatalf("after the timeout: %+v", rec)
	}
	mustIs(t, other.AddPartitionImplicit(ctx, "tx", pid, e0, tp0.Topic, tp0.Partition), ErrProducerFenced)
}
