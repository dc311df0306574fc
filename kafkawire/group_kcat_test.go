package kafkawire_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatPath finds kcat: a missing kcat skips the test, except in CI.
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
			t.Fatalf("kcat is needed in CI: %v", err)
		}
		t.Skipf("kcat not on PATH: %v", err)
	}
	return path
}

// runKcatGroup runs a librdkafka group consumer (kcat -G ... -e) and
// returns the partition:offset lines it printed. kcat stops at the end
// of its partitions; limit bounds it, and on expiry it gets SIGTERM, on
// which it still commits and leaves the group.
func runKcatGroup(t *testing.T, kcat, addr, grp, topic string, limit time.Duration, extra ...string) (lines []string, timedOut bool, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := append([]string{"-b", addr, "-G", grp, "-e", "-f", "%p:%o\n",
		"-X", "session.timeout.ms=10000", "-X", "socket.timeout.ms=20000"}, extra...)
	cmd := exec.CommandContext(ctx, kcat, append(args, topic)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	// After SIGTERM kcat exits by itself; Run then reports the deadline.
	timedOut = ctx.Err() != nil
	if err != nil && !timedOut {
		t.Fatalf("kcat: %v\n%s", err, errb.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, timedOut, errb.String()
}

// TestGroupKcat: kcat's balanced consumer (librdkafka) reads a topic
// through a group, commits, and a second run resumes at the commits.
func TestGroupKcat(t *testing.T) {
	kcat := kcatPath(t)
	const topic, grp, n, more = "kc", "kc-g", 300, 40
	b := startBroker(t, groupOpts())
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produce := func(count int, prefix string) {
		var recs []*kgo.Record
		for i := 0; i < count; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("%s%d", prefix, i))})
		}
		produceAll(t, b.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), recs)
	}
	check := func(run string, lines []string, timedOut bool, stderr string, want int, from map[string]int64) {
		t.Helper()
		if timedOut {
			// kcat -e stops at the end of its partitions; it ran out of
			// time instead (see scripts/kcat-smoke.sh for the fetch bug
			// that once caused this).
			t.Fatalf("%s: kcat did not stop at the end: %d of %d records\n%s", run, len(lines), want, stderr)
		}
		uniq := map[string]bool{}
		for _, l := range lines {
			p, o, ok := strings.Cut(l, ":")
			var off int64
			if _, err := fmt.Sscan(o, &off); !ok || err != nil {
				t.Fatalf("%s: bad kcat line %q", run, l)
			}
			if off < from[p] {
				t.Fatalf("%s: partition %s redelivered offset %d, below the commit %d", run, p, off, from[p])
			}
			uniq[l] = true
		}
		if len(uniq) != want {
			t.Fatalf("%s: kcat consumed %d distinct records, want %d\n%s", run, len(uniq), want, stderr)
		}
	}

	produce(n, "a")
	lines, timedOut, stderr := runKcatGroup(t, kcat, b.addr, grp, topic, 15*time.Second, "-o", "beginning")
	check("first run", lines, timedOut, stderr, n, nil)

	// librdkafka committed what it read when it closed.
	committed, err := b.admin().FetchOffsets(ctxT(t, 10*time.Second), grp)
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]int64{}
	for p := int32(0); p < 3; p++ {
		o, ok := committed.Lookup(topic, p)
		if !ok || o.At != n/3 {
			t.Fatalf("partition %d committed %+v, want %d", p, o, n/3)
		}
		from[fmt.Sprint(p)] = o.At
	}

	// Without -o, a new run starts at the commits.
	produce(more, "b")
	lines, timedOut, stderr = runKcatGroup(t, kcat, b.addr, grp, topic, 15*time.Second)
	check("second run", lines, timedOut, stderr, more, from)
}

// TestGroupKafkaPython: kafka-python 2.0's group consumer (old protocol
// versions: FindCoordinator v0, JoinGroup v2, OffsetCommit v2...).
func TestGroupKafkaPython(t *testing.T) {
	py := needTool(t, "/usr/bin/python3", "-c", "import kafka")
	b := startBroker(t, groupOpts())
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 3, 1, nil, "pyg"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 2*time.Minute)
	out, err := exec.CommandContext(ctx, py, "testdata/kafka_python_group.py", b.addr, "pyg", "py-g", "150").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok 150") {
		t.Fatalf("kafka-python: %v\n%s", err, out)
	}
	if lag, err := b.eng.Groups().Lag(ctx, "py-g"); err != nil || len(lag) != 3 || lag[0].Lag != 0 || lag[0].Committed != 50 {
		t.Fatalf("lag: %+v, %v", lag, err)
	}
}
