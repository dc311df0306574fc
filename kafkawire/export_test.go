package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PanicInOrder makes the in-order half of the handler of API key panic
// for the requests match accepts, as a bug there would (for a produce,
// that half decodes the record batches). Call it before s serves.
func PanicInOrder(s *Server, key int16, match func(kmsg.Request) bool) {
	a := s.apis[kmsg.Key(key)]
	next := a.handle
	a.handle = func(ctx context.Context, c *conn, req kmsg.Request) func() kmsg.Response {
		if match(req) {
			panic("test: a bug in the in-order half")
		}
		return next(ctx, c, req)
	}
	s.apis[kmsg.Key(key)] = a
}

// MaxFetchResponseBytes caps the record bytes of one fetch response.
const MaxFetchResponseBytes = maxFetchResponseBytes

// MaxDescribePartitions bounds the partitions of one DescribeTopicPartitions answer.
const MaxDescribePartitions = maxDescribePartitions
