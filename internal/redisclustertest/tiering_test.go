package redisclustertest

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
	"github.com/korvet/korvet/resp"
)

// TestTieringOnCluster: a topic with remote.storage.enable=true, small
// segments and local.retention.ms=0 on the Redis Cluster: sealed segments
// are archived to the cold tier (the default file:// warehouse under
// data_dir) and dropped from Redis, until each partition keeps only its
// open segment, which does not start at offset 0. A read from offset 0
// then crosses both tiers and returns every record byte for byte.
func TestTieringOnCluster(t *testing.T) {
	needRedisCluster(t)
	e := startEnv(t, 1, "cold.archive_interval = \"200ms\"\n")
	const topic, partitions, rounds = "archive", 2, 120
	e.createTopic(topic, partitions, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("4000"),
		"local.retention.ms": kadm.StringPtr("0"), "retention.ms": kadm.StringPtr("-1"),
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want []record
	// One small append per partition at a time: a segment is sealed by
	// the append that finds it full, so each holds ~4000 bytes.
	for i := range rounds {
		var recs []*kgo.Record
		for p := range int32(partitions) {
			r := record{Partition: p, Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "%d/%d %s", p, i, strings.Repeat("v", 200+i%50))}
			want = append(want, r)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: r.Key, Value: r.Value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", i, err)
		}
	}

	warehouse := filepath.Join(e.brokers[0].DataDir, "warehouse")
	testbed.Eventually(t, 60*time.Second, "sealed segments archived and dropped from Redis", func() (bool, string) {
		streams, err := e.segmentStreams(topic)
		if err != nil {
			return false, err.Error()
		}
		perPartition := map[string][]string{}
		for _, ks := range streams {
			for _, k := range ks {
				tag := k[strings.Index(k, "{"):]
				tag = tag[:strings.Index(tag, "}")+1]
				perPartition[tag] = append(perPartition[tag], k)
			}
		}
		files := parquetFiles(warehouse)
		if len(files) == 0 {
			return false, fmt.Sprintf("no parquet files in %s yet; streams %v", warehouse, perPartition)
		}
		for p := range int32(partitions) {
			if n := len(perPartition[partitionTag(topic, p)]); n != 1 {
				return false, fmt.Sprintf("partition %d has %d segment streams in Redis; %d parquet files", p, n, len(files))
			}
		}
		return true, ""
	})
	// What is left in Redis starts past offset 0: the start of the log
	// can only come from the cold tier.
	streams, err := e.segmentStreams(topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, ks := range streams {
		for _, k := range ks {
			if first := e.firstOffset(ctx, k); first <= 0 {
				t.Errorf("segment stream %s still starts at offset %d", k, first)
			}
		}
	}
	t.Logf("%d parquet files in %s", len(parquetFiles(warehouse)), warehouse)

	checkRecords(t, "read from offset 0", asRecords(kafkaload.ReadAll(t, e.seeds(), e.adm, topic, 60*time.Second)), want)
}

// parquetFiles lists the .parquet files under dir.
func parquetFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// firstOffset is the offset of the first entry of a segment stream (entry
// ids are OFFSET-N), -1 if it has none.
func (e *env) firstOffset(ctx context.Context, key string) int64 {
	e.t.Helper()
	r, err := e.redis.Do(ctx, "XRANGE", key, "-", "+", "COUNT", "1")
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		e.t.Fatalf("XRANGE %s: %v", key, err)
	}
	first := int64(-1)
	r.ForEach(func(entry resp.Reply) bool {
		entry.ForEach(func(id resp.Reply) bool {
			o, _, _ := strings.Cut(string(id.Bytes()), "-")
			n, err := strconv.ParseInt(o, 10, 64)
			if err != nil {
				e.t.Fatalf("XRANGE %s: entry id %q", key, id.Bytes())
			}
			first = n
			return false
		})
		return false
	})
	return first
}
