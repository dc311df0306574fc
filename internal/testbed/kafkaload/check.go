package kafkaload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EndOffsets lists the end offset of each partition of topic. Leadership
// may still be settling (a broker or a Redis master just came back):
// retriable answers are asked again for up to 30s.
func EndOffsets(tb testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			return out
		}
		if !Retriable(err) || time.Now().After(deadline) {
			tb.Fatalf("list end offsets of %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Retriable tells whether a kadm error, which may wrap several shard
// errors, is one a client retries.
func Retriable(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !kerr.IsRetriable(e.Err) {
				return false
			}
		}
		return true
	}
	return kerr.IsRetriable(err)
}

// ReadAll reads every partition of topic from offset 0 up to the end
// offsets as they are now, with a fresh franz-go consumer, and returns
// the records in the order read (per partition: offset order, which it
// checks is dense). Retriable fetch errors are read past.
func ReadAll(tb testing.TB, seeds []string, adm *kadm.Client, topic string, within time.Duration) []*kgo.Record {
	tb.Helper()
	var out []*kgo.Record
	readLog(tb, seeds, adm, topic, within, true, func(r *kgo.Record) { out = append(out, r) })
	return out
}

// readLog hands each record of topic, from offset 0 to the end offsets as
// they are now, to each, and fails tb where offsets are not dense or a
// fetch fails (a retriable one only when !readPastRetriable). It returns
// how many records it read.
func readLog(tb testing.TB, seeds []string, adm *kadm.Client, topic string, within time.Duration, readPastRetriable bool, each func(*kgo.Record)) int64 {
	tb.Helper()
	total := int64(0)
	for _, o := range EndOffsets(tb, adm, topic) {
		total += o
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		tb.Fatalf("read %s back: client: %v", topic, err)
	}
	defer cl.Close()
	next := map[int32]int64{} // per partition, to check density
	read := int64(0)
	for read < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("read %s back: %d of %d records within %v", topic, read, total, within)
		}
		for _, fe := range fs.Errors() {
			if !readPastRetriable || !kerr.IsRetriable(fe.Err) {
				tb.Fatalf("read %s back: partition %d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if r.Offset != next[r.Partition] {
				tb.Errorf("read %s back: partition %d offset %d after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			each(r)
		})
	}
	return read
}

// Unanswered marks, in Check.Extra, a record whose produce got no answer:
// it may be in the log, once.
const Unanswered = -2

// Check says what CheckLog expects in the log.
type Check struct {
	// Acked is what a Producer (or another client) had acknowledged.
	Acked []Ack
	// Extra maps each value that is not "seq=N" to where it was
	// acknowledged; offset -1: it must not be in the log at all;
	// Unanswered: at most once. CheckLog deletes what it finds.
	Extra map[string]int64
	// Within bounds the read (default 90s).
	Within time.Duration
	// ReadPastRetriable reads past retriable fetch errors (a Redis
	// failover may still settle); otherwise any fetch error fails.
	ReadPastRetriable bool
}

// CheckLog reads every partition of topic from the start with a fresh
// consumer (adm nil: an admin client of its own on seeds) and checks that
// each acknowledged record is in the log exactly once, at the offset it
// was acknowledged with, that offsets are dense and that each partition
// holds the producer's records in the order sent (no record, acknowledged
// or not, twice). It returns the last value read per key.
func CheckLog(tb testing.TB, seeds []string, adm *kadm.Client, topic string, c Check) map[string]string {
	tb.Helper()
	if c.Within <= 0 {
		c.Within = 90 * time.Second
	}
	if adm == nil {
		acl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			tb.Fatalf("check log of %s: client: %v", topic, err)
		}
		defer acl.Close()
		adm = kadm.NewClient(acl)
	}
	type pos struct {
		p int32
		o int64
	}
	at := map[pos]int{}              // seq at each offset
	seen := map[int]int{}            // times each seq is in the log
	lastSeq := map[int32]int{}       // per partition, to check order
	lastValue := map[string]string{} // per key
	parts := map[int32]bool{}
	read := readLog(tb, seeds, adm, topic, c.Within, c.ReadPastRetriable, func(r *kgo.Record) {
		parts[r.Partition] = true
		lastValue[string(r.Key)] = string(r.Value)
		seq, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "seq="))
		if err != nil || !strings.HasPrefix(string(r.Value), "seq=") {
			want, ok := c.Extra[string(r.Value)]
			switch {
			case !ok:
				tb.Errorf("%d/%d: record %q that nobody produced", r.Partition, r.Offset, r.Value)
			case want == Unanswered:
				// Never answered: it may be in the log, once.
			case want < 0:
				tb.Errorf("%d/%d: record %q is in the log, but its produce failed", r.Partition, r.Offset, r.Value)
			case want != r.Offset:
				tb.Errorf("%d/%d: record %q acknowledged at offset %d", r.Partition, r.Offset, r.Value, want)
			}
			delete(c.Extra, string(r.Value)) // a second copy is then "nobody produced"
			return
		}
		if last, ok := lastSeq[r.Partition]; ok && seq <= last {
			tb.Errorf("partition %d offset %d: seq %d after seq %d (duplicate or out of order)", r.Partition, r.Offset, seq, last)
		}
		lastSeq[r.Partition] = seq
		at[pos{r.Partition, r.Offset}] = seq
		seen[seq]++
	})
	for v, o := range c.Extra {
		if o >= 0 {
			tb.Errorf("record %q was acknowledged at offset %d but is not in the log", v, o)
		}
	}
	missing := 0
	for _, a := range c.Acked {
		got, ok := at[pos{a.Partition, a.Offset}]
		switch {
		case !ok || got != a.Seq:
			if missing++; missing <= 10 {
				tb.Errorf("acknowledged seq %d at %d/%d: the log has %d there (present: %v)", a.Seq, a.Partition, a.Offset, got, ok)
			}
		case seen[a.Seq] != 1:
			tb.Errorf("acknowledged seq %d is in the log %d times", a.Seq, seen[a.Seq])
		}
	}
	if missing > 0 {
		tb.Errorf("%d of %d acknowledged records are not where korvet said", missing, len(c.Acked))
	}
	tb.Logf("log of %s: %d records in %d partitions; %d acknowledged records checked", topic, read, len(parts), len(c.Acked))
	return lastValue
}

// FormatSeq is the value the Producer gives record seq.
func FormatSeq(seq int) string { return fmt.Sprintf("seq=%d", seq) }
