// Package redisclustertest holds the end-to-end tests of korvet on a Redis
// Cluster (issue 15): a real cluster of 3 masters + 3 replicas started by
// internal/testbed.StartRedisCluster, real korvet processes with
// redis.cluster = true, driven by real Kafka clients (franz-go, kcat,
// Debian's python3-confluent-kafka) while masters are killed and slots
// move between them. It has no code outside its tests; the load producer,
// the tail consumer and the log checks are internal/testbed/kafkaload.
//
//	go test -count=1 ./internal/redisclustertest/       # all, about 2 minutes
//	go test -count=1 -run TestKillMaster -v ./internal/redisclustertest/
//
// The tests print lines a script can grep ("master failover: ...",
// "broker failover: ...", "reshard: ..."). `go test -short` skips every
// test; a checkout whose korvet has no redis.cluster key yet skips them
// too. scripts/conformance.sh with REDIS_CLUSTER=1 runs franz-go's own
// tests against korvet on such a cluster.
package redisclustertest
