package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleEndTxn commits or aborts a producer's transaction. It is answered
// once PrepareCommit or PrepareAbort is stored; markers follow in the
// background (engine/txn). v5+ is the KIP-890 flow: the epoch is bumped
// and the new producer id and epoch answered.
func handleEndTxn(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.EndTxnRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		res, err := c.s.eng.Txns().EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= 5)
		if err != nil {
			// PRODUCER_FENCED is v2+ (KIP-588).
			resp.ErrorCode = txnErrorCode(err, req.Version < 2)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
		return resp
	}
}

// aclEndTxn: WRITE on the transactional id.
func aclEndTxn(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.EndTxnRequest)
	code := c.txnIDCode(auth.OpWrite, req.TransactionalID)
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp, nil
}
