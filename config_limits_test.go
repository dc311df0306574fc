package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The bounds on clients are read from [kafka] and checked, each bad value
// naming its key and line.
func TestKafkaLimitsConfig(t *testing.T) {
	c, err := loadConfig(writeConfig(t, `[kafka]
max_produce_decompressed_bytes = 8388608
max_partitions_per_topic = 50
max_partitions = 500
max_connections_per_ip = 20
sasl_auth_timeout = "3s"
connections_max_idle = "90s"
`))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kafka
	if k.MaxProduceDecompressedBytes != 8<<20 || k.MaxPartitionsPerTopic != 50 || k.MaxPartitions != 500 ||
		k.MaxConnectionsPerIP != 20 || k.SASLAuthTimeout.Duration != 3*time.Second || k.ConnectionsMaxIdle.Duration != 90*time.Second {
		t.Fatalf("read %+v", k)
	}
	for _, tc := range []struct{ set, key string }{
		{"max_produce_decompressed_bytes = 1000", "kafka.max_produce_decompressed_bytes"},
		{"max_produce_decompressed_bytes = 2147483647", "kafka.max_produce_decompressed_bytes"},
		{"max_partitions_per_topic = 0", "kafka.max_partitions_per_topic"},
		{"max_partitions_per_topic = 100001", "kafka.max_partitions_per_topic"},
		{"max_partitions = 1", "kafka.max_partitions"},
		{"default_partitions = 20\nmax_partitions_per_topic = 10", "kafka.default_partitions"},
		{"max_connections_per_ip = 0", "kafka.max_connections_per_ip"},
		{`sasl_auth_timeout = "0s"`, "kafka.sasl_auth_timeout"},
		{`connections_max_idle = "-1m"`, "kafka.connections_max_idle"},
	} {
		path := writeConfig(t, "[kafka]\n"+tc.set+"\n")
		_, err := loadConfig(path)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:", path)) {
			t.Errorf("%q: %v, want an error naming the file and %s", tc.set, err, tc.key)
		}
	}
}
