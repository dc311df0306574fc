package testbed

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveKorvetBuild()
	os.Exit(code)
}

// produceOne produces one record to addr and returns its offset.
func produceOne(t *testing.T, addr, topic, value string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).First()
	if err != nil {
		t.Fatalf("produce to %s: %v", addr, err)
	}
	return r.Offset
}

// TestKorvetHarness drives one broker through everything the harness
// does: start, produce, SIGKILL and restart on the same ports and data,
// SIGSTOP (the Kafka port stops answering) and SIGCONT, SIGTERM.
func TestKorvetHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := StartRedis(t)
	k := StartKorvet(t, KorvetOptions{RedisURL: r.URL, NodeID: 7, SessionTimeout: 2 * time.Second})
	if k.NodeID != 7 || k.PID() == 0 || !k.Running() {
		t.Fatalf("started broker: node %d pid %d running %v", k.NodeID, k.PID(), k.Running())
	}
	cfg, err := os.ReadFile(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "kafka.node_id = 7") || !strings.Contains(string(cfg), k.KafkaAddr) {
		t.Errorf("config does not carry the node id and address:\n%s", cfg)
	}
	if got, want := KorvetKnows(t, "kafka", "broker_session_timeout"), strings.Contains(string(cfg), "broker_session_timeout"); got != want {
		t.Errorf("KorvetKnows says %v but the config has the lease key: %v", got, want)
	}
	if !KorvetKnows(t, "kafka", "listen") || KorvetKnows(t, "kafka", "no_such_key") || KorvetKnows(t, "http", "node_id") {
		t.Error("KorvetKnows misreads korvet.toml")
	}
	if off := produceOne(t, k.KafkaAddr, "harness", "a"); off != 0 {
		t.Errorf("first record at offset %d", off)
	}

	addr, pid := k.KafkaAddr, k.PID()
	k.Kill()
	if k.Running() || k.PID() != 0 {
		t.Fatal("killed broker still counted as running")
	}
	if err := apiVersions(addr); err == nil {
		t.Fatal("the Kafka port answers after SIGKILL")
	}
	k.Restart(t)
	if k.KafkaAddr != addr || k.PID() == pid {
		t.Errorf("restart: address %s (was %s), pid %d (was %d)", k.KafkaAddr, addr, k.PID(), pid)
	}
	if off := produceOne(t, k.KafkaAddr, "harness", "b"); off != 1 {
		t.Errorf("record after the restart at offset %d, want 1: the data did not survive", off)
	}

	k.Pause()
	if err := apiVersions(k.KafkaAddr); err == nil {
		t.Error("a paused broker answered ApiVersions")
	}
	k.Resume()
	WaitFor(t, 10*time.Second, "the resumed broker answers", func() bool { return apiVersions(k.KafkaAddr) == nil })

	// SIGTERM on a paused broker still stops it (it is continued first).
	k.Pause()
	start := time.Now()
	k.Stop()
	if k.Running() {
		t.Fatal("stopped broker still running")
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(k.Log(), "korvet started") {
		t.Errorf("the log file lacks the start line:\n%s", k.Log())
	}
}

// TestStartCluster: n brokers on one Redis get distinct node ids and
// addresses, each answering on its own.
func TestStartCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := StartRedis(t)
	ks := StartCluster(t, r.URL, 2)
	seen := map[string]bool{}
	for i, k := range ks {
		if k.NodeID != int32(i+1) || seen[k.KafkaAddr] || seen[k.HTTPAddr] {
			t.Errorf("broker %d: node %d, %s, %s", i, k.NodeID, k.KafkaAddr, k.HTTPAddr)
		}
		seen[k.KafkaAddr], seen[k.HTTPAddr] = true, true
		if err := apiVersions(k.KafkaAddr); err != nil {
			t.Errorf("node %d: %v", k.NodeID, err)
		}
	}
}
