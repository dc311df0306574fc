package kafkawire

import (
	"context"
	"sync"
)

// byteBudget bounds the response bytes a connection has reserved but not
// yet written. The reader takes reservations in request order, so a wait
// only ever depends on earlier responses, which the writer sends and
// releases whatever later requests do: no deadlock.
type byteBudget struct {
	mu    sync.Mutex
	max   int64
	used  int64
	freed chan struct{} // closed and replaced on every release
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, freed: make(chan struct{})}
}

// acquire reserves n bytes, waiting while earlier requests hold too much.
// A reservation larger than the whole budget goes through once nothing
// else is held. It returns false when ctx ends first.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
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
