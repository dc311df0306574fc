package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleInitProducerID hands out producer ids for idempotent producers
// (the default in current clients); partitions then check their sequence
// numbers. Transactional ids are refused: korvet has no transactions.
func handleInitProducerID(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if req.TransactionalID != nil {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
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

// aclInitProducerID: an idempotent producer needs IDEMPOTENT_WRITE on the
// cluster or WRITE on some topic, as in Kafka 2.8+. Transactional ids are
// refused by the handler whatever the ACLs.
func aclInitProducerID(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID != nil || c.authorizeCluster(auth.OpIdempotentWrite) ||
		c.s.opts.Auth.AuthorizeAny(c.principal, c.host, auth.OpWrite, auth.ResTopic) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = clusterDenied, -1, -1
	return resp, nil
}
