package kafkawire_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

func openCold(t *testing.T, cfg cold.Config) *cold.Store {
	t.Helper()
	cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
	st, err := cold.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

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

func tieringBackends(t *testing.T, run func(t *testing.T, cfg cold.Config, s3 *testbed.S3)) {
	t.Run("local", func(t *testing.T) {
		run(t, cold.Config{Warehouse: "file://" + filepath.Join(t.TempDir(), "warehouse")}, nil)
	})
	t.Run("versitygw", func(t *testing.T) {
		s3 := testbed.StartVersityGW(t)
		run(t, cold.Config{Warehouse: "s3://korvet/wh", Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Region: s3.Region, PathStyle: true}, s3)
	})
}

// Produce, let segments move to the cold tier and leave Redis, then
// consume from offset 0: byte-exact across both tiers, also after a
// restart, and ListOffsets by time finds archived records.
func TestConsumeAcrossTiers(t *testing.T) {
	tieringBackends(t, func(t *testing.T, cfg cold.Config, _ *testbed.S3) {
		b := startBroker(t, engine.Options{AutoCreateTopics: true, Cold: openCold(t, cfg), TieringInterval: 100 * time.Millisecond})
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
	})
}

// With the object store down, sealed segments stay in Redis and reads
// keep working; when it returns, archiving resumes and nothing is lost.
func TestArchivingSurvivesS3Outage(t *testing.T) {
	s3 := testbed.StartVersityGW(t)
	cfg := cold.Config{Warehouse: "s3://korvet/wh", Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Region: s3.Region, PathStyle: true}
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Cold: openCold(t, cfg), TieringInterval: 100 * time.Millisecond})
	tieredTopic(t, b, "outage")
	s3.Stop()
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := 0; i < 400; i++ {
		recs = append(recs, &kgo.Record{Topic: "outage", Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("value %d %0100d", i, i))})
	}
	for i := 0; i < len(recs); i += 20 {
		produceAll(t, cl, recs[i:i+20])
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := b.eng.Tiering()
		if st.BacklogSegments > 0 && st.Errors > 0 && st.Archived == 0 {
			break
		}
		if time.Now().After(deadline) || st.Archived > 0 {
			t.Fatalf("with S3 down: %+v, want a backlog, errors and nothing archived", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkConsumed(t, recs, consumeN(t, b, "outage", len(recs)))
	s3.Restart(t)
	waitLocalSegments(t, b, "outage", 30*time.Second)
	checkConsumed(t, recs, consumeN(t, b, "outage", len(recs)))
}
