package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/txn"
)

// handleAddPartitionsToTxn adds partitions to a producer's transaction
// (v0-3, from the producer) or, from v4 on, handles batches of
// transactions from brokers: VerifyOnly ones (KIP-890 part 1: a partition
// leader checking a transactional batch) are answered with which
// partitions are in the transaction, the others are added. A partition
// that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION and the
// others of that transaction OPERATION_NOT_ATTEMPTED, as Kafka does.
func handleAddPartitionsToTxn(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		if req.Version <= 3 {
			t := kmsg.NewAddPartitionsToTxnRequestTransaction()
			t.TransactionalID, t.ProducerID, t.ProducerEpoch = req.TransactionalID, req.ProducerID, req.ProducerEpoch
			for _, rt := range req.Topics {
				tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
				tt.Topic, tt.Partitions = rt.Topic, rt.Partitions
				t.Topics = append(t.Topics, tt)
			}
			// PRODUCER_FENCED is v2+ (KIP-588).
			for _, rt := range c.addPartitions(ctx, t, req.Version < 2).Topics {
				st := kmsg.NewAddPartitionsToTxnResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					sp.Partition, sp.ErrorCode = rp.Partition, rp.ErrorCode
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}
		for _, t := range req.Transactions {
			resp.Transactions = append(resp.Transactions, c.addPartitions(ctx, t, false))
		}
		return resp
	}
}

// addPartitions adds (or verifies) the partitions of one transaction.
func (c *conn) addPartitions(ctx context.Context, t kmsg.AddPartitionsToTxnRequestTransaction, fencedIsEpoch bool) kmsg.AddPartitionsToTxnResponseTransaction {
	var parts []txn.TopicPartition
	unknown := map[txn.TopicPartition]bool{}
	for _, rt := range t.Topics {
		top := c.s.eng.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: p}
			if partitionOf(top, p) == nil {
				unknown[tp] = true
				continue
			}
			parts = append(parts, tp)
		}
	}
	codes := make(map[txn.TopicPartition]int16, len(parts))
	switch {
	case len(unknown) > 0:
		for _, tp := range parts {
			codes[tp] = kerr.OperationNotAttempted.Code
		}
	case t.VerifyOnly:
		errs, err := c.s.eng.Txns().VerifyPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
		for i, tp := range parts {
			if err != nil {
				codes[tp] = txnErrorCode(err, fencedIsEpoch)
			} else {
				codes[tp] = txnErrorCode(errs[i], fencedIsEpoch)
			}
		}
	default:
		err := c.s.eng.Txns().AddPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
		if err != nil {
			c.s.log.Debug("AddPartitionsToTxn refused", "transactional_id", t.TransactionalID, "err", err)
		}
		for _, tp := range parts {
			codes[tp] = txnErrorCode(err, fencedIsEpoch)
		}
	}
	st := kmsg.NewAddPartitionsToTxnResponseTransaction()
	st.TransactionalID = t.TransactionalID
	for _, rt := range t.Topics {
		tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		tt.Topic = rt.Topic
		for _, p := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: p}
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[tp]
			if unknown[tp] {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			tt.Partitions = append(tt.Partitions, sp)
		}
		st.Topics = append(st.Topics, tt)
	}
	return st
}

// aclAddPartitionsToTxn: v0-3 need WRITE on the transactional id and on
// every topic (one topic refused refuses the request: the others get
// OPERATION_NOT_ATTEMPTED, as in Kafka); v4+ is the brokers' API and
// needs CLUSTER_ACTION.
func aclAddPartitionsToTxn(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if c.authorizeCluster(auth.OpClusterAction) {
			return nil, nil
		}
		resp.ErrorCode = clusterDenied
		return resp, nil
	}
	idCode := c.txnIDCode(auth.OpWrite, req.TransactionalID)
	denied := idCode != 0
	topicCodes := make([]int16, len(req.Topics))
	for i, rt := range req.Topics {
		if topicCodes[i] = c.topicCode(auth.OpWrite, rt.Topic); topicCodes[i] != 0 {
			denied = true
		}
	}
	if !denied {
		return nil, nil
	}
	for i, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		code := kerr.OperationNotAttempted.Code
		switch {
		case idCode != 0:
			code = idCode
		case topicCodes[i] != 0:
			code = topicCodes[i]
		}
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	c.s.log.Debug("AddPartitionsToTxn refused", "transactional_id", req.TransactionalID, "principal", c.principal, "why", fmt.Sprintf("id code %d", idCode))
	return resp, nil
}
