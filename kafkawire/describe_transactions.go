package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleDescribeTransactions describes the transactional ids this broker
// coordinates; the others are answered NOT_COORDINATOR.
func handleDescribeTransactions(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID = id
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			d, err := c.s.eng.Txns().Describe(ctx, id)
			if err != nil {
				st.ErrorCode = txnErrorCode(err, false)
				resp.TransactionStates = append(resp.TransactionStates, st)
				continue
			}
			st.State, st.TimeoutMillis, st.StartTimestamp = string(d.State), d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
			for _, tp := range d.Partitions {
				if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == tp.Topic {
					st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, tp.Partition)
					continue
				}
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
				st.Topics = append(st.Topics, t)
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	}
}

// aclDescribeTransactions: DESCRIBE on each transactional id; the others
// are answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func aclDescribeTransactions(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeTransactionsRequest)
	var out []refused[string]
	req.TransactionalIDs, out = sift(req.TransactionalIDs, func(id *string) int16 { return c.txnIDCode(auth.OpDescribe, *id) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		for _, o := range out {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = o.item, o.code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
	}
}
