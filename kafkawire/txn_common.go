package kafkawire

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/korvet/korvet/engine/auth"
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
