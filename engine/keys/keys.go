// Package keys builds every Redis key korvet writes, and nothing else does.
// All of them live under one keyspace prefix so that several korvets can
// share a Redis and an operator can find (or remove) everything with one
// pattern. Layout lists them for the README's storage table, which a test
// keeps in step with this file.
//
// The strings are korvet's storage format: changing one loses users' data.
//
// On a Redis Cluster the keys carry hash tags (the text in braces decides
// the slot), because a Redis transaction or script only works on keys of
// one slot: every key of one partition carries the tag {topic:partition},
// so that an append stays one MULTI on one shard while partitions spread
// over all shards; cluster-wide metadata carries {meta} and consumer
// groups {groups}, the two sets of keys that korvet changes together. A
// standalone Redis keeps the original layout byte for byte.
package keys

import "strconv"

// Default is the keyspace when none is configured.
const Default = "korvet"

// Space is a keyspace, the prefix of every key it builds, in the
// standalone or the Redis Cluster layout.
type Space struct {
	prefix  string
	cluster bool
}

// New returns the keyspace prefix in the standalone layout, or in the
// Redis Cluster layout (hash tags) when cluster is true.
func New(prefix string, cluster bool) Space { return Space{prefix: prefix, cluster: cluster} }

// Prefix returns the keyspace prefix.
func (s Space) Prefix() string { return s.prefix }

// IsCluster reports whether s builds the Redis Cluster layout.
func (s Space) IsCluster() bool { return s.cluster }

// meta is the prefix of cluster-wide metadata keys.
func (s Space) meta() string {
	if s.cluster {
		return s.prefix + ":{meta}:"
	}
	return s.prefix + ":meta:"
}

// groups is the prefix of consumer group keys.
func (s Space) groups() string {
	if s.cluster {
		return s.prefix + ":{groups}:"
	}
	return s.prefix + ":"
}

// part is a partition's part of its keys: "topic:partition", as a hash
// tag in the cluster layout.
func (s Space) part(topic string, partition int32) string {
	if s.cluster {
		return "{" + topic + ":" + strconv.Itoa(int(partition)) + "}"
	}
	return topic + ":" + strconv.Itoa(int(partition))
}

// Topics is a hash: topic name -> JSON topic metadata (id, partitions,
// configs).
func (s Space) Topics() string { return s.meta() + "topics" }

// Cluster is a hash: "id" (the cluster id), "producer_ids" (the producer
// id counter) and "scram_decoy_seed" (hex, the seed of the made-up SCRAM
// salts answered for unknown users).
func (s Space) Cluster() string { return s.meta() + "cluster" }

// Partition is a hash with a partition's counters: next offset, log start
// offset, bytes appended, max timestamp, the open segment's timestamps,
// one "pid:{id}" field per idempotent producer and one "txn:{pid}" field
// per open transaction ("<epoch>,<first offset>,<transactional id>").
func (s Space) Partition(topic string, partition int32) string {
	return s.prefix + ":meta:partition:" + s.part(topic, partition)
}

// Stream is a stream holding one segment of a partition: one entry per
// record, laid out as package entry describes.
func (s Space) Stream(topic string, partition int32, segment int64) string {
	return s.prefix + ":storage:local:" + s.part(topic, partition) + ":" + strconv.FormatInt(segment, 10)
}

// AppendStream appends Stream(topic, partition, segment) to dst, for a
// read path that builds the key into a reused buffer.
func (s Space) AppendStream(dst []byte, topic string, partition int32, segment int64) []byte {
	dst = append(dst, s.prefix...)
	dst = append(dst, ":storage:local:"...)
	if s.cluster {
		dst = append(dst, '{')
	}
	dst = append(dst, topic...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(partition), 10)
	if s.cluster {
		dst = append(dst, '}')
	}
	dst = append(dst, ':')
	return strconv.AppendInt(dst, segment, 10)
}

// Batches is a stream with one small entry per committed append, with ID
// "<last offset>-1": the running max timestamp and the running byte total.
// It answers ListOffsets by time and drives retention.
func (s Space) Batches(topic string, partition int32) string {
	return s.prefix + ":meta:batches:" + s.part(topic, partition)
}

// Segments is a hash: segment id -> JSON segment (the segment registry).
func (s Space) Segments(topic string, partition int32) string {
	return s.prefix + ":meta:segments:" + s.part(topic, partition)
}

// Aborted is a stream per partition with one entry per aborted
// transaction, ID "<offset of its abort marker>-1", fields "pid" (the
// producer id) and "first" (the offset of the transaction's first record
// in the partition): the aborted-transaction index that read_committed
// fetches return. Entries below the log start are trimmed.
func (s Space) Aborted(topic string, partition int32) string {
	return s.prefix + ":meta:aborted:" + s.part(topic, partition)
}

// Fence is a counter of the append rounds refused by the fence check, a
// string written only when one is: a round WATCHes it, and its check
// (run just before its MULTI) increments it when the partition's leader,
// epoch or next offset is not what the round was planned on, which aborts
// the round's EXEC (see engine/flush.go).
func (s Space) Fence(topic string, partition int32) string {
	return s.prefix + ":meta:fence:" + s.part(topic, partition)
}

// Events is a stream through which brokers sharing this keyspace tell
// each other that shared state changed (package engine/events).
func (s Space) Events() string { return s.meta() + "events" }

// Brokers is a hash of the brokers registered on this keyspace: node id
// -> JSON {node, rack, listeners [{name, host, port}], started, renewed
// (unix ms), state live|leaving}. A broker is live while its lease
// (BrokerLease) exists.
func (s Space) Brokers() string { return s.meta() + "brokers" }

// BrokerLease is a string holding the random instance token of the
// process that holds node id node, set with a lease (PX) that the holder
// renews.
func (s Space) BrokerLease(node int32) string {
	return s.meta() + "broker:" + strconv.Itoa(int(node))
}

// ColdGarbage is a set of cold-tier objects for the archiver to delete:
// "file\x00{topic}\x00{path}" for files retention removed from a registry
// and "drop\x00{topic}\x00{table id}" for the tables of deleted topics.
func (s Space) ColdGarbage() string { return s.meta() + "coldgc" }

// ZstdDicts is a hash of a topic's zstd dictionaries for values stored
// compressed (korvet.storage.compression=zstd): version (decimal, from
// 1) -> dictionary bytes, and "current" -> the version new records use.
// A version is written once (HSETNX) and never changes.
func (s Space) ZstdDicts(topic string) string { return s.meta() + "zdict:" + topic }

// Groups is a hash of every consumer group with committed offsets or
// stored membership: group name -> protocol type ("consumer", or "" for
// groups that only commit offsets).
func (s Space) Groups() string {
	if s.cluster {
		return s.groups() + "groups"
	}
	return s.prefix + ":meta:groups"
}

// GroupState is a string: a group's membership as JSON, so that members
// carry on across a restart.
func (s Space) GroupState(group string) string {
	return s.groups() + "group:" + group + ":state"
}

// ConsumerGroupState is a string: a KIP-848 consumer group's epochs,
// members, subscriptions and assignments as JSON.
func (s Space) ConsumerGroupState(group string) string {
	return s.groups() + "group:" + group + ":consumer"
}

// GroupOffsets is a hash of a group's committed offsets: "topic:partition"
// -> "<offset>,<leader epoch>,<commit unix ms>,<metadata>". Topic names
// cannot hold ':', so the last ':' splits the field.
func (s Space) GroupOffsets(group string) string {
	return s.groups() + "group:" + group + ":offsets"
}

// GroupTxnOffsets is a hash of a group's offsets committed inside open
// transactions (TxnOffsetCommit): "<producer id>:topic:partition" -> the
// offset, encoded as in GroupOffsets. A commit marker moves them to
// GroupOffsets, an abort drops them.
func (s Space) GroupTxnOffsets(group string) string {
	return s.groups() + "group:" + group + ":txnoffsets"
}

// Transactions is a hash of the transaction coordinator's state:
// transactional id -> JSON (producer id and epoch, the previous ones,
// timeout, state, partitions and groups in the transaction, times). On a
// Redis Cluster it has a slot of its own ({txns}).
func (s Space) Transactions() string {
	if s.cluster {
		return s.prefix + ":{txns}:transactions"
	}
	return s.prefix + ":meta:transactions"
}

// SCRAM is a hash per SASL mechanism ("SCRAM-SHA-256", "SCRAM-SHA-512"):
// user name -> JSON SCRAM credential.
func (s Space) SCRAM(mechanism string) string { return s.meta() + "scram:" + mechanism }

// ACLs is a set of JSON ACLs, one per member.
func (s Space) ACLs() string { return s.meta() + "acls" }

// ShareGroups is a hash of every share group: group name -> creation time
// (unix ms). Members live in memory; this keeps the groups across a
// restart.
func (s Space) ShareGroups() string { return s.meta() + "sharegroups" }

// GroupConfigs is a hash: group name -> JSON object of the group's dynamic
// configs (share.auto.offset.reset, share.record.lock.duration.ms, ...),
// as set with IncrementalAlterConfigs on a GROUP resource.
func (s Space) GroupConfigs() string { return s.meta() + "groupconfigs" }

// SharePartition is a hash per share group and partition: "tid" (the
// topic id, hex), "seg" (the segment whose Redis consumer group holds the
// share-partition start), "start" (the offset it began at) and counters
// (deliveries, redeliveries, accepted, released, rejected,
// archived_limit). The delivery state itself is the consumer group
// "share:{group}" on the segment streams.
func (s Space) SharePartition(group, topic string, partition int32) string {
	if s.cluster {
		// The tag before the group name, which may hold braces itself.
		return s.prefix + ":share:" + s.part(topic, partition) + ":state:" + group
	}
	return s.prefix + ":share:" + group + ":" + topic + ":" + strconv.Itoa(int(partition))
}

// ShareIndex is a set per share group of the partitions it has state for:
// "topic:partition".
func (s Space) ShareIndex(group string) string { return s.groups() + "share:" + group + ":partitions" }

// ShareCold is a hash per share group and partition for records in cold
// (archived) segments, whose streams are gone: offset -> "<state>,<delivery
// count>,<lock deadline unix ms>,<member>" for acquired, released and
// finished records, plus "next" (the next offset never acquired).
func (s Space) ShareCold(group, topic string, partition int32) string {
	if s.cluster {
		return s.prefix + ":share:" + s.part(topic, partition) + ":cold:" + group
	}
	return s.prefix + ":share:" + group + ":" + topic + ":" + strconv.Itoa(int(partition)) + ":cold"
}

// schemas is the prefix of the schema registry's keys: on a Redis Cluster
// they share the slot of {schemas}, so that one script registers a schema
// (its id, its source, the subject's versions) atomically.
func (s Space) schemas() string {
	if s.cluster {
		return s.prefix + ":{schemas}:"
	}
	return s.prefix + ":meta:"
}

// Schemas is a hash: global schema id -> JSON source (schemaType, schema,
// references) as first registered. An id never changes meaning.
func (s Space) Schemas() string { return s.schemas() + "schemas" }

// SchemaIDs is a hash: fingerprint (hex SHA-256 of the schema's format,
// canonical form and references) -> its global id, plus "next", the last
// id handed out, and "refrev", a count of registrations with references
// (deletes compare-and-set on it).
func (s Space) SchemaIDs() string { return s.schemas() + "schemaids" }

// Subjects is a hash: subject -> JSON {"versions": [{version, id,
// deleted}]}, every version not permanently deleted.
func (s Space) Subjects() string { return s.schemas() + "subjects" }

// SchemaConfig is a hash of the registry's compatibility levels and modes:
// "compatibility" and "mode" (global), "compatibility:{subject}" and
// "mode:{subject}" (per subject).
func (s Space) SchemaConfig() string { return s.schemas() + "schemaconfig" }
