package engine

import (
	"errors"
	"fmt"

	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/txn"
)

// Errors the engine returns; the wire layer maps them to Kafka error codes.
var (
	ErrUnknownTopic       = errors.New("unknown topic or partition")
	ErrTopicExists        = errors.New("topic already exists")
	ErrInvalidTopic       = errors.New("invalid topic name")
	ErrInvalidPartitions  = errors.New("invalid number of partitions")
	ErrInvalidConfig      = errors.New("invalid topic config")
	ErrMessageTooLarge    = errors.New("record batch larger than max.message.bytes")
	ErrOffsetOutOfRange   = errors.New("offset out of range")
	ErrStorageUnavailable = errors.New("redis unavailable")
	// ErrNotEnoughReplicas: an acks=all append is written, but fewer
	// Redis replicas than redis.wait_replicas confirmed it in time.
	ErrNotEnoughReplicas = errors.New("written, but not yet on enough Redis replicas")
	ErrInvalidRecord     = errors.New("invalid record")
	ErrTopicDeleted      = errors.New("topic is being deleted")
	// ErrPolicyViolation is a request the broker's limits refuse (Kafka's
	// POLICY_VIOLATION), such as more partitions than allowed.
	ErrPolicyViolation = errors.New("refused by broker policy")
	// ErrClosed is an operation on a closed Engine.
	ErrClosed = errors.New("engine closed")
	// ErrInternalTopic is returned for writes to or deletion of an
	// internal topic.
	ErrInternalTopic = fmt.Errorf("%w: internal topics are korvet's own", ErrInvalidTopic)
)

// Errors of idempotent producers.
var (
	ErrOutOfOrderSequence   = errors.New("out of order sequence number")
	ErrDuplicateSequence    = errors.New("duplicate sequence number")
	ErrInvalidProducerEpoch = errors.New("producer epoch is older than the current one")
	ErrUnknownProducerID    = errors.New("unknown producer id")
)

// Errors of the KV view.
var (
	ErrKVDisabled   = errors.New("the key index is disabled")
	ErrKVNotIndexed = errors.New("topic is not indexed")
	ErrKVNotFound   = errors.New("key not found")
	ErrKVGone       = errors.New("record removed by retention")
	// ErrKVUnavailable means the index cannot answer in time: a pointer
	// that no longer matches the log could not be resolved, or the index
	// is still catching up with the log. Retry later.
	ErrKVUnavailable = errors.New("key index unavailable")
)

// Errors of transactions: the transaction coordinator's (engine/txn)
// and the group coordinator's, under the engine's names too, so that the
// log side and the wire side test for one value.
var (
	// ErrInvalidTxnState: the producer's transaction is not in a state
	// that allows the request (Kafka's INVALID_TXN_STATE).
	ErrInvalidTxnState = txn.ErrInvalidTxnState
	// ErrProducerFenced: a newer producer with the same transactional id
	// exists (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH in older versions).
	ErrProducerFenced = txn.ErrProducerFenced
	// ErrConcurrentTransactions: the previous transaction is completing.
	ErrConcurrentTransactions = txn.ErrConcurrentTransactions
	// ErrUnstableOffsetCommit: a requested partition has offsets pending
	// in an open transaction (OffsetFetch with RequireStable).
	ErrUnstableOffsetCommit = group.ErrUnstableOffsetCommit
	// ErrInvalidProducerIDMapping: the producer id does not belong to the
	// transactional id.
	ErrInvalidProducerIDMapping = txn.ErrInvalidProducerIDMapping
	// ErrTransactionalIDNotFound: no state for the transactional id.
	ErrTransactionalIDNotFound = txn.ErrTransactionalIDNotFound
	// ErrInvalidTransactionTimeout: the timeout is above the broker's max.
	ErrInvalidTransactionTimeout = txn.ErrInvalidTransactionTimeout
)
