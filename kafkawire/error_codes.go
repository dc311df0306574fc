package kafkawire

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/txn"
	"github.com/korvet/korvet/kafkawire/batch"
)

// errorCode maps an engine or record error to a Kafka error code.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, engine.ErrUnknownTopic), errors.Is(err, engine.ErrTopicDeleted):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, engine.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, engine.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, engine.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, engine.ErrPolicyViolation):
		return kerr.PolicyViolation.Code
	case errors.Is(err, engine.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, engine.ErrMessageTooLarge), errors.Is(err, batch.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, engine.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, engine.ErrDuplicateSequence):
		return kerr.DuplicateSequenceNumber.Code
	case errors.Is(err, engine.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, engine.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, engine.ErrProducerFenced):
		return kerr.ProducerFenced.Code
	case errors.Is(err, engine.ErrConcurrentTransactions):
		return kerr.ConcurrentTransactions.Code
	case errors.Is(err, engine.ErrUnstableOffsetCommit):
		return kerr.UnstableOffsetCommit.Code
	case errors.Is(err, engine.ErrInvalidProducerIDMapping):
		return kerr.InvalidProducerIDMapping.Code
	case errors.Is(err, engine.ErrTransactionalIDNotFound):
		return kerr.TransactionalIDNotFound.Code
	case errors.Is(err, engine.ErrInvalidTransactionTimeout):
		return kerr.InvalidTransactionTimeout.Code
	case errors.Is(err, engine.ErrUnknownProducerID):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, batch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, batch.ErrUnsupported):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, engine.ErrNotLeader):
		// Retriable: the client refreshes its metadata and goes to the
		// new leader.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, engine.ErrNotEnoughReplicas):
		// Retriable: the records are in the log; an idempotent retry
		// answers their offsets once the replicas have caught up.
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, engine.ErrStorageUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, engine.ErrClosed):
		// Retriable: clients back off and try again.
		return kerr.KafkaStorageError.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// txnErrorCode maps a transaction coordinator error. fencedIsEpoch is for
// the versions that predate PRODUCER_FENCED (KIP-588): they are answered
// INVALID_PRODUCER_EPOCH, as Kafka does.
func txnErrorCode(err error, fencedIsEpoch bool) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, txn.ErrProducerFenced):
		if fencedIsEpoch {
			return kerr.InvalidProducerEpoch.Code
		}
		return kerr.ProducerFenced.Code
	case errors.Is(err, txn.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, txn.ErrConcurrentTransactions):
		return kerr.ConcurrentTransactions.Code
	case errors.Is(err, txn.ErrTransactionalIDNotFound):
		return kerr.TransactionalIDNotFound.Code
	case errors.Is(err, txn.ErrInvalidTransactionTimeout):
		return kerr.InvalidTransactionTimeout.Code
	case errors.Is(err, txn.ErrInvalidProducerIDMapping):
		return kerr.InvalidProducerIDMapping.Code
	case errors.Is(err, txn.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, txn.ErrCoordinatorNotAvailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, txn.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	}
	return errorCode(err)
}

func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// partitionOf is partition id of t, or nil when t is nil or has no such
// partition.
func partitionOf(t *engine.Topic, id int32) *engine.Partition {
	if t == nil {
		return nil
	}
	return t.Partition(id)
}
