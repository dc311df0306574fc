package kafkawire

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// fetchBench is a server on a partition of n records of 100 bytes (a
// 4-byte key and a 96-byte value, as scripts/bench-produce.sh sends), and
// a connection of it that is not served: its fetches run by hand.
type fetchBench struct {
	c     *conn
	p     *engine.Partition
	parts [][]*engine.Partition
	req   *kmsg.FetchRequest
}

func newFetchBench(tb testing.TB, n int, opts Options) *fetchBench {
	tb.Helper()
	eng, _ := enginetest.Open(tb, testbed.StartRedis(tb), engine.Options{})
	ctx := context.Background()
	tp, err := eng.CreateTopic(ctx, "fetch", 1, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	p := tp.Partition(0)
	testbed.WaitFor(tb, 10*time.Second, "the broker leads fetch/0", p.IsLeader)
	value := make([]byte, 96)
	for i := 0; i < n; i += 1000 {
		recs := make([]record.Record, min(1000, n-i))
		for j := range recs {
			recs[j] = record.Record{Timestamp: time.Now().UnixMilli(), Key: []byte("k001"), Value: value}
		}
		if _, _, err := p.Append(recs).Wait(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	opts.Logger = testbed.Logger()
	s := NewServer(eng, opts)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.MaxWaitMillis = 12, 50<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "fetch"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return &fetchBench{
		c:     &conn{s: s, budget: newByteBudget(s.opts.MaxInFlightBytes)},
		p:     p,
		parts: [][]*engine.Partition{{p}},
		req:   req,
	}
}

// fetch answers one fetch at offset with partition limit partMax and
// encodes the answer, as a client's Fetch would be; it returns the offset
// after the last record.
func (fb *fetchBench) fetch(tb testing.TB, offset int64, partMax int32) int64 {
	rp := &fb.req.Topics[0].Partitions[0]
	rp.FetchOffset, rp.PartitionMaxBytes = offset, partMax
	resp, n, failed := fb.c.fetchOnce(context.Background(), fb.req, fb.parts)
	if failed || n == 0 {
		tb.Fatalf("fetch at %d: failed %v, %d bytes", offset, failed, n)
	}
	// The last batch's base offset and last offset delta.
	b := resp.Topics[0].Partitions[0].RecordBatches
	next := offset
	for len(b) >= 61 {
		size := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		next = int64(binary.BigEndian.Uint64(b)) + int64(binary.BigEndian.Uint32(b[23:27])) + 1
		b = b[size:]
	}
	// As dispatch and the connection's writer do.
	frame := fb.c.s.encode(1, false, resp)
	fb.c.s.recycle(resp)
	if len(frame) < n {
		tb.Fatalf("frame of %d bytes for %d bytes of batches", len(frame), n)
	}
	fb.c.s.bufs.put(frame)
	return next
}

// BenchmarkFetch is korvet's side of a consumer's fetches of one
// partition, one after the other from offset 0 on, 1 MiB each (about
// 9,700 records of 100 bytes: franz-go's default partition limit): the
// read, the record batches and the encoded answer, with and without read-
// ahead (with it, the next fetch's read runs while this one's answer is
// built, as it would while the consumer takes the answer). allocs/op and
// B/op are korvet's (and the read-ahead's when on).
//
//	go test ./kafkawire -run '^$' -bench 'Fetch$' -benchtime 200x
func BenchmarkFetch(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{{"read-ahead", Options{}}, {"no-read-ahead", Options{NoFetchReadAhead: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 200_000
			fb := newFetchBench(b, n, tc.opts)
			b.ReportAllocs()
			off, recs := int64(0), int64(0)
			for b.Loop() {
				next := fb.fetch(b, off, 1<<20)
				recs += next - off
				if off = next; off >= n {
					off = 0
				}
			}
			b.ReportMetric(float64(recs)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(recs)/float64(b.N), "records/op")
		})
	}
}

// A fetch costs a fixed few allocations whatever its records: the read
// decodes in place into pooled slices and the answer is one buffer.
func TestFetchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	const n = 50_000
	fb := newFetchBench(t, n, Options{NoFetchReadAhead: true})
	var allocs [2]float64
	var got [2]int64
	for i, partMax := range []int32{100 << 10, 1 << 20} {
		off := int64(0)
		fetch := func() {
			next := fb.fetch(t, off, partMax)
			got[i] = next - off
			if off = next; off+got[i] >= n {
				off = 0
			}
		}
		fetch() // grows the pooled slices once
		allocs[i] = testbed.Allocs(20, fetch)
	}
	t.Logf("allocations per fetch: %v for %d records, %v for %d", allocs[0], got[0], allocs[1], got[1])
	if allocs[1] > allocs[0]+4 || allocs[1] > 40 {
		t.Errorf("a fetch of %d records makes %v allocations, one of %d %v: want a fixed few", got[0], allocs[0], got[1], allocs[1])
	}
}
