package kafkawire_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed/enginetest"
)

// tieredTopic creates a topic whose segments seal every ~4 KB, are
// archived, and leave Redis at once.
func tieredTopic(t *testing.T, b *broker, name string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range map[string]string{"remote.storage.enable": "true", "segment.bytes": "4000", "local.retention.ms": "0", "retention.ms": "-1"} {
		cfg[k] = &v
	}
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), 2, 1, cfg, name); err != nil {
		t.Fatal(err)
	}
}

// waitLocalSegments waits until only the open segment of each partition is
// still in Redis: everything sealed was archived and dropped locally.
func waitLocalSegments(t *testing.T, b *broker, topic string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		local, archived := 0, 0
		for _, p := range b.eng.Topic(topic).Partitions() {
			for _, sg := range p.Segments() {
				if sg.Local {
					local++
				}
				if sg.State == engine.SegmentArchived {
					archived++
				}
			}
		}
		if local == 2 && archived > 0 {
			return
		}
		if time.Now().After(deadline) {
			st, _ := b.eng.Tiering()
			t.Fatalf("after %v: %d local segments, %d archived; tiering %+v", d, local, archived, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Produce, let segments move to the cold tier and leave Redis, then
// consume from offset 0: Fetch serves both tiers byte-exact, also after a
// restart, and ListOffsets by time finds archived records. The engine's
// tests cover the tiers themselves, on every cold backend.
func TestConsumeAcrossTiers(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Cold: enginetest.Cold(t, enginetest.LocalWarehouse(t)), TieringInterval: 100 * time.Millisecond})
	tieredTopic(t, b, "tiered")
	recs := testRecords("tiered", 2)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < len(recs); i += 10 {
		produceAll(t, cl, recs[i:min(i+10, len(recs))])
	}
	// The last record goes into a fresh open segment, so all earlier
	// ones are sealed and archived.
	waitLocalSegments(t, b, "tiered", 30*time.Second)
	checkConsumed(t, recs, consumeN(t, b, "tiered", len(recs)))

	at, err := b.admin().ListOffsetsAfterMilli(ctxT(t, 10*time.Second), recs[2].Timestamp.UnixMilli(), "tiered")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := at.Lookup("tiered", 0); o.Offset != 1 {
		t.Fatalf("offset by time in the cold tier: %+v", o)
	}
	b.restart()
	checkConsumed(t, recs, consumeN(t, b, "tiered", len(recs)))
}
