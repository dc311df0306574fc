package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/web"
)

// kvHotSetup is korvet's HTTP handler over an engine with a key index and
// an indexed topic "hot" of keys records with 256-byte values, and one GET
// request per key.
func kvHotSetup(tb testing.TB, keys int) (http.Handler, []*http.Request) {
	tb.Helper()
	r := testbed.StartRedis(tb)
	ctx := context.Background()
	eng, _ := enginetest.Open(tb, r, engine.Options{GroupInitialRebalanceDelay: -1, Index: engine.IndexOptions{Dir: filepath.Join(tb.TempDir(), "index")}})
	tp, err := eng.CreateTopic(ctx, "hot", 2, map[string]string{"korvet.index.enable": "true", "retention.ms": "-1"}, false)
	if err != nil {
		tb.Fatal(err)
	}
	val := make([]byte, 256)
	reqs := make([]*http.Request, keys)
	for i := 0; i < keys; i += 500 {
		batch := make([]record.Record, min(500, keys-i))
		for j := range batch {
			k := fmt.Sprintf("k-%07d", i+j)
			batch[j] = record.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(k), Value: val}
			reqs[i+j] = httptest.NewRequest("GET", "/v1/kv/hot/"+k, nil)
		}
		if _, _, err := tp.Partition(int32(i / 500 % 2)).Append(batch).Wait(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	testbed.WaitFor(tb, 30*time.Second, "the index caught up", eng.KV().Ready)
	h := web.New(eng, web.Options{Version: "bench", Started: time.Now(), Logger: testbed.Logger()})
	return h, reqs
}

// sink is a ResponseWriter that keeps the status and counts the body, so
// that what is measured is the handler's own work, not a recorder's.
type sink struct {
	h    http.Header
	code int
	n    int
}

func (s *sink) Header() http.Header { return s.h }
func (s *sink) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}

func (s *sink) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	s.n += len(b)
	return len(b), nil
}

func (s *sink) serve(tb testing.TB, h http.Handler, r *http.Request) {
	clear(s.h)
	s.code, s.n = 0, 0
	h.ServeHTTP(s, r)
	if s.code != http.StatusOK || s.n != 256 {
		tb.Fatalf("GET %s: %d, %d bytes", r.URL.Path, s.code, s.n)
	}
}

// BenchmarkKVGetHandler measures GET /v1/kv/{topic}/{key} in korvet's
// handler (the gate, the mux, the ACL check, the index lookup, the
// one-record read from Redis and the answer's headers), without the
// net/http server around it, which korvet shares with any Go server: by
// one caller, and by 16 at once.
func BenchmarkKVGetHandler(b *testing.B) {
	h, reqs := kvHotSetup(b, 20_000)
	b.Run("serial", func(b *testing.B) {
		s := &sink{h: http.Header{}}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.serve(b, h, reqs[i*7919%len(reqs)])
			i++
		}
	})
	b.Run("16", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			s := &sink{h: http.Header{}}
			i := int(seq.Add(1)) * 1000
			for pb.Next() {
				// Each goroutine its own requests: the mux writes to one.
				r := reqs[i*7919%len(reqs)].Clone(context.Background())
				s.serve(b, h, r)
				i++
			}
		})
	})
}

// kvGetHandlerAllocs bounds the handler's allocations per GET.
const kvGetHandlerAllocs = 26

// The hot GET allocates a fixed few things per request, nothing that
// grows with the index or the value.
func TestKVGetHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	h, reqs := kvHotSetup(t, 1000)
	s := &sink{h: http.Header{}}
	i := 0
	got := testbed.Allocs(200, func() {
		s.serve(t, h, reqs[i%len(reqs)])
		i++
	})
	if got > kvGetHandlerAllocs {
		t.Errorf("%.1f allocations per GET, want at most %d", got, kvGetHandlerAllocs)
	}
	t.Logf("%.1f allocations per GET", got)
	// The handler fills the header map itself: every name must be in
	// canonical form, or Header.Get would not find it.
	for _, name := range []string{"Etag", "Cache-Control", "X-Korvet-Partition", "X-Korvet-Offset", "X-Korvet-Timestamp",
		"Content-Type", "Content-Length", "X-Content-Type-Options", "Content-Security-Policy"} {
		if s.h.Get(name) == "" {
			t.Errorf("no %s in %v", name, s.h)
		}
	}
	for name := range s.h {
		if http.CanonicalHeaderKey(name) != name {
			t.Errorf("header %q is not in canonical form", name)
		}
	}
}
