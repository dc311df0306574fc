package kafkawire

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/kafkawire/batch"
)

// maxFetchWait bounds how long a fetch may wait for data, whatever the
// client asks.
const maxFetchWait = 30 * time.Second

// maxFetchResponseBytes caps the record bytes of one fetch response,
// whatever max_bytes asks (clients default to 50 MB). As in Kafka, the
// first partition still returns at least one batch when that is larger.
const maxFetchResponseBytes = 64 << 20

// fetchLimit is the record bytes a fetch may return.
func fetchLimit(req *kmsg.FetchRequest) int {
	if req.Version < 3 || req.MaxBytes <= 0 {
		return maxFetchResponseBytes
	}
	return min(int(req.MaxBytes), maxFetchResponseBytes)
}

// handleFetch answers a fetch: it reads what is there and, when that is
// less than min_bytes, waits until a partition it asked for gets new
// records or max_wait passes. korvet does not keep fetch sessions (it
// answers session id 0), so clients send full fetch requests.
func handleFetch(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
		deadline := time.Now().Add(wait)

		// Resolve partitions once, and watch them before the first read so
		// no append between the read and the wait is missed.
		parts := make([][]*engine.Partition, len(req.Topics))
		wake := make(chan struct{}, 1)
		var unwatch []func()
		defer func() {
			for _, u := range unwatch {
				u()
			}
		}()
		for ti := range req.Topics {
			rt := &req.Topics[ti]
			var t *engine.Topic
			if req.Version >= 13 {
				t = eng.TopicByID(rt.TopicID)
			} else {
				t = eng.Topic(rt.Topic)
			}
			parts[ti] = make([]*engine.Partition, len(rt.Partitions))
			if t == nil {
				continue
			}
			for pi := range rt.Partitions {
				if p := t.Partition(rt.Partitions[pi].Partition); p != nil {
					parts[ti][pi] = p
					if wait > 0 {
						unwatch = append(unwatch, p.Watch(wake))
					}
				}
			}
		}
		for {
			resp, n, failed := c.fetchOnce(ctx, req, parts)
			if failed || n >= int(req.MinBytes) || n > 0 && req.MinBytes <= 0 || !time.Now().Before(deadline) {
				return resp
			}
			timer := time.NewTimer(time.Until(deadline))
			stopping := false
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
				stopping = true
			case <-c.s.quit:
				// The server is stopping: answer what we have now.
				stopping = true
			}
			timer.Stop()
			if stopping {
				return resp
			}
		}
	}
}

// fetchOnce builds a fetch response from what the partitions hold now. It
// returns the bytes of records included and whether any partition failed
// (an error answer is returned without waiting).
func (c *conn) fetchOnce(ctx context.Context, req *kmsg.FetchRequest, parts [][]*engine.Partition) (*kmsg.FetchResponse, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	budget := fetchLimit(req)
	total := 0
	failed := false
	hints := &leaderHints{c: c}
	defer func() {
		if req.Version >= 16 {
			// KIP-951: where the partitions that moved went.
			for _, n := range hints.endpoints() {
				resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: n.id, Host: n.host, Port: n.port, Rack: n.rack})
			}
		} else {
			clearFetchHints(resp)
		}
	}()
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rq := &rt.Partitions[pi]
			sp := &st.Partitions[pi]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rq.Partition
			// An empty record set, not a null one: librdkafka rejects a
			// null set and would never see the end of the partition.
			sp.RecordBatches = []byte{}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			p := parts[ti][pi]
			if p == nil {
				if req.Version >= 13 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				} else {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				failed = true
				continue
			}
			if code, leader, epoch := leaderCode(p, rq.CurrentLeaderEpoch); code != 0 {
				// Fetch is served by the leader only; see README,
				// "Several brokers".
				sp.ErrorCode = code
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = hints.hint(code, leader, epoch)
				failed = true
				continue
			}
			limit := min(int(rq.PartitionMaxBytes), budget)
			if total == 0 && limit <= 0 {
				// KIP-74: the first partition returns at least one record
				// whatever the limits say.
				limit = 1
			}
			// The LSO before the high watermark: it never passes it, and a
			// marker committed in between only raises both.
			lso := p.LastStable()
			hw, start := p.HighWatermark(), p.LogStart()
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, min(lso, hw), start
			if limit <= 0 {
				continue
			}
			// read_committed reads below the LSO only.
			below := int64(-1)
			if req.IsolationLevel == 1 {
				below = lso
			}
			// KIP-74: the first partition to return records returns its
			// first batch whole, whatever the limits say, as Kafka does;
			// clients rely on it to get past a batch larger than their
			// limits. Bounded by the topic's max.message.bytes and the
			// response cap.
			whole := 0
			if total == 0 {
				whole = int(min(p.Topic().MaxMessageBytes(), maxFetchResponseBytes))
			}
			res := c.takeAhead(ctx, p, rq.FetchOffset, limit, whole, below)
			var err error
			if res == nil {
				res, err = p.ReadWholeBelow(ctx, rq.FetchOffset, limit, whole, below)
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				failed = true
				continue
			}
			sp.HighWatermark, sp.LogStartOffset = res.HighWatermark, res.LogStart
			sp.LastStableOffset = min(lso, res.HighWatermark)
			if n := len(res.Records); n > 0 {
				// The next records are read while this answer is built
				// and the consumer takes it, unless the answer may read
				// on for compression (fetchBatches): then after it.
				early := res.Cut() && !allCompressed(res.Codecs, n)
				if early {
					c.startAhead(ctx, req, p, res.Records[n-1].Offset+1, limit, res.Held())
				}
				b, last, err := c.s.fetchBatches(ctx, p, res, limit, below)
				if err != nil {
					sp.ErrorCode = kerr.UnknownServerError.Code
					failed = true
				} else {
					sp.RecordBatches = b
					total += len(b)
					budget -= len(b)
					if req.IsolationLevel == 1 && req.Version >= 4 {
						sp.AbortedTransactions = abortedOf(p, rq.FetchOffset, last)
					}
					if !early && res.Cut() {
						c.startAhead(ctx, req, p, last+1, limit, res.Held())
					}
				}
			}
			res.Release()
		}
	}
	return resp, total, failed
}

// clearFetchHints takes CurrentLeader out of an answer whose version has
// no such field (before v16): kmsg writes the tag on any flexible version.
func clearFetchHints(resp *kmsg.FetchResponse) {
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			resp.Topics[ti].Partitions[pi].CurrentLeader = kmsg.NewFetchResponseTopicPartitionCurrentLeader()
		}
	}
}

// fetchBatches builds the record batches of a read. Kafka's byte limits
// count batches as stored, compressed; korvet reads by uncompressed size,
// so when what it read compresses well below the limit it reads on once,
// as much again as the compression ratio allows, and answers with that if
// it still fits: consumers then see a compressed batch whole, as produced.
//
// below bounds the read on (-1: none), as the read was; last is the
// offset of the last record returned.
func (s *Server) fetchBatches(ctx context.Context, p *engine.Partition, res *engine.ReadResult, limit int, below int64) (b []byte, last int64, err error) {
	last = res.Records[len(res.Records)-1].Offset
	b, err = s.buildBatches(res.Records, res.Codecs, res.Txns, res.Size())
	if err != nil || len(b) >= limit/2 || !allCompressed(res.Codecs, len(res.Records)) {
		return b, last, err
	}
	next := last + 1
	if next >= res.HighWatermark || below >= 0 && next >= below {
		return b, last, nil
	}
	raw := 0
	for i := range res.Records {
		raw += res.Records[i].Size()
	}
	more, err := p.ReadBelow(ctx, next, min((limit-len(b))*max(raw/max(len(b), 1), 1), 16*limit), below)
	if err != nil || len(more.Records) == 0 {
		if more != nil {
			more.Release()
		}
		return b, last, nil // what was read first is a fine answer
	}
	defer more.Release()
	recs := append(slices.Clip(res.Records), more.Records...)
	codecs := append(slices.Clip(res.Codecs), more.Codecs...)
	var txns []record.Txn
	if len(res.Txns) > 0 || len(more.Txns) > 0 {
		txns = append(fillTxns(slices.Clip(res.Txns), len(res.Records)), fillTxns(more.Txns, len(more.Records))...)
	}
	if b2, err := s.buildBatches(recs, codecs, txns, res.Size()+more.Size()); err == nil && len(b2) <= limit {
		s.bufs.put(b)
		return b2, more.Records[len(more.Records)-1].Offset, nil
	} else if err == nil {
		s.bufs.put(b2)
	}
	return b, last, nil
}

// fillTxns is txns, or n records of no transaction when it is empty.
func fillTxns(txns []record.Txn, n int) []record.Txn {
	if len(txns) > 0 {
		return txns
	}
	out := make([]record.Txn, n)
	for i := range out {
		out[i].ProducerID = -1
	}
	return out
}

// abortedOf is a read_committed fetch's aborted-transaction list: those
// that may have records in [from, last].
func abortedOf(p *engine.Partition, from, last int64) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	ab := p.AbortedTxns(from, last)
	if len(ab) == 0 {
		return nil
	}
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(ab))
	for i, a := range ab {
		out[i] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		out[i].ProducerID, out[i].FirstOffset = a.ProducerID, a.FirstOffset
	}
	return out
}

func allCompressed(codecs []int8, n int) bool {
	if len(codecs) != n {
		return false
	}
	for _, c := range codecs {
		if c == 0 {
			return false
		}
	}
	return true
}

// noLeaderEpoch is the partition leader epoch of the batches korvet
// serves: unknown. A client keeps a batch's epoch as its position's epoch
// and, after a leader change, asks OffsetForLeaderEpoch where that epoch
// ends to detect a truncated log. korvet's log is never truncated (a
// deposed leader cannot write, and every broker reads the same Redis), and
// it does not record which epoch wrote each record: a wrong epoch could
// make a client see loss where there is none, while an unknown one skips
// a check that cannot fail here.
const noLeaderEpoch = -1

// buildBatches turns records into record batches: one per run of records
// that came with the same compression and transaction, compressed again
// with it, so consumers get the bandwidth savings their producers chose.
// codecs may be empty (all uncompressed), txns too (no transactions).
// A transactional batch carries its producer and the transactional bit,
// a marker is a control batch of its own, as Kafka writes them; base
// sequence -1 (clients do not check sequences on consume).
//
// size is what the records count (Record.Size; 0: unknown), to size the
// answer's buffer, which comes from s.bufs.
func (s *Server) buildBatches(recs []record.Record, codecs []int8, txns []record.Txn, size int) ([]byte, error) {
	enc := s.encoders.Get().(*batch.Encoder)
	defer s.encoders.Put(enc)
	// Per record, its length, attributes and deltas, a few bytes more
	// than Record.Size counts for them; per batch its header.
	out := s.bufs.get(size + 8*len(recs) + batch.BatchHeaderSize)
	hasCodecs, hasTxns := len(codecs) == len(recs), len(txns) == len(recs)
	for i := 0; i < len(recs); {
		codec := int8(0)
		if hasCodecs {
			codec = codecs[i]
		}
		txn := record.Txn{ProducerID: -1}
		if hasTxns {
			txn = txns[i]
		}
		j := i + 1
		for j < len(recs) && (!hasCodecs || codecs[j] == codec) && (!hasTxns || txns[j] == txn) && !txn.Control {
			j++
		}
		opts := batch.BuildOptions{Compression: batch.Compression(codec), PartitionLeaderEpoch: noLeaderEpoch}
		if txn.ProducerID >= 0 {
			opts.HasProducer, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, txn.ProducerID, txn.Epoch, -1
			opts.Attributes = batch.AttrTransactional
			if txn.Control {
				opts.Attributes |= batch.AttrControl
				opts.Compression = batch.None
			}
		}
		var err error
		out, err = enc.AppendBatch(out, recs[i:j], opts)
		if err != nil {
			return nil, fmt.Errorf("build batch at offset %d: %w", recs[i].Offset, err)
		}
		i = j
	}
	return out, nil
}

// aclFetch: READ on each topic.
func aclFetch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.FetchRequest)
	var out []refused[kmsg.FetchRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.FetchRequestTopic) int16 {
		name := t.Topic
		if req.Version >= 13 {
			name = c.topicName("", t.TopicID)
		}
		if name == "" {
			return 0
		}
		return c.topicCode(auth.OpRead, name)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.FetchResponse)
		for _, o := range out {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = o.item.Topic, o.item.TopicID
			for _, p := range o.item.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				sp.RecordBatches = []byte{}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
