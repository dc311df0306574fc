package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// Writing an append round and decoding a read of it cost a fixed few
// allocations, never some per record: the round's buffers are reused (and
// pooled between flush loops), and reads decode the reply in place.
// AllocsPerRun counts, it does not time.
func TestRoundAndReadAllocs(t *testing.T) {
	r := testbed.StartRedis(t)
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	e, err := Open(ctx, rc, Options{Logger: testbed.Logger(), GroupInitialRebalanceDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tp, err := e.CreateTopic(ctx, "allocs", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partition(0)
	testbed.WaitFor(t, 10*time.Second, "the broker leads allocs/0", p.IsLeader)
	value := make([]byte, 96)
	round := func(n int) (*txBuffers, flushRound) {
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Timestamp: 1, Key: []byte("k001"), Value: value}
		}
		pd := &Pending{recs: recs, prod: NoProducer, done: make(chan struct{}), size: int64(n * 100)}
		p.mu.Lock()
		fl := p.takeLockedFrom([]*Pending{pd})
		p.mu.Unlock()
		fl.plan(p.t.currentSettings(), time.Now())
		return &txBuffers{}, fl
	}
	var perRound [2]float64
	for i, n := range []int{100, 2000} {
		tx, fl := round(n)
		tx.write(p, &fl) // grows the buffers once
		perRound[i] = testbed.Allocs(20, func() { tx.write(p, &fl) })
		if err := p.commitRound(ctx, tx, &fl); err != nil {
			t.Fatal(err)
		}
	}
	if perRound[1] > perRound[0]+2 || perRound[1] > 32 {
		t.Errorf("writing a round: %v allocations for 100 records, %v for 2000: want a fixed few", perRound[0], perRound[1])
	}
	var perRead [2]float64
	var got [2]int
	for i, n := range []int{100, 1000} {
		read := func() {
			res, err := p.Read(ctx, 0, n*128)
			if err != nil || len(res.Records) < n/2 {
				panic(fmt.Sprintf("read of about %d records: %d, %v", n, len(res.Records), err))
			}
			got[i] = len(res.Records)
			res.Release()
		}
		read() // grows the pooled result's slices once
		perRead[i] = testbed.Allocs(20, read)
	}
	if perRead[1] > perRead[0]+4 || perRead[1] > 20 {
		t.Errorf("reading: %v allocations for %d records, %v for %d: want a fixed few", perRead[0], got[0], perRead[1], got[1])
	}
	t.Logf("allocations: round of 100 records %v, of 2000 %v; read of %d %v, of %d %v", perRound[0], perRound[1], got[0], perRead[0], got[1], perRead[1])
}
