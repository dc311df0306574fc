// Package keys builds every Redis key korvet writes, and nothing else does.
// All of them live under one keyspace prefix so that several korvets can
// share a Redis and an operator can find (or remove) everything with one
// pattern. Layout lists them for the README's storage table, which a test
// keeps in step with this file.
//
// The strings are korvet's storage format: changing one loses users' data.
package keys

import "strconv"

// Default is the keyspace when none is configured.
const Default = "korvet"

// Space is a keyspace, the prefix of every key it builds.
type Space string

// Topics is a hash: topic name -> JSON topic metadata (id, partitions,
// configs).
func (s Space) Topics() string { return string(s) + ":meta:topics" }

// Cluster is a hash: "id" (the cluster id), "producer_ids" (the producer
// id counter) and "scram_decoy_seed" (hex, the seed of the made-up SCRAM
// salts answered for unknown users).
func (s Space) Cluster() string { return string(s) + ":meta:cluster" }

// Partition is a hash with a partition's counters: next offset, log start
// offset, bytes appended, max timestamp, the open segment's timestamps,
// and one "pid:{id}" field per idempotent producer.
func (s Space) Partition(topic string, partition int32) string {
	return string(s) + ":meta:partition:" + topic + ":" + strconv.Itoa(int(partition))
}

// Stream is a stream holding one segment of a partition: one entry per
// record, laid out as package entry describes.
func (s Space) Stream(topic string, partition int32, segment int64) string {
	return string(s) + ":storage:local:" + topic + ":" + strconv.Itoa(int(partition)) + ":" + strconv.FormatInt(segment, 10)
}

// Batches is a stream with one small entry per committed append, with ID
// "<last offset>-1": the running max timestamp and the running byte total.
// It answers ListOffsets by time and drives retention.
func (s Space) Batches(topic string, partition int32) string {
	return string(s) + ":meta:batches:" + topic + ":" + strconv.Itoa(int(partition))
}

// Segments is a hash: segment id -> JSON segment (the segment registry).
func (s Space) Segments(topic string, partition int32) string {
	return string(s) + ":meta:segments:" + topic + ":" + strconv.Itoa(int(partition))
}

// Events is a stream through which brokers sharing this keyspace tell
// each other that shared state changed (package engine/events).
func (s Space) Events() string { return string(s) + ":meta:events" }

// Brokers is a hash of the brokers registered on this keyspace: node id
// -> JSON {node, rack, listeners [{name, host, port}], started, renewed
// (unix ms), state live|leaving}. A broker is live while its lease
// (BrokerLease) exists.
func (s Space) Brokers() string { return string(s) + ":meta:brokers" }

// BrokerLease is a string holding the random instance token of the
// process that holds node id node, set with a lease (PX) that the holder
// renews.
func (s Space) BrokerLease(node int32) string {
	return string(s) + ":meta:broker:" + strconv.Itoa(int(node))
}

// ColdGarbage is a set of cold-tier objects for the archiver to delete:
// "file\x00{topic}\x00{path}" for files retention removed from a registry
// and "drop\x00{topic}\x00{table id}" for the tables of deleted topics.
func (s Space) ColdGarbage() string { return string(s) + ":meta:coldgc" }

// Groups is a hash of every consumer group with committed offsets or
// stored membership: group name -> protocol type ("consumer", or "" for
// groups that only commit offsets).
func (s Space) Groups() string { return string(s) + ":meta:groups" }

// GroupState is a string: a group's membership as JSON, so that members
// carry on across a restart.
func (s Space) GroupState(group string) string {
	return string(s) + ":group:" + group + ":state"
}

// ConsumerGroupState is a string: a KIP-848 consumer group's epochs,
// members, subscriptions and assignments as JSON.
func (s Space) ConsumerGroupState(group string) string {
	return string(s) + ":group:" + group + ":consumer"
}

// GroupOffsets is a hash of a group's committed offsets: "topic:partition"
// -> "<offset>,<leader epoch>,<commit unix ms>,<metadata>". Topic names
// cannot hold ':', so the last ':' splits the field.
func (s Space) GroupOffsets(group string) string {
	return string(s) + ":group:" + group + ":offsets"
}

// SCRAM is a hash per SASL mechanism ("SCRAM-SHA-256", "SCRAM-SHA-512"):
// user name -> JSON SCRAM credential.
func (s Space) SCRAM(mechanism string) string { return string(s) + ":meta:scram:" + mechanism }

// ACLs is a set of JSON ACLs, one per member.
func (s Space) ACLs() string { return string(s) + ":meta:acls" }

// ShareGroups is a hash of every share group: group name -> creation time
// (unix ms). Members live in memory; this keeps the groups across a
// restart.
func (s Space) ShareGroups() string { return string(s) + ":meta:sharegroups" }

// GroupConfigs is a hash: group name -> JSON object of the group's dynamic
// configs (share.auto.offset.reset, share.record.lock.duration.ms, ...),
// as set with IncrementalAlterConfigs on a GROUP resource.
func (s Space) GroupConfigs() string { return string(s) + ":meta:groupconfigs" }

// SharePartition is a hash per share group and partition: "tid" (the
// topic id, hex), "seg" (the segment whose Redis consumer group holds the
// share-partition start), "start" (the offset it began at) and counters
// (deliveries, redeliveries, accepted, released, rejected,
// archived_limit). The delivery state itself is the consumer group
// "share:{group}" on the segment streams.
func (s Space) SharePartition(group, topic string, partition int32) string {
	return string(s) + ":share:" + group + ":" + topic + ":" + strconv.Itoa(int(partition))
}

// ShareIndex is a set per share group of the partitions it has state for:
// "topic:partition".
func (s Space) ShareIndex(group string) string { return string(s) + ":share:" + group + ":partitions" }

// ShareCold is a hash per share group and partition for records in cold
// (archived) segments, whose streams are gone: offset -> "<state>,<delivery
// count>,<lock deadline unix ms>,<member>" for acquired, released and
// finished records, plus "next" (the next offset never acquired).
func (s Space) ShareCold(group, topic string, partition int32) string {
	return string(s) + ":share:" + group + ":" + topic + ":" + strconv.Itoa(int(partition)) + ":cold"
}
