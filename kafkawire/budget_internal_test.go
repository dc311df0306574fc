package kafkawire

import (
	"context"
	"testing"
	"time"
)

// An acquire that would wait first has spare reservations released
// (yield), and while it waits no spare reservation is taken.
func TestByteBudgetSpare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := newByteBudget(100)
	if !b.acquire(ctx, 60, nil) || !b.trySpare(30) {
		t.Fatal("60 held and 30 spare do not fit in 100")
	}
	if b.trySpare(20) {
		t.Fatal("a spare reservation past the budget")
	}
	// 60 + 30 spare held: 40 more only fits once the spare goes.
	yielded := 0
	if !b.acquire(ctx, 40, func() { yielded++; b.release(30) }) || yielded != 1 {
		t.Fatalf("acquire past a spare reservation: yield called %d times", yielded)
	}
	// Full: an acquire waits for the writer, and spares stay out meanwhile.
	got := make(chan bool)
	waiting := make(chan struct{})
	go func() {
		got <- b.acquire(ctx, 10, func() { close(waiting) })
	}()
	<-waiting
	if b.trySpare(0) {
		t.Fatal("a spare reservation while an acquire waits")
	}
	b.release(40)
	if !<-got {
		t.Fatal("the waiting acquire failed")
	}
	if !b.trySpare(10) {
		t.Fatal("no spare reservation once nobody waits")
	}
}
