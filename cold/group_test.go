package cold

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/schema"
)

type typedKey struct{}

// TestGroupCommit: segments of one topic upload at once, and files whose
// uploads finished while a commit was running go into the table together:
// one snapshot per set of typed columns. Every record is in the table
// once, the typed files with their value_fields and the others without.
func TestGroupCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := openStore(t, b.cfg)
		ctx := ctxT(t)
		s.SetTyped(func(ctx context.Context, topic string) (*schema.Typed, error) {
			if ctx.Value(typedKey{}) != nil {
				return testTyped(false), nil
			}
			return nil, nil
		})
		seg0 := typedRecords(0, false)
		if _, err := s.Archive(ctx, ref("group", 0, 0, 0, len(seg0)), chunked(seg0, 100)); err != nil {
			t.Fatal(err)
		}
		ts := s.topicState("group")
		ts.mu.Lock()
		snaps := len(ts.meta.Snapshots)
		ts.mu.Unlock()

		// Four uploads (two of them with typed columns) finish, then wait
		// while a commit holds the table; the next turn commits them all.
		const n = 4
		arrived, release := make(chan struct{}, n), make(chan struct{})
		s.afterUpload = func() error {
			arrived <- struct{}{}
			<-release
			return nil
		}
		segs := make([][]record.Record, n)
		errs := make(chan error, n)
		for i := range n {
			segs[i] = typedRecords(int64(100*(i+1)), false)
			c := ctx
			if i%2 == 0 {
				c = context.WithValue(ctx, typedKey{}, true)
			}
			go func() {
				_, err := s.Archive(c, ref("group", int32(i%2), int64(i+1), int64(100*(i+1)), len(segs[i])), chunked(segs[i], 7))
				errs <- err
			}()
		}
		for range n {
			<-arrived
		}
		ts.mu.Lock()
		close(release)
		for {
			ts.qmu.Lock()
			w := len(ts.waiting)
			ts.qmu.Unlock()
			if w == n {
				break
			}
			runtime.Gosched()
		}
		ts.mu.Unlock()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		s.afterUpload = nil

		ts.mu.Lock()
		added := len(ts.meta.Snapshots) - snaps
		ts.mu.Unlock()
		if added != 2 {
			t.Errorf("%d snapshots for two sets of typed columns, want 2", added)
		}
		files, err := openStore(t, b.cfg).Files(ctx, "group")
		if err != nil || len(files) != n+1 {
			t.Fatalf("%d files, %v", len(files), err)
		}
		total := len(seg0)
		for _, sg := range segs {
			total += len(sg)
		}
		if k := scanCount(t, s, "group"); k != total {
			t.Fatalf("scan: %d rows, want %d", k, total)
		}
		_, got := scanTyped(t, s, "group")
		typed := testTyped(false)
		for i, sg := range segs {
			for _, r := range sg {
				var want any
				if i%2 == 0 {
					want = expectRow(typed, typed, r.Value)
				}
				if !reflect.DeepEqual(got[r.Offset], want) {
					t.Errorf("segment %d offset %d: value_fields %#v, want %#v", i+1, r.Offset, got[r.Offset], want)
				}
			}
		}
		for _, f := range files {
			recs, _, err := s.Read(ctx, f, f.MinOffset, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			want := seg0
			if f.Segment > 0 {
				want = segs[f.Segment-1]
			}
			equalRecords(t, recs, want)
		}
	})
}

// TestCommitWaitsForUploads: a commit waits for the topic's uploads still
// running and takes their files along (one snapshot); one that never
// comes holds it up for maxCommitWait at most; a commit whose context
// ends while it waits leaves the queue.
func TestCommitWaitsForUploads(t *testing.T) {
	s := openStore(t, localBackend(t).cfg)
	ctx := ctxT(t)
	segs := make([][]record.Record, 5)
	ups := make([]*Upload, 5)
	for i := range segs {
		segs[i] = makeRecords(int64(100*i), 50)
		u, err := s.Upload(ctx, ref("wait", 0, int64(i), int64(100*i), 50), chunked(segs[i], 20))
		if err != nil {
			t.Fatal(err)
		}
		ups[i] = u
	}
	ts := s.topicState("wait")
	snapshots := func() int {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.meta == nil {
			return 0
		}
		return len(ts.meta.Snapshots)
	}
	queued := func(n int) {
		for {
			ts.qmu.Lock()
			w := len(ts.waiting)
			ts.qmu.Unlock()
			if w == n {
				return
			}
			runtime.Gosched()
		}
	}
	before := snapshots()

	// 0 waits for 1 (3 and 4 are not committed yet either, but 0's
	// context ends first).
	cctx, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() { _, err := ups[0].Commit(cctx); abandoned <- err }()
	queued(1)
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with its context ended: %v", err)
	}
	queued(0)

	// 1 waits for 2, and 2's commit takes 1 along.
	done := make(chan error, 1)
	go func() { _, err := ups[1].Commit(ctx); done <- err }()
	queued(1)
	ts.qmu.Lock()
	ts.uploads -= 2 // 3 and 4 end as if they had failed
	ts.qmu.Unlock()
	if _, err := ups[2].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := snapshots() - before; got != 1 {
		t.Errorf("%d snapshots for two files, want 1", got)
	}

	// 3 waits for 4, which does not come: within maxCommitWait.
	ts.qmu.Lock()
	ts.uploads += 2
	ts.qmu.Unlock()
	start := time.Now()
	if _, err := ups[3].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > maxCommitWait+time.Second {
		t.Errorf("commit waited %v for an upload that did not come", took)
	}
	if _, err := ups[4].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	files, err := s.Files(ctx, "wait")
	if err != nil || len(files) != 4 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	for _, f := range files {
		recs, _, err := s.Read(ctx, f, f.MinOffset, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, recs, segs[f.Segment])
	}
	// The abandoned segment archives again (its file is there already).
	if df, err := s.Archive(ctx, ref("wait", 0, 0, 0, 50), chunked(segs[0], 20)); err != nil || df.Records != 50 {
		t.Fatalf("archive again: %+v, %v", df, err)
	}
}
