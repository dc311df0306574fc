package engine

import (
	"context"
	"time"

	"github.com/korvet/korvet/engine/txn"
)

// TxnOptions configure the transaction coordinator (engine/txn).
type TxnOptions struct {
	// MaxTimeout bounds the transaction timeout a producer may ask for
	// (Kafka's transaction.max.timeout.ms). Default 15 min.
	MaxTimeout time.Duration
	// IDExpiration is how long a transactional id may stay idle before
	// it is deleted (transactional.id.expiration.ms). Default 7 days.
	IDExpiration time.Duration
	// CheckInterval is how often timed out transactions are aborted and
	// idle ids expired. Default 10s.
	CheckInterval time.Duration
}

// openTxns opens the transaction coordinator for the ids this broker
// owns.
func (e *Engine) openTxns(ctx context.Context) error {
	o := e.opts.Transactions
	c, err := txn.Open(ctx, e.rc, txn.Options{
		Keyspace:      e.opts.Keyspace,
		Owns:          e.OwnsTxn,
		NewProducerID: e.NewProducerID,
		Markers:       e,
		Offsets:       e.groups,
		MaxTimeout:    o.MaxTimeout,
		IDExpiration:  o.IDExpiration,
		CheckInterval: o.CheckInterval,
		Logger:        e.log,
	})
	if err != nil {
		return err
	}
	e.txns = c
	return nil
}

// Txns is the transaction coordinator.
func (e *Engine) Txns() *txn.Coordinator { return e.txns }

// txnKey places transactional ids apart from group names in the hash.
func txnKey(id string) string { return "txn\x00" + id }

// TxnCoordinator is the node id of the live broker that coordinates the
// transactional id.
func (e *Engine) TxnCoordinator(id string) int32 { return e.Coordinator(txnKey(id)) }

// OwnsTxn reports whether this broker coordinates the transactional id.
func (e *Engine) OwnsTxn(id string) bool { return e.TxnCoordinator(id) == e.NodeID() }
