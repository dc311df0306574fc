package kafkaload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// Tail reads a topic from the start without a group, as records arrive,
// and notes each partition/offset it got.
type Tail struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	got  map[int32]map[int64]string
	errs []string
}

// StartTail starts tailing topic; it stops at WaitAll or when the test
// ends.
func StartTail(tb testing.TB, seeds []string, topic string) *Tail {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		tb.Fatalf("tail consumer client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tc := &Tail{cancel: cancel, done: make(chan struct{}), got: map[int32]map[int64]string{}}
	go func() {
		defer close(tc.done)
		defer cl.Close()
		for ctx.Err() == nil {
			tc.note(cl.PollFetches(ctx))
		}
	}()
	tb.Cleanup(tc.stop)
	return tc
}

// note keeps what one poll got; a fetch error a client does not retry,
// or an offset read twice with different values, is an error.
func (tc *Tail) note(fs kgo.Fetches) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
			tc.errs = append(tc.errs, fmt.Sprintf("%s[%d]: %v", topic, p, err))
		}
	})
	fs.EachRecord(func(r *kgo.Record) {
		if tc.got[r.Partition] == nil {
			tc.got[r.Partition] = map[int64]string{}
		}
		if prev, ok := tc.got[r.Partition][r.Offset]; ok && prev != string(r.Value) {
			tc.errs = append(tc.errs, fmt.Sprintf("partition %d offset %d read as %q, then as %q", r.Partition, r.Offset, prev, r.Value))
		}
		tc.got[r.Partition][r.Offset] = string(r.Value)
	})
}

func (tc *Tail) stop() {
	tc.cancel()
	<-tc.done
}

// WaitAll waits until the consumer got every acknowledged record, each
// at its acknowledged offset, then stops it and fails tb for what it saw
// wrong on the way.
func (tc *Tail) WaitAll(tb testing.TB, acked []Ack, within time.Duration) {
	tb.Helper()
	testbed.Eventually(tb, within, "the consumer gets every acknowledged record", func() (bool, string) {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		missing := 0
		for _, a := range acked {
			if tc.got[a.Partition][a.Offset] != FormatSeq(a.Seq) {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d missing", missing, len(acked))
	})
	tc.stop()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, e := range tc.errs {
		tb.Error("consumer: " + e)
	}
}
