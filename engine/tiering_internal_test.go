package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/korvet/korvet/cold"
)

// TestMemBudget: jobs start while what they hold fits, one always may,
// and a job that does not fit starts once another releases.
func TestMemBudget(t *testing.T) {
	ctx := context.Background()
	b := newMemBudget(10)
	if err := b.acquire(ctx, 25); err != nil { // alone: allowed
		t.Fatal(err)
	}
	b.release(25)
	if err := b.acquire(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(ctx, 4); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- b.acquire(ctx, 5) }()
	select {
	case err := <-started:
		t.Fatalf("a job past the limit started (%v)", err)
	default:
	}
	b.release(6)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.acquire(cctx, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with its context ended: %v", err)
	}
}

// TestArchiveMemoryDefault: with the default, four 1 MiB segments archive
// at once on S3; a 1 GiB segment (Kafka's default segment.bytes) alone.
func TestArchiveMemoryDefault(t *testing.T) {
	// (An unreachable store opens all the same; nothing is sent here.)
	st, err := cold.Open(context.Background(), cold.Config{Warehouse: "s3://b/wh", Endpoint: "127.0.0.1:1", AccessKey: "a", SecretKey: "b", PathStyle: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{opts: Options{Cold: st, ArchiveMemory: DefaultArchiveMemory}}
	small, big := e.archiveMemory(Segment{Bytes: 1 << 20}), e.archiveMemory(Segment{Bytes: 1 << 30})
	if 4*small > DefaultArchiveMemory {
		t.Errorf("a 1 MiB segment holds %d: four exceed %d", small, DefaultArchiveMemory)
	}
	if 2*big <= DefaultArchiveMemory {
		t.Errorf("a 1 GiB segment holds %d: two fit in %d", big, DefaultArchiveMemory)
	}
	t.Logf("1 MiB segment: %.1f MiB, 1 GiB segment: %.1f MiB", float64(small)/(1<<20), float64(big)/(1<<20))
}
