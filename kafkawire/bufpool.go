package kafkawire

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch answers are megabytes of record batches, copied once more into the
// response frame: each a fresh allocation the runtime zeroes and the
// collector then has to catch up with, per fetch. bufPool keeps such
// buffers for the next fetch: the batches once the frame holds them, the
// frame once it is written.

const (
	// minPooledBuf: smaller buffers are cheap to allocate.
	minPooledBuf = 64 << 10
	// maxPooledFetchBuf keeps a rare huge answer from pinning its buffer.
	maxPooledFetchBuf = 16 << 20
)

// bufPool recycles large byte buffers.
type bufPool struct{ p sync.Pool }

// get returns an empty buffer of capacity n at least.
func (bp *bufPool) get(n int) []byte {
	if n >= minPooledBuf {
		if b, ok := bp.p.Get().(*[]byte); ok && cap(*b) >= n {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, n)
}

// put hands b back; nothing may use it after.
func (bp *bufPool) put(b []byte) {
	if cap(b) < minPooledBuf || cap(b) > maxPooledFetchBuf {
		return
	}
	b = b[:0]
	bp.p.Put(&b)
}

// encode is encodeResponse into a recycled buffer.
func (s *Server) encode(correlation int32, flexible bool, r kmsg.Response) []byte {
	return appendResponse(s.bufs.get(responseSizeHint(r)), correlation, flexible, r)
}

// recycle takes back the record batches of an encoded fetch answer.
func (s *Server) recycle(r kmsg.Response) {
	fr, ok := r.(*kmsg.FetchResponse)
	if !ok {
		return
	}
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			sp := &fr.Topics[i].Partitions[j]
			s.bufs.put(sp.RecordBatches)
			sp.RecordBatches = nil
		}
	}
}
