package kafkawire_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

// fetchRaw sends one Fetch for a partition and returns the offsets of the
// records in its answer (fetchOne), failing the test on an error code.
func fetchRaw(t *testing.T, b *broker, cl *kgo.Client, topic string, offset int64, partMax, max int32) []int64 {
	t.Helper()
	f := fetchOne(t, b, cl, topic, offset, partMax, max)
	if f.code != 0 {
		t.Fatalf("fetch at %d: error %d", offset, f.code)
	}
	return f.offs
}

// TestFetchTinyLimitsReturnWholeBatch: with partition and response limits
// smaller than a produced batch, a fetch returns that batch whole (KIP-74),
// from the fetch offset to the batch's end, and not the next one; kgo and
// kcat (librdkafka) with tiny limits read everything, batch by batch. What
// is returned beyond the limits is bounded by max.message.bytes.
func TestFetchTinyLimitsReturnWholeBatch(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	ctx := ctxT(t, 60*time.Second)
	const topic, batches, per = "tiny", 3, 10
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Manual flushing: each flush sends its records as one batch.
	prod := b.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ManualFlushing())
	for i := range batches {
		errs := make(chan error, per)
		for j := range per {
			r := &kgo.Record{Value: fmt.Appendf(nil, "b%d-r%d-%s", i, j, strings.Repeat("x", 100))}
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for range per {
			if err := <-errs; err != nil {
				t.Fatalf("produce batch %d: %v", i, err)
			}
		}
	}

	cl := b.client()
	want := func(from, to int64) string { return fmt.Sprint(from, "..", to) }
	span := func(offs []int64) string {
		if len(offs) == 0 {
			return "nothing"
		}
		return fmt.Sprint(offs[0], "..", offs[len(offs)-1])
	}
	for _, tc := range []struct {
		offset       int64
		partMax, max int32
		want         string
	}{
		{0, 1, 1, want(0, 9)},
		{10, 1, 1 << 20, want(10, 19)},
		{13, 50, 50, want(13, 19)}, // from mid-batch to its end
		{20, 0, 0, want(20, 29)},
	} {
		if got := span(fetchRaw(t, b, cl, topic, tc.offset, tc.partMax, tc.max)); got != tc.want {
			t.Errorf("fetch at %d, partition max %d, max %d: offsets %s, want %s", tc.offset, tc.partMax, tc.max, got, tc.want)
		}
	}
	// Limits that fit two batches are honoured as before.
	if got := len(fetchRaw(t, b, cl, topic, 0, 2*per*130, 1<<20)); got < per || got >= batches*per {
		t.Errorf("fetch with room for about two batches returned %d records", got)
	}

	// kgo with one-byte limits: every poll brings whole batches.
	cons := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1))
	var got int
	for got < batches*per {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo with one-byte limits read %d of %d records", got, batches*per)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("kgo fetch: %v", err) })
		n := fs.NumRecords()
		if n%per != 0 {
			t.Fatalf("kgo poll returned %d records: not whole batches of %d", n, per)
		}
		got += n
	}

	// librdkafka with the smallest limits it accepts (fetch.max.bytes at
	// least message.max.bytes, at least 1000): below a batch (about 1.3 KB).
	kcat := kcatPath(t)
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(kctx, kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\n",
		"-X", "message.max.bytes=1000", "-X", "fetch.max.bytes=1000", "-X", "max.partition.fetch.bytes=1", "-X", "socket.timeout.ms=10000")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat with one-byte limits: %v (%d lines)\n%s", err, strings.Count(out.String(), "\n"), errb.String())
	}
	if lines := strings.Fields(out.String()); len(lines) != batches*per || lines[0] != "0" || lines[len(lines)-1] != fmt.Sprint(batches*per-1) {
		t.Fatalf("kcat read %d records, want offsets 0..%d:\n%s", len(lines), batches*per-1, out.String())
	}

	// The extra is bounded by max.message.bytes: lowered below the batch,
	// the first fetch returns part of it (at least one record).
	ar, err := b.admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kmsg.StringPtr("300")}}, topic)
	if err == nil {
		_, err = ar.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fetchRaw(t, b, cl, topic, 0, 1, 1)); n < 1 || n >= per {
		t.Errorf("with max.message.bytes 300 a tiny fetch returned %d records, want 1 to %d", n, per-1)
	}
}
