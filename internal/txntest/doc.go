// Package txntest holds the end-to-end tests of transactions (issue 16):
// real korvet processes started by internal/testbed on a real
// redis-server, driven by franz-go (GroupTransactSession) and librdkafka
// (Debian's python3-confluent-kafka) while korvet is SIGKILLed. It has no
// code outside its tests.
//
//	go test -count=1 ./internal/txntest/          # all, about 2 minutes
//	go test -count=1 -run TestExactlyOnce -v ./internal/txntest/
//
// `go test -short` skips every test that runs brokers.
package txntest
