package resp_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// BenchmarkPipelineXADD measures pipelined XADDs of 100-byte values, the
// shape of a produce request, against a real redis-server with AOF on.
func BenchmarkPipelineXADD(b *testing.B) {
	const batch = 1000
	rd := testbed.StartRedis(b)
	c, err := resp.New(rd.URL, resp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	value := bytes.Repeat([]byte("x"), 100)
	key := []byte("bench")
	var p resp.Pipeline
	ctx := context.Background()
	b.SetBytes(batch * int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		p.Reset()
		for range batch {
			p.Array(5)
			p.String("XADD")
			p.Bulk(key)
			p.String("*")
			p.String("v")
			p.Bulk(value)
		}
		rs, err := c.Exec(ctx, &p)
		if err != nil {
			b.Fatal(err)
		}
		if err := rs.At(batch - 1).Err(); err != nil {
			b.Fatal(err)
		}
		rs.Release()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
}
