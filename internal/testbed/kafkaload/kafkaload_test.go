package kafkaload

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbed.RemoveKorvetBuild()
	os.Exit(code)
}

// recorder is a testing.TB that keeps the failures a check reports, so a
// test can assert that the check fails where it must.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, s)
}

func (r *recorder) Error(a ...any)            { r.note(fmt.Sprint(a...)) }
func (r *recorder) Errorf(f string, a ...any) { r.note(fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.note("FATAL " + fmt.Sprintf(f, a...))
	runtime.Goexit()
}
func (r *recorder) Fatal(a ...any) { r.note("FATAL " + fmt.Sprint(a...)); runtime.Goexit() }
func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// run runs f with r in a goroutine of its own, so that a Fatal ends f
// and not the test.
func (r *recorder) run(f func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestErrorLogCountsRetries(t *testing.T) {
	l := &errorLog{retried: map[string]int{}}
	l.Log(kgo.LogLevelDebug, "produced", "broker", "1", "to", "t[0{retrying@-1,3(NOT_LEADER_FOR_PARTITION)}] t[1{retrying@-1,2(KAFKA_STORAGE_ERROR)}] t[2{17=>20}]")
	l.Log(kgo.LogLevelDebug, "produced", "to", "t[0{retrying@-1,1(NOT_LEADER_FOR_PARTITION)}]")
	l.Log(kgo.LogLevelDebug, "produced", "to", "t[0{retrying@ no parens")
	if got := fmt.Sprint(l.retried); got != "map[KAFKA_STORAGE_ERROR:1 NOT_LEADER_FOR_PARTITION:2]" {
		t.Errorf("retried %s", got)
	}
	l.Log(kgo.LogLevelInfo, "batch in a produce request failed", "err", "INVALID_RECORD")
	l.Log(kgo.LogLevelWarn, "metadata update failed", "err", "EOF")
	l.Log(kgo.LogLevelInfo, "something harmless")
	rec := &recorder{TB: t}
	rec.run(l.check)
	if got := rec.failures(); !strings.Contains(got, "INVALID_RECORD") || strings.Contains(got, "metadata update failed") {
		t.Errorf("check reported %q; want the failed batch only (warnings are logged)", got)
	}
}

// TestLoadAndChecks runs the load against a real korvet: a clean run
// passes every check, and CheckLog fails a log with a duplicate, a stray
// record and an acknowledged record that is not there.
func TestLoadAndChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs korvet")
	}
	r := testbed.StartRedis(t)
	k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL, NodeID: 1})
	seeds := []string{k.KafkaAddr}
	adm := Admin(t, seeds)

	CreateTopic(t, adm, "load", 3, nil, 20*time.Second)
	lp := StartProducer(t, seeds, "load", Options{})
	tc := StartTail(t, seeds, "load")
	lp.WaitMore(t, 500, 30*time.Second)
	if _, ok := lp.FirstAckAfter(time.Now().Add(-time.Hour), []int32{0, 1, 2}); !ok {
		t.Error("FirstAckAfter: no acknowledgement on some partition after 500")
	}
	acked := lp.Finish(t)
	tc.WaitAll(t, acked, 30*time.Second)
	if last := CheckLog(t, seeds, adm, "load", Check{Acked: acked}); len(last) != 200 {
		t.Errorf("CheckLog: %d keys, want 200 (key-000..key-199)", len(last))
	}

	// A log written wrong on purpose, by a client that neither retries
	// nor dedups: seq=0, seq=1, seq=1 again, a stray value.
	CreateTopic(t, adm, "bad", 1, nil, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("bad"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{"seq=0", "seq=1", "seq=1", "stray"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	rec := &recorder{TB: t}
	bad := []Ack{{Seq: 0, Partition: 0, Offset: 0}, {Seq: 1, Partition: 0, Offset: 1}, {Seq: 2, Partition: 0, Offset: 9}}
	rec.run(func(tb testing.TB) { CheckLog(tb, seeds, adm, "bad", Check{Acked: bad}) })
	got := rec.failures()
	for _, want := range []string{"seq 1 after seq 1 (duplicate or out of order)", `"stray" that nobody produced`,
		"acknowledged seq 1 is in the log 2 times", "acknowledged seq 2 at 0/9", "1 of 3 acknowledged records are not where korvet said"} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckLog on a bad log does not say %q; it said:\n%s", want, got)
		}
	}
	if strings.Contains(got, "FATAL") {
		t.Errorf("CheckLog gave up on a bad log instead of reporting it:\n%s", got)
	}

	// Extra: an acknowledged value must be where it was acknowledged.
	rec = &recorder{TB: t}
	rec.run(func(tb testing.TB) {
		CheckLog(tb, seeds, adm, "bad", Check{Acked: bad[:2], Extra: map[string]int64{"stray": 2, "lost": 5}})
	})
	got = rec.failures()
	for _, want := range []string{`record "stray" acknowledged at offset 2`, `record "lost" was acknowledged at offset 5 but is not in the log`} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckLog with Extra does not say %q; it said:\n%s", want, got)
		}
	}
}
