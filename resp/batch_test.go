package resp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// Concurrent callers each get their own replies, in the order of their
// own commands, whatever round trips they shared.
func TestBatcherConcurrent(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{PoolSize: 2})
	for _, lanes := range []int{1, 3} {
		t.Run(fmt.Sprintf("lanes=%d", lanes), func(t *testing.T) { batchConcurrent(t, resp.NewBatcher(c, lanes)) })
	}
}

func batchConcurrent(t *testing.T, b *resp.Batcher) {
	const callers, calls = 16, 300
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			var p resp.Pipeline
			for i := range calls {
				p.Reset()
				n := 1 + i%3
				want := make([]string, n)
				for j := range want {
					want[j] = fmt.Sprintf("%d-%d-%d", g, i, j)
					if (g+i+j)%97 == 0 {
						want[j] += strings.Repeat("x", 200_000) // a reply of several reads
					}
					p.Cmd("ECHO", want[j])
				}
				rs, err := b.Exec(context.Background(), &p)
				if err != nil {
					t.Error(err)
					return
				}
				if rs.Len() != n {
					t.Errorf("%d replies for %d commands", rs.Len(), n)
				}
				for j := range min(n, rs.Len()) {
					if got := string(rs.At(j).Bytes()); got != want[j] {
						t.Errorf("reply %d: %.40q, want %.40q", j, got, want[j])
					}
				}
				rs.Release()
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	if st.Pipelines != callers*calls || st.RoundTrips < 1 || st.RoundTrips > st.Pipelines {
		t.Fatalf("stats %+v for %d pipelines", st, callers*calls)
	}
	t.Logf("%d pipelines in %d round trips", st.Pipelines, st.RoundTrips)
	// Error replies are per command, as with Exec.
	var p resp.Pipeline
	p.Cmd("ECHO", "ok")
	p.Cmd("NOSUCHCOMMAND")
	rs, err := b.Exec(context.Background(), &p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	if string(rs.At(0).Bytes()) != "ok" || rs.At(1).Err() == nil {
		t.Fatalf("replies %q, %v", rs.At(0).Bytes(), rs.At(1).Err())
	}
}

// A caller alone costs what Client.Exec does.
func TestBatcherAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	b := resp.NewBatcher(c, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var p resp.Pipeline
	if n := testbed.Allocs(50, func() {
		p.Reset()
		p.Cmd("PING")
		rs, err := b.Exec(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
	}); n > 4 {
		t.Fatalf("%v allocations per Exec with a cancellable ctx", n)
	}
}
