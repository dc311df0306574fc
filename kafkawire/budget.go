package kafkawire

import (
	"context"
	"sync"
)

// byteBudget bounds the response bytes a connection has reserved but not
// yet written. The reader takes reservations in request order, so a wait
// only ever depends on earlier responses, which the writer sends and
// releases whatever later requests do: no deadlock. Read-aheads hold
// spare reservations (trySpare), which they give up when a request waits
// (acquire's yield), and take none while one does.
type byteBudget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	waiting int           // acquires waiting
	freed   chan struct{} // closed and replaced on every release
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, freed: make(chan struct{})}
}

// acquire reserves n bytes, waiting while earlier requests hold too much.
// A reservation larger than the whole budget goes through once nothing
// else is held. Before it first waits it calls yield, when set, to have
// spare reservations released. It returns false when ctx ends first.
func (b *byteBudget) acquire(ctx context.Context, n int64, yield func()) bool {
	registered := false
	defer func() {
		if registered {
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		freed := b.freed
		first := !registered
		if first {
			b.waiting++
			registered = true
		}
		b.mu.Unlock()
		if first && yield != nil {
			yield()
			continue
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// trySpare reserves n bytes for what gives them up on request (a read-
// ahead) if they fit beside what is held and no acquire waits.
func (b *byteBudget) trySpare(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting > 0 || b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// release gives n reserved bytes back.
func (b *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
