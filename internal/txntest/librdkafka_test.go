package txntest

import (
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// TestLibrdkafkaTransactions runs librdkafka's transactional producer
// (python3-confluent-kafka) against korvet: commit, abort,
// send_offsets_to_transaction, a read_committed consumer that sees only
// committed records byte for byte, and a zombie producer fenced by a new
// one with its transactional id (testdata/txn_librdkafka.py checks each).
func TestLibrdkafkaTransactions(t *testing.T) {
	testbed.NeedClient(t, "python3-confluent-kafka", "/usr/bin/python3", "-c", "import confluent_kafka")
	b := startBroker(t, "")
	b.createTopic(t, "py-in", 2, nil)
	b.createTopic(t, "py-out", 2, nil)
	out := testbed.RunCmd(t, 3*time.Minute, nil, "/usr/bin/python3", "testdata/txn_librdkafka.py", b.KafkaAddr, "py-in", "py-out")
	t.Logf("txn_librdkafka.py:\n%s", out)
	for _, want := range []string{"OK read_committed: 20", "OK read_uncommitted: 30", "OK send_offsets_to_transaction: 20", "OK zombie fenced", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("txn_librdkafka.py did not print %q", want)
		}
	}
}
