package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// TestKcatThreeBrokers: kcat (librdkafka) given all three brokers
// produces, one broker is killed, kcat produces more and consumes the
// topic: every record once, in the order produced per partition.
func TestKcatThreeBrokers(t *testing.T) {
	needCluster(t)
	testbed.NeedClient(t, "kcat", "kcat", "-V")
	c := startCluster(t, 3)
	const topic = "kcat"
	c.createTopic(topic, partitions, nil)
	bootstrap := strings.Join(c.seeds(), ",")
	produce := func(first, n int) {
		var in bytes.Buffer
		for i := first; i < first+n; i++ {
			fmt.Fprintf(&in, "key-%d:seq=%d\n", i, i)
		}
		out := testbed.RunCmd(t, 90*time.Second, in.Bytes(), "kcat", "-b", bootstrap, "-P", "-t", topic, "-K:",
			"-X", "enable.idempotence=true", "-X", "message.timeout.ms=60000", "-X", "topic.metadata.refresh.interval.ms=1000")
		if strings.TrimSpace(out) != "" {
			t.Logf("kcat -P printed: %s", out)
		}
	}
	produce(0, 500)
	killOne(t, c, topic)
	produce(500, 500)

	out := testbed.RunCmd(t, 90*time.Second, nil, "kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p %o %k %s\n", "-X", "topic.metadata.refresh.interval.ms=1000")
	checkLines(t, "kcat", out, 1000)
}

// killOne SIGKILLs the broker that leads the most partitions of topic;
// the only broker of a cluster of one is started again.
func killOne(t *testing.T, c *cluster, topic string) {
	t.Helper()
	w := &workload{t: t, c: c, topic: topic}
	victim, led := w.busiest()
	victim.Kill()
	t.Logf("SIGKILL node %d, leader of %v", victim.NodeID, led)
	if len(c.brokers) == 1 {
		victim.Restart(t)
	}
}

// checkLines checks "P O KEY seq=N" lines: every seq 0..n-1 exactly once,
// offsets increasing and seqs increasing per partition.
func checkLines(t *testing.T, who, out string, n int) {
	t.Helper()
	seen := map[int]int{}
	lastSeq := map[int]int{}
	lastOff := map[int]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || !strings.HasPrefix(f[3], "seq=") {
			t.Fatalf("%s printed %q", who, line)
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		seq, err := strconv.Atoi(strings.TrimPrefix(f[3], "seq="))
		if err != nil {
			t.Fatalf("%s printed %q", who, line)
		}
		if last, ok := lastSeq[p]; ok && (seq <= last || o <= lastOff[p]) {
			t.Errorf("%s: partition %d: seq %d at %d after seq %d at %d", who, p, seq, o, last, lastOff[p])
		}
		lastSeq[p], lastOff[p] = seq, o
		seen[seq]++
	}
	for i := range n {
		if seen[i] != 1 {
			t.Errorf("%s: seq=%d read %d times", who, i, seen[i])
		}
	}
	if len(seen) != n {
		t.Errorf("%s: %d distinct records, want %d", who, len(seen), n)
	}
}

// TestKafkaPythonThreeBrokers: Debian's python3 with confluent-kafka
// (librdkafka) produces with idempotence while a group consumes and
// commits; one broker is killed between two produce runs. Every
// acknowledged record is in the log once where it was acknowledged, in
// order, and the group saw every one.
func TestKafkaPythonThreeBrokers(t *testing.T) {
	needCluster(t)
	const py = "/usr/bin/python3"
	testbed.NeedClient(t, "python3-confluent-kafka", py, "-c", "import confluent_kafka")
	c := startCluster(t, 3)
	const topic, n = "python", 600
	c.createTopic(topic, partitions, nil)
	bootstrap := strings.Join(c.seeds(), ",")
	script, err := filepath.Abs("testdata/cluster_client.py")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	consumer := exec.CommandContext(ctx, py, script, "consume", bootstrap, topic, "py-group", strconv.Itoa(n), "120")
	var cout, cerr bytes.Buffer
	consumer.Stdout, consumer.Stderr = &cout, &cerr
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}

	var acked []kafkaload.Ack
	produce := func(first, count int) {
		out := testbed.RunCmd(t, 120*time.Second, nil, py, script, "produce", bootstrap, topic, strconv.Itoa(first), strconv.Itoa(count))
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var a kafkaload.Ack
			if _, err := fmt.Sscanf(line, "acked %d %d seq=%d", &a.Partition, &a.Offset, &a.Seq); err != nil {
				t.Fatalf("python printed %q", line)
			}
			acked = append(acked, a)
		}
	}
	produce(0, n/2)
	killOne(t, c, topic)
	produce(n/2, n/2)
	if len(acked) != n {
		t.Fatalf("%d of %d records acknowledged", len(acked), n)
	}

	if err := consumer.Wait(); err != nil {
		t.Fatalf("python group consumer: %v\nstderr:\n%s", err, cerr.String())
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(cout.String()), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "got" {
			got[f[3]] = true
		}
	}
	for _, a := range acked {
		if !got[fmt.Sprintf("seq=%d", a.Seq)] {
			t.Errorf("the python group never got seq=%d", a.Seq)
		}
	}
	kafkaload.CheckLog(t, c.seeds(), c.adm, topic, kafkaload.Check{Acked: acked})
}
