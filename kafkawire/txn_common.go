package kafkawire

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/txn"
)

// txnDenied is the refusal of an operation on a transactional id.
var txnDenied = kerr.TransactionalIDAuthorizationFailed.Code

// txnIDCode is 0 when op on the transactional id is allowed, else the
// error to answer.
func (c *conn) txnIDCode(op auth.Operation, id string) int16 {
	if c.authorize(op, auth.ResTransactionalID, id) {
		return 0
	}
	return txnDenied
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
