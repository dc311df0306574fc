package kafkawire

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/kafkawire/batch"
)

// produceWait is a partition append the response waits for.
type produceWait struct {
	rp   *kmsg.ProduceResponseTopicPartition
	p    *engine.Partition
	pend *engine.Pending
	dec  *batchDecoder
}

// batchDecoder is a pooled decoder with its batch slice: the records of a
// produce point into it until the append is committed.
type batchDecoder struct {
	batch.Decoder
	batches []batch.Batch
}

// handleProduce decodes every partition's batches and queues them on the
// partitions right away, in request order; the returned func waits for
// Redis to commit them.
//
// What the batches of the whole request decompress to is bounded by
// Options.MaxProduceDecompressedBytes: each partition's decoder gets only
// what is left, and stops inflating when that runs out.
func handleProduce(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	eng := c.s.eng
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	budget := c.s.opts.MaxProduceDecompressedBytes
	left := budget
	dups := duplicatePartitions(req)
	var waits []produceWait
	hints := &leaderHints{c: c}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *engine.Topic
		terr := int16(0)
		var terrMsg *string
		if req.Version >= 13 {
			if t = eng.TopicByID(rt.TopicID); t == nil {
				terr = kerr.UnknownTopicID.Code
			}
		} else {
			var err error
			if t, err = eng.EnsureTopic(ctx, rt.Topic); err != nil {
				terr, terrMsg = errorCode(err), errMsg(err)
			}
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rq := &rt.Partitions[pi]
			rp := &st.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = rq.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if terr != 0 {
				rp.ErrorCode, rp.ErrorMessage = terr, terrMsg
				continue
			}
			if dups != nil && dups[partKey{rt.Topic, rt.TopicID, rq.Partition}] > 1 {
				// Kafka answers every row of a partition named twice with
				// INVALID_REQUEST (as its ListOffsets does); none is
				// stored, as which one would win is anyone's guess.
				rp.ErrorCode = kerr.InvalidRequest.Code
				rp.ErrorMessage = errMsg(fmt.Errorf("partition %d of topic %s is listed more than once in this produce request", rq.Partition, t.Name()))
				continue
			}
			p := t.Partition(rq.Partition)
			if p == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if t.Internal() {
				rp.ErrorCode = kerr.InvalidTopicException.Code
				rp.ErrorMessage = errMsg(fmt.Errorf("%s is internal: clients cannot write to it", t.Name()))
				continue
			}
			if code, leader, epoch := leaderCode(p, -1); code != 0 {
				// Not decoded: the client sends it again to the leader.
				rp.ErrorCode = code
				rp.ErrorMessage = errMsg(fmt.Errorf("broker %d does not lead partition %d of topic %s (leader %d, epoch %d)", eng.NodeID(), rq.Partition, t.Name(), leader, epoch))
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = hints.hint(code, leader, epoch)
				continue
			}
			if max := t.MaxMessageBytes(); int64(len(rq.Records)) > max+61 {
				// A lone record batch may be up to max.message.bytes plus
				// its header, as in Kafka.
				rp.ErrorCode = kerr.MessageTooLarge.Code
				rp.ErrorMessage = errMsg(fmt.Errorf("%d bytes of records exceed max.message.bytes %d of topic %s", len(rq.Records), max, t.Name()))
				continue
			}
			dec := c.s.decoders.Get().(*batchDecoder)
			// 0 would mean the decoder's default: with nothing left, room
			// for one byte refuses any compressed batch.
			dec.MaxDecompressed = max(left, 1)
			recs, prod, err := decodeProduce(dec, rq.Records, t, req.TransactionID)
			if err == nil && prod.Transactional && !p.HasOpenTxn(prod.ID, prod.Epoch) {
				// The first batch of the transaction here: the coordinator
				// must have the partition in the transaction. Produce v12+
				// is the KIP-890 flow (transaction.version 2), where this
				// batch adds the partition itself, beginning the
				// transaction; an older producer must have added it with
				// AddPartitionsToTxn.
				verify := c.s.opts.VerifyTxn
				switch {
				case verify != nil:
				case req.Version >= 12:
					verify = eng.Txns().AddPartitionImplicit
				default:
					verify = eng.Txns().VerifyPartition
				}
				if err = verify(ctx, prod.TransactionalID, prod.ID, prod.Epoch, t.Name(), rq.Partition); errors.Is(err, engine.ErrProducerFenced) {
					// Produce answers a fenced producer as Kafka's log does.
					err = fmt.Errorf("%w: %w", engine.ErrInvalidProducerEpoch, err)
				}
			}
			if err != nil {
				c.s.decoders.Put(dec)
				if errors.Is(err, batch.ErrTooLarge) {
					// MESSAGE_TOO_LARGE, as Kafka answers a batch over
					// its size limit: a Java producer splits the batch
					// and tries again, which is what helps here too.
					err = fmt.Errorf("records for %s partition %d decompress to more than the %d bytes left of this request's budget (kafka.max_produce_decompressed_bytes = %d): %w", t.Name(), rq.Partition, max(left, 0), budget, err)
				}
				rp.ErrorCode = errorCode(err)
				rp.ErrorMessage = errMsg(err)
				c.s.log.Debug("produce rejected", "topic", t.Name(), "partition", rq.Partition, "err", err)
				continue
			}
			left -= dec.Decompressed()
			c.decoded += int64(dec.Decompressed())
			waits = append(waits, produceWait{rp: rp, p: p, pend: p.AppendBatchAcks(prod, codecOf(dec.batches), recs, req.Acks == -1), dec: dec})
		}
	}
	return func() kmsg.Response {
		for _, w := range waits {
			base, lat, err := w.pend.Wait(ctx)
			if err == nil {
				w.rp.BaseOffset, w.rp.LogAppendTime = base, lat
			} else {
				w.rp.ErrorCode = errorCode(err)
				w.rp.ErrorMessage = errMsg(err)
				if errors.Is(err, engine.ErrNotLeader) {
					// Fenced while queued: none of it was written.
					leader, epoch := w.p.Leader()
					w.rp.CurrentLeader.LeaderID, w.rp.CurrentLeader.LeaderEpoch = hints.hint(w.rp.ErrorCode, leader, epoch)
				}
			}
			w.rp.LogStartOffset = w.p.LogStart()
			c.s.decoders.Put(w.dec)
		}
		if req.Version >= 10 {
			// KIP-951: where the partitions that moved went, so that the
			// client retries there without a metadata round trip.
			for _, n := range hints.endpoints() {
				resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: n.id, Host: n.host, Port: n.port, Rack: n.rack})
			}
		} else {
			clearProduceHints(resp)
		}
		if req.Acks == 0 {
			return nil
		}
		return resp
	}
}

// clearProduceHints takes CurrentLeader out of an answer whose version
// has no such field (before v10): kmsg writes the tag on any flexible
// version.
func clearProduceHints(resp *kmsg.ProduceResponse) {
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			resp.Topics[ti].Partitions[pi].CurrentLeader = kmsg.NewProduceResponseTopicPartitionCurrentLeader()
		}
	}
}

// produceServedFrom is the oldest Produce version korvet serves: v3
// (Kafka 0.11) brought record batch v2. Older versions are advertised all
// the same, for librdkafka (see apiTable), and refused.
const produceServedFrom = 3

// refuseOldProduce answers a Produce request older than produceServedFrom
// with UNSUPPORTED_VERSION on every partition, without looking at its
// records or topics: nothing is stored or created. The message goes to
// the log only, as these versions have no field for it.
func (c *conn) refuseOldProduce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	msg := fmt.Sprintf("Produce v%d is not supported: korvet takes Produce v%d and later (record batch v2)", req.Version, produceServedFrom)
	if !c.oldProduceLogged {
		// Once per connection: a client may retry without end.
		c.oldProduceLogged = true
		c.s.log.Warn("refusing old produce requests on this connection", "remote", c.nc.RemoteAddr(), "client", c.clientID, "version", req.Version, "err", msg)
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rp := &st.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = rt.Partitions[pi].Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			rp.ErrorCode = kerr.UnsupportedVersion.Code
		}
	}
	return resp
}

// partKey names a partition of a produce request: by topic name, or by
// topic id from version 13 (the other is then empty).
type partKey struct {
	topic string
	id    [16]byte
	p     int32
}

// duplicatePartitions counts the rows of each partition of req; nil when
// it names at most one partition, the common case.
func duplicatePartitions(req *kmsg.ProduceRequest) map[partKey]int {
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	if n < 2 {
		return nil
	}
	m := make(map[partKey]int, n)
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			m[partKey{rt.Topic, rt.TopicID, rt.Partitions[j].Partition}]++
		}
	}
	return m
}

// decodeProduce decodes and checks a partition's record batches. The
// records point into dec's buffers. Batches of an idempotent producer carry
// its id and sequence, which the engine checks; a request mixing producers
// in one partition is refused, as Kafka only ever sends one batch there.
func decodeProduce(dec *batchDecoder, b []byte, t *engine.Topic, txnID *string) ([]record.Record, engine.Producer, error) {
	prod := engine.NoProducer
	batches, err := dec.Decode(b, dec.batches[:0])
	dec.batches = batches
	if err != nil {
		return nil, prod, fmt.Errorf("records for %s: %w", t.Name(), err)
	}
	var recs []record.Record
	for i := range batches {
		bt := &batches[i]
		if bt.Control() {
			return nil, prod, fmt.Errorf("%w: control batches are written by the broker, not produced", engine.ErrInvalidRecord)
		}
		if bt.Transactional() {
			switch {
			case bt.ProducerID < 0:
				return nil, prod, fmt.Errorf("%w: a transactional batch without a producer id", engine.ErrInvalidRecord)
			case txnID == nil || *txnID == "":
				return nil, prod, fmt.Errorf("%w: a transactional batch in a produce request without a transactional id", engine.ErrInvalidRecord)
			}
		}
		if bt.ProducerID >= 0 {
			if len(batches) > 1 {
				return nil, prod, fmt.Errorf("%w: an idempotent producer sends one batch per partition", engine.ErrInvalidRecord)
			}
			prod = engine.Producer{ID: bt.ProducerID, Epoch: bt.ProducerEpoch, FirstSeq: bt.BaseSequence}
			if bt.Transactional() {
				prod.Transactional, prod.TransactionalID = true, *txnID
			}
		}
		if len(batches) == 1 {
			recs = bt.Records
		} else {
			recs = append(recs, bt.Records...)
		}
	}
	if len(recs) == 0 {
		return nil, prod, fmt.Errorf("%w: no records", batch.ErrCorrupt)
	}
	if t.Compacted() {
		for i := range recs {
			if recs[i].Key == nil {
				return nil, prod, fmt.Errorf("%w: compacted topic %s needs a key on every record", engine.ErrInvalidRecord, t.Name())
			}
		}
	}
	return recs, prod, nil
}

// codecOf is the codec a partition's records came compressed with, kept so
// that fetches answer with the same compression (the first batch's, in the
// rare request that mixes codecs).
func codecOf(batches []batch.Batch) int8 {
	if len(batches) == 0 {
		return 0
	}
	return int8(batches[0].Compression())
}

// aclProduce: WRITE on each topic, and CREATE on one it would create.
func aclProduce(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ProduceRequest)
	if id := req.TransactionID; id != nil && *id != "" && !c.authorize(auth.OpWrite, auth.ResTransactionalID, *id) {
		// As Kafka: a transactional produce needs WRITE on its id, and
		// every partition is refused without it.
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, p := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, kerr.TransactionalIDAuthorizationFailed.Code
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	var out []refused[kmsg.ProduceRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.ProduceRequestTopic) int16 {
		name := t.Topic
		if req.Version >= 13 {
			name = c.topicName("", t.TopicID)
		}
		switch {
		case name == "":
			return 0
		case !c.authorize(auth.OpWrite, auth.ResTopic, name), req.Version < 13 && c.autoCreates(name):
			return topicDenied
		}
		return 0
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ProduceResponse)
		for _, o := range out {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = o.item.Topic, o.item.TopicID
			for _, p := range o.item.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
