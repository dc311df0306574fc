package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/txn"
)

// handleInitProducerID hands out producer ids: a new one for an
// idempotent producer (partitions then check its sequence numbers), and
// for a transactional id the id and epoch its coordinator gives, which
// fences every older producer of that id (engine/txn).
func handleInitProducerID(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if req.TransactionalID != nil {
			pid, epoch, err := c.s.eng.Txns().InitProducerID(ctx, txn.InitRequest{
				ID:         *req.TransactionalID,
				TimeoutMs:  req.TransactionTimeoutMillis,
				ProducerID: req.ProducerID,
				Epoch:      req.ProducerEpoch,
			})
			if err != nil {
				// PRODUCER_FENCED is v4+ (KIP-588).
				resp.ErrorCode = txnErrorCode(err, req.Version < 4)
				return resp
			}
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
			return resp
		}
		id, err := c.s.eng.NewProducerID(ctx)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return resp
	}
}

// aclInitProducerID: a transactional producer needs WRITE on its
// transactional id; an idempotent one IDEMPOTENT_WRITE on the cluster or
// WRITE on some topic, as in Kafka 2.8+.
func aclInitProducerID(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if resp.ErrorCode = c.txnIDCode(auth.OpWrite, *req.TransactionalID); resp.ErrorCode == 0 {
			return nil, nil
		}
		return resp, nil
	}
	if c.authorizeCluster(auth.OpIdempotentWrite) ||
		c.s.opts.Auth.AuthorizeAny(c.principal, c.host, auth.OpWrite, auth.ResTopic) {
		return nil, nil
	}
	resp.ErrorCode = clusterDenied
	return resp, nil
}
