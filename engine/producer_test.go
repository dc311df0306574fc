package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// An idempotent producer's retry of a recent batch gets the original
// offset and appends nothing; gaps and old epochs are refused; the state
// survives a restart, so a retry after a crash is still recognised.
func TestIdempotentProducerSequences(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, _ := e.CreateTopic(ctx, "idem", 1, map[string]string{"retention.ms": "-1"}, false)
	p := tp.Partition(0)
	prod := func(seq int32) engine.Producer { return engine.Producer{ID: 7, Epoch: 0, FirstSeq: seq} }
	b0, _, err := p.AppendFrom(prod(0), recs(3, 1, "a")).Wait(ctx)
	if err != nil || b0 != 0 {
		t.Fatal(b0, err)
	}
	b1, _, err := p.AppendFrom(prod(3), recs(2, 1, "b")).Wait(ctx)
	if err != nil || b1 != 3 {
		t.Fatal(b1, err)
	}
	// A retry of the first batch: same offset, nothing appended.
	if d, _, err := p.AppendFrom(prod(0), recs(3, 1, "a")).Wait(ctx); err != nil || d != 0 {
		t.Fatalf("retry: %d %v", d, err)
	}
	if _, _, err := p.AppendFrom(prod(9), recs(1, 1, "gap")).Wait(ctx); !errors.Is(err, engine.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if _, _, err := p.AppendFrom(engine.Producer{ID: 7, Epoch: -1, FirstSeq: 5}, recs(1, 1, "old")).Wait(ctx); !errors.Is(err, engine.ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	if _, _, err := p.AppendFrom(engine.Producer{ID: 8, FirstSeq: 4}, recs(1, 1, "new")).Wait(ctx); !errors.Is(err, engine.ErrUnknownProducerID) {
		t.Fatalf("unknown producer: %v", err)
	}
	if p.HighWatermark() != 5 {
		t.Fatalf("high watermark %d, want 5", p.HighWatermark())
	}
	e.Close()
	e2, _ := enginetest.Open(t, r, engine.Options{})
	p2 := e2.Topic("idem").Partition(0)
	if d, _, err := p2.AppendFrom(prod(3), recs(2, 1, "b")).Wait(ctx); err != nil || d != 3 {
		t.Fatalf("retry after restart: %d %v", d, err)
	}
	if b, _, err := p2.AppendFrom(prod(5), recs(1, 1, "c")).Wait(ctx); err != nil || b != 5 {
		t.Fatalf("next after restart: %d %v", b, err)
	}
}

// A producer's new epoch starts its sequence again at 0 and fences the
// old epoch: the old one's batches, retries included, are refused.
func TestProducerEpochFencing(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, _ := e.CreateTopic(ctx, "epochs", 1, map[string]string{"retention.ms": "-1"}, false)
	p := tp.Partition(0)
	at := func(epoch int16, seq int32) engine.Producer {
		return engine.Producer{ID: 3, Epoch: epoch, FirstSeq: seq}
	}
	if b, _, err := p.AppendFrom(at(0, 0), recs(2, 1, "e0")).Wait(ctx); err != nil || b != 0 {
		t.Fatalf("epoch 0: %d %v", b, err)
	}
	if _, _, err := p.AppendFrom(at(1, 2), recs(1, 1, "e1 late")).Wait(ctx); !errors.Is(err, engine.ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not starting at sequence 0: %v", err)
	}
	if b, _, err := p.AppendFrom(at(1, 0), recs(2, 1, "e1")).Wait(ctx); err != nil || b != 2 {
		t.Fatalf("epoch 1: %d %v", b, err)
	}
	if _, _, err := p.AppendFrom(at(0, 0), recs(2, 1, "e0")).Wait(ctx); !errors.Is(err, engine.ErrInvalidProducerEpoch) {
		t.Fatalf("retry from the fenced epoch: %v", err)
	}
	if _, _, err := p.AppendFrom(at(0, 2), recs(1, 1, "e0 next")).Wait(ctx); !errors.Is(err, engine.ErrInvalidProducerEpoch) {
		t.Fatalf("next batch from the fenced epoch: %v", err)
	}
	if b, _, err := p.AppendFrom(at(1, 0), recs(2, 1, "e1")).Wait(ctx); err != nil || b != 2 {
		t.Fatalf("retry in epoch 1: %d %v", b, err)
	}
	if p.HighWatermark() != 4 {
		t.Fatalf("high watermark %d, want 4", p.HighWatermark())
	}
	want := []engine.ProducerInfo{{ID: 3, Epoch: 1, LastSequence: 1, LastOffset: 3}}
	if got := p.Producers(); !slices.Equal(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
}

// A partition answers retries of a producer's last five batches with
// their offsets; an older sequence is a duplicate it can no longer place.
func TestProducerRetryWindow(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, _ := e.CreateTopic(ctx, "window", 1, map[string]string{"retention.ms": "-1"}, false)
	p := tp.Partition(0)
	prod := func(seq int32) engine.Producer { return engine.Producer{ID: 11, FirstSeq: seq} }
	// Six batches: sequences 0-1, 2-3, ... 10-11 at offsets 0, 2, ... 10.
	for i := range int32(6) {
		if b, _, err := p.AppendFrom(prod(2*i), recs(2, 1, "w")).Wait(ctx); err != nil || b != int64(2*i) {
			t.Fatalf("batch %d: %d %v", i, b, err)
		}
	}
	for i := range int32(6) {
		b, _, err := p.AppendFrom(prod(2*i), recs(2, 1, "w")).Wait(ctx)
		switch {
		case i == 0 && !errors.Is(err, engine.ErrDuplicateSequence):
			t.Errorf("retry of the sixth-last batch: %d %v, want ErrDuplicateSequence", b, err)
		case i > 0 && (err != nil || b != int64(2*i)):
			t.Errorf("retry of batch %d: %d %v, want offset %d", i, b, err, 2*i)
		}
	}
	// A retry must match a batch exactly, not just start where one did.
	if _, _, err := p.AppendFrom(prod(10), recs(1, 1, "w")).Wait(ctx); !errors.Is(err, engine.ErrDuplicateSequence) {
		t.Errorf("a batch overlapping the last one: %v", err)
	}
	if _, _, err := p.AppendFrom(prod(13), recs(1, 1, "w")).Wait(ctx); !errors.Is(err, engine.ErrOutOfOrderSequence) {
		t.Errorf("a gap after the last batch: %v", err)
	}
	if p.HighWatermark() != 12 {
		t.Fatalf("high watermark %d, want 12", p.HighWatermark())
	}
}

// Producers lists what each partition remembers of idempotent producers,
// by id, from Redis after a restart too; plain appends leave nothing.
func TestProducersListed(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	tp, _ := e.CreateTopic(ctx, "listed", 2, map[string]string{"retention.ms": "-1"}, false)
	appendFrom := func(p *engine.Partition, prod engine.Producer, n int) {
		t.Helper()
		if _, _, err := p.AppendFrom(prod, recs(n, 1, "l")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendFrom(tp.Partition(0), engine.NoProducer, 4)
	appendFrom(tp.Partition(0), engine.Producer{ID: 9, Epoch: 2}, 3)
	appendFrom(tp.Partition(0), engine.Producer{ID: 5}, 2)
	appendFrom(tp.Partition(0), engine.Producer{ID: 9, Epoch: 2, FirstSeq: 3}, 1)
	appendFrom(tp.Partition(1), engine.NoProducer, 1)
	want := []engine.ProducerInfo{{ID: 5, Epoch: 0, LastSequence: 1, LastOffset: 8}, {ID: 9, Epoch: 2, LastSequence: 3, LastOffset: 9}}
	if got := tp.Partition(0).Producers(); !slices.Equal(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
	if got := tp.Partition(1).Producers(); len(got) != 0 {
		t.Fatalf("producers of a partition with plain appends only: %+v", got)
	}
	e.Close()
	e2, _ := enginetest.Open(t, r, engine.Options{})
	if got := e2.Topic("listed").Partition(0).Producers(); !slices.Equal(got, want) {
		t.Fatalf("producers after restart %+v, want %+v", got, want)
	}
}

// Producer ids are unique for the keyspace's life, across restarts.
func TestNewProducerID(t *testing.T) {
	r := testbed.StartRedis(t)
	e, _ := enginetest.Open(t, r, engine.Options{})
	ctx := context.Background()
	seen := map[int64]bool{}
	last := int64(-1)
	next := func(e *engine.Engine) {
		t.Helper()
		id, err := e.NewProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id < 0 || id <= last || seen[id] {
			t.Fatalf("producer id %d after %d", id, last)
		}
		seen[id], last = true, id
	}
	for range 5 {
		next(e)
	}
	e.Close()
	e2, _ := enginetest.Open(t, r, engine.Options{})
	for range 5 {
		next(e2)
	}
	r.Stop()
	if _, err := e2.NewProducerID(ctx); !errors.Is(err, engine.ErrStorageUnavailable) {
		t.Fatalf("producer id with Redis down: %v, want ErrStorageUnavailable", err)
	}
}
