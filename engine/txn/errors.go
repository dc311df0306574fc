package txn

import "errors"

// Errors the coordinator returns. Each stands for one Kafka error code;
// the wire layer maps them (kafkawire/error_codes.go).
var (
	ErrInvalidTxnState           = errors.New("invalid transaction state")
	ErrProducerFenced            = errors.New("producer fenced by a newer epoch of its transactional id")
	ErrConcurrentTransactions    = errors.New("the previous transaction of this transactional id is still completing")
	ErrTransactionalIDNotFound   = errors.New("transactional id not found")
	ErrInvalidTransactionTimeout = errors.New("transaction timeout outside the broker's allowed range")
	ErrInvalidProducerIDMapping  = errors.New("producer id does not match the transactional id")
	ErrNotCoordinator            = errors.New("not the transaction coordinator")
	ErrCoordinatorNotAvailable   = errors.New("transaction coordinator not available")
	ErrInvalidRequest            = errors.New("invalid request")
)
