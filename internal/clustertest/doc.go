// Package clustertest holds the end-to-end tests of several korvet brokers
// on one Redis (issue 14): real korvet processes started by
// internal/testbed on one real redis-server, driven by real Kafka clients
// (franz-go, kcat, confluent-kafka) while brokers are killed, paused,
// stopped and restarted. It has no code outside its tests; the load
// producer and the log checks are internal/testbed/kafkaload.
//
//	go test -count=1 ./internal/clustertest/          # all, about 3 minutes
//	go test -count=1 -run TestKillBroker -v ./internal/clustertest/
//
// The tests print lines a script can grep, e.g. "failover: 1234ms".
// `go test -short` skips every test that runs brokers.
package clustertest
