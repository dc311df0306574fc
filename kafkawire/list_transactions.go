package kafkawire

import (
	"context"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/txn"
)

// maxTxnPatternBytes bounds ListTransactions' id pattern before it is
// compiled, as consumer group regexes are.
const maxTxnPatternBytes = 1024

// handleListTransactions lists the transactional ids this broker
// coordinates (admin clients ask every broker), with Kafka's filters:
// states (unknown ones are answered back), producer ids, v1's minimum
// duration and v2's id pattern (RE2, matching anywhere in the id unless
// anchored).
func handleListTransactions(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListTransactionsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		var f txn.ListFilter
		for _, s := range req.StateFilters {
			switch st := txn.State(s); st {
			case txn.Empty, txn.Ongoing, txn.PrepareCommit, txn.PrepareAbort, txn.CompleteCommit, txn.CompleteAbort:
				f.States = append(f.States, st)
			default:
				resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			}
		}
		if len(req.StateFilters) > 0 && len(f.States) == 0 {
			return resp // only unknown states: nothing matches
		}
		f.ProducerIDs = req.ProducerIDFilters
		if req.DurationFilterMillis > 0 {
			f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
		}
		if p := req.TransactionalIDPattern; p != nil && *p != "" {
			if len(*p) > maxTxnPatternBytes {
				resp.ErrorCode = kerr.InvalidRegularExpression.Code
				return resp
			}
			re, err := regexp.Compile(*p)
			if err != nil {
				resp.ErrorCode = kerr.InvalidRegularExpression.Code
				return resp
			}
			f.IDPattern = re
		}
		for _, d := range c.s.eng.Txns().List(f, time.Now()) {
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = d.ID, d.ProducerID, string(d.State)
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	}
}

// aclListTransactions: the list shows the ids the principal may
// describe.
func aclListTransactions(c *conn, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListTransactionsResponse)
		kept := resp.TransactionStates[:0]
		for _, st := range resp.TransactionStates {
			if c.txnIDCode(auth.OpDescribe, st.TransactionalID) == 0 {
				kept = append(kept, st)
			}
		}
		resp.TransactionStates = kept
	}
}
