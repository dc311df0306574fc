package engine

import "strconv"

// keys builds every Redis key korvet uses. All of them live under one
// keyspace prefix so that several korvets can share a Redis and an operator
// can find (or remove) everything with one pattern.
type keys struct{ ks string }

// topics is a hash: topic name -> JSON topic metadata.
func (k keys) topics() string { return k.ks + ":meta:topics" }

// cluster is a hash holding the cluster id.
func (k keys) cluster() string { return k.ks + ":meta:cluster" }

// partition is a hash with a partition's counters: next offset, log start
// offset, bytes appended, max timestamp, open segment.
func (k keys) partition(topic string, p int32) string {
	return k.ks + ":meta:partition:" + topic + ":" + strconv.Itoa(int(p))
}

// stream is the stream holding one segment of a partition.
func (k keys) stream(topic string, p int32, segment int64) string {
	return k.ks + ":storage:local:" + topic + ":" + strconv.Itoa(int(p)) + ":" + strconv.FormatInt(segment, 10)
}

// batches is a stream with one small entry per committed append, keyed by
// the append's last offset: the running max timestamp and the running byte
// total. It answers ListOffsets by time and drives retention.
func (k keys) batches(topic string, p int32) string {
	return k.ks + ":meta:batches:" + topic + ":" + strconv.Itoa(int(p))
}

// segments is a hash: segment id -> JSON Segment (the segment registry).
func (k keys) segments(topic string, p int32) string {
	return k.ks + ":meta:segments:" + topic + ":" + strconv.Itoa(int(p))
}

// coldGarbage is a set of "topic\x00file" cold files that retention has
// removed from the registry and the archiver must delete.
func (k keys) coldGarbage() string { return k.ks + ":meta:coldgc" }
