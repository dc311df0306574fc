package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleAddOffsetsToTxn adds a group to a producer's transaction: the
// offsets it then commits with TxnOffsetCommit complete with the
// transaction.
func handleAddOffsetsToTxn(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		err := c.s.eng.Txns().AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		// PRODUCER_FENCED is v2+ (KIP-588).
		resp.ErrorCode = txnErrorCode(err, req.Version < 2)
		return resp
	}
}

// aclAddOffsetsToTxn: WRITE on the transactional id and READ on the
// group.
func aclAddOffsetsToTxn(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.AddOffsetsToTxnRequest)
	code := c.txnIDCode(auth.OpWrite, req.TransactionalID)
	if code == 0 {
		code = c.groupCode(auth.OpRead, req.Group)
	}
	if code == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return resp, nil
}
