// Package kafkaload is a steady idempotent producer, a tail consumer and
// the checks that every acknowledged record is in the log once and in
// order, for tests that kill things (brokers, Redis nodes, korvet itself)
// under load; with the admin look-ups such tests wait on (topic creation,
// partition leaders, end offsets). It takes testing.TB and holds no
// global state, so any test package can use it.
package kafkaload
