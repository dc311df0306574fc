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
	"github.com/korvet/korvet/engine/share"
)

// shareFetchPoll is how often a waiting ShareFetch looks again for
// records whose lock expired or that another member released (new records
// wake it at once).
const shareFetchPoll = 200 * time.Millisecond

// responseLimit is what a fetch (Fetch or ShareFetch) may answer, reserved
// from the connection's budget before it runs; 0 for other requests.
func responseLimit(req kmsg.Request) int64 {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		return int64(fetchLimit(r))
	case *kmsg.ShareFetchRequest:
		return int64(shareFetchLimit(r))
	}
	return 0
}

// shareFetchLimit is the record bytes a ShareFetch may return.
func shareFetchLimit(req *kmsg.ShareFetchRequest) int {
	if req.MaxBytes <= 0 {
		return maxFetchResponseBytes
	}
	return min(int(req.MaxBytes), maxFetchResponseBytes)
}

// sharePartReq is one partition a share request names.
type sharePartReq struct {
	tp       share.TopicPartition
	acks     []share.AckBatch
	hasAcks  bool
	maxBytes int32
	ackCode  int16
	ackMsg   *string
}

// handleShareFetch answers a ShareFetch: share session bookkeeping,
// piggybacked acknowledgements, then records acquired for the member from
// the session's partitions (waiting up to MaxWait when there are none).
func handleShareFetch(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ShareFetchRequest)
	return func() kmsg.Response {
		eng := c.s.eng
		resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
		group, member := deref(req.GroupID), deref(req.MemberID)
		resp.AcquisitionLockTimeoutMillis = shareLockMillis(ctx, eng, group)
		if resp.ErrorCode = shareIDsError(eng, group, member); resp.ErrorCode != 0 {
			return resp
		}
		renew := req.Version >= 2 && req.IsRenewAck
		if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
		var reqParts []*sharePartReq
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				pr := &sharePartReq{tp: share.TopicPartition{TopicID: rt.TopicID, Partition: rp.Partition}, maxBytes: rp.PartitionMaxBytes}
				pr.hasAcks = len(rp.AcknowledgementBatches) > 0
				pr.acks = toAckBatches(rp.AcknowledgementBatches, func(b *kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
				})
				if renew && !pr.hasAcks {
					resp.ErrorCode = kerr.InvalidRequest.Code
					return resp
				}
				reqParts = append(reqParts, pr)
			}
		}
		key := share.SessionKey{Group: group, Member: member}
		coord := eng.Share()
		var session []share.TopicPartition
		var err error
		switch epoch := req.ShareSessionEpoch; {
		case epoch == -1:
			session, err = coord.CloseSession(key)
			if err != nil {
				resp.ErrorCode = shareErrorCode(err)
				return resp
			}
			c.shareAck(ctx, group, member, reqParts, share.AckReject)
			// Closing a session releases what the member still holds
			// on its partitions, at once.
			for _, tp := range session {
				if p := c.sharePartition(tp); p != nil {
					if err := eng.ShareRelease(ctx, group, member, p); err != nil {
						c.s.log.Warn("share session close: release failed", "group", group, "topic", p.Topic().Name(), "partition", p.ID(), "err", err)
					}
				}
			}
			addShareFetchParts(resp, reqParts, nil)
			return resp
		case epoch == 0:
			for _, pr := range reqParts {
				if pr.hasAcks {
					resp.ErrorCode = kerr.InvalidRequest.Code
					return resp
				}
			}
			tps := make([]share.TopicPartition, 0, len(reqParts))
			for _, pr := range reqParts {
				tps = append(tps, pr.tp)
			}
			session, err = coord.OpenSession(key, tps)
		default:
			var add, forget []share.TopicPartition
			for _, pr := range reqParts {
				add = append(add, pr.tp)
			}
			for _, ft := range req.ForgottenTopicsData {
				for _, p := range ft.Partitions {
					forget = append(forget, share.TopicPartition{TopicID: ft.TopicID, Partition: p})
				}
			}
			session, err = coord.UpdateSession(key, epoch, add, forget)
		}
		if err != nil {
			resp.ErrorCode = shareErrorCode(err)
			return resp
		}
		maxType := share.AckReject
		if renew {
			maxType = share.AckRenew
		}
		c.shareAck(ctx, group, member, reqParts, maxType)
		if renew {
			addShareFetchParts(resp, reqParts, nil)
			return resp
		}

		// Acquire from the session's partitions, starting at a rotating
		// one so that a small MaxRecords does not starve the others.
		type target struct {
			tp share.TopicPartition
			p  *engine.Partition
		}
		var targets []target
		errs := map[share.TopicPartition]int16{}
		slices.SortFunc(session, func(a, b share.TopicPartition) int {
			if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		for _, tp := range session {
			t := eng.TopicByID(tp.TopicID)
			switch {
			case t == nil:
				errs[tp] = kerr.UnknownTopicID.Code
			case !c.authorize(auth.OpRead, auth.ResTopic, t.Name()):
				errs[tp] = topicDenied
			case t.Partition(tp.Partition) == nil:
				errs[tp] = kerr.UnknownTopicOrPartition.Code
			case !t.Partition(tp.Partition).IsLeader():
				// Records are acquired on the partition's leader only,
				// as in Kafka: the client moves the partition there.
				errs[tp] = kerr.NotLeaderForPartition.Code
			default:
				targets = append(targets, target{tp, t.Partition(tp.Partition)})
			}
		}
		maxRecords := int(req.MaxRecords)
		if maxRecords <= 0 {
			maxRecords = 500
		}
		maxRecords = min(maxRecords, maxShareRecords)
		budget := shareFetchLimit(req)
		wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
		deadline := time.Now().Add(wait)
		wake := make(chan struct{}, 1)
		if wait > 0 {
			for _, tg := range targets {
				defer tg.p.Watch(wake)()
			}
		}
		// Until MinBytes are acquired (or MaxWait passes), partitions that
		// had nothing are tried again; each partition is acquired from
		// once per fetch, so its records and ranges stay in offset order.
		got := map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition{}
		total, bytes := 0, 0
		minBytes := max(int(req.MinBytes), 1)
		for {
			failed := false
			start := 0
			if len(targets) > 0 {
				start = int(max(req.ShareSessionEpoch, 0)) % len(targets)
			}
			for i := range targets {
				tg := targets[(start+i)%len(targets)]
				if total >= maxRecords || bytes >= budget {
					break
				}
				if got[tg.tp] != nil {
					continue
				}
				sp, n, b := c.shareFetchPartition(ctx, group, member, tg.p, maxRecords-total, budget-bytes, req)
				if sp == nil {
					continue
				}
				got[tg.tp] = sp
				total, bytes = total+n, bytes+b
				failed = failed || sp.ErrorCode != 0
			}
			if bytes >= minBytes || failed || !time.Now().Before(deadline) {
				break
			}
			timer := time.NewTimer(min(time.Until(deadline), shareFetchPoll))
			stopping := false
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
				stopping = true
			case <-c.s.quit:
				stopping = true
			case <-c.readDone:
				stopping = true
			}
			timer.Stop()
			if stopping {
				break
			}
		}
		hints := &leaderHints{c: c}
		for tp, code := range errs {
			sp := newSharePartition(tp.Partition)
			sp.ErrorCode = code
			if p := c.sharePartition(tp); p != nil {
				leader, epoch := p.Leader()
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = hints.hint(code, leader, epoch)
			}
			got[tp] = &sp
		}
		for _, n := range hints.endpoints() {
			resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: n.id, Host: n.host, Port: n.port, Rack: n.rack})
		}
		if req.ShareSessionEpoch == 0 {
			// The first answer of a session lists every partition.
			for _, tg := range targets {
				if got[tg.tp] == nil {
					sp := newSharePartition(tg.tp.Partition)
					got[tg.tp] = &sp
				}
			}
		}
		addShareFetchParts(resp, reqParts, got)
		return resp
	}
}

func newSharePartition(p int32) kmsg.ShareFetchResponseTopicPartition {
	sp := kmsg.NewShareFetchResponseTopicPartition()
	sp.Partition = p
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
	return sp
}

// shareFetchPartition acquires records of one partition and builds its
// answer: nil when nothing was acquired.
func (c *conn) shareFetchPartition(ctx context.Context, group, member string, p *engine.Partition, maxRecords, maxBytes int, req *kmsg.ShareFetchRequest) (*kmsg.ShareFetchResponseTopicPartition, int, int) {
	recs, err := c.s.eng.ShareAcquire(ctx, group, member, p, maxRecords, maxBytes)
	if err != nil {
		sp := newSharePartition(p.ID())
		sp.ErrorCode, sp.ErrorMessage = shareErrorCode(err), errMsg(err)
		c.s.log.Warn("share fetch failed", "group", group, "topic", p.Topic().Name(), "partition", p.ID(), "err", err)
		return &sp, 0, 0
	}
	defer recs.Release()
	if len(recs.Records) == 0 {
		return nil, 0, 0
	}
	b, err := c.s.buildBatches(recs.Records, recs.Codecs, recs.Txns, 0)
	sp := newSharePartition(p.ID())
	if err != nil {
		// The records stay acquired and are redelivered when their lock
		// expires.
		sp.ErrorCode, sp.ErrorMessage = kerr.UnknownServerError.Code, errMsg(fmt.Errorf("build batches: %w", err))
		return &sp, 0, 0
	}
	sp.Records = b
	batch := int64(0)
	if req.Version >= 1 && req.ShareAcquireMode == 0 && req.BatchSize > 0 {
		batch = int64(req.BatchSize)
	}
	for _, r := range recs.Ranges {
		for first := r.First; first <= r.Last; {
			last := r.Last
			if batch > 0 {
				last = min(last, first+batch-1)
			}
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = first, last, r.DeliveryCount
			sp.AcquiredRecords = append(sp.AcquiredRecords, ar)
			first = last + 1
		}
	}
	return &sp, len(recs.Records), len(b)
}

// sharePartition resolves a share session partition.
func (c *conn) sharePartition(tp share.TopicPartition) *engine.Partition {
	t := c.s.eng.TopicByID(tp.TopicID)
	if t == nil {
		return nil
	}
	return t.Partition(tp.Partition)
}

// shareAck applies the acknowledgements of each partition that carries
// some, recording the outcome in the partition's ackCode.
func (c *conn) shareAck(ctx context.Context, group, member string, parts []*sharePartReq, maxType int8) {
	for _, pr := range parts {
		if !pr.hasAcks {
			continue
		}
		p := c.sharePartition(pr.tp)
		if p == nil {
			pr.ackCode = kerr.UnknownTopicOrPartition.Code
			continue
		}
		if !c.authorize(auth.OpRead, auth.ResTopic, p.Topic().Name()) {
			pr.ackCode = topicDenied
			continue
		}
		if !p.IsLeader() {
			pr.ackCode = kerr.NotLeaderForPartition.Code
			continue
		}
		runs, err := share.ParseAcks(pr.acks, maxShareAckOffsets, maxType)
		if err == nil {
			err = c.s.eng.ShareAcknowledge(ctx, group, member, p, runs)
		}
		pr.ackCode, pr.ackMsg = shareErrorCode(err), errMsg(err)
	}
}

// addShareFetchParts puts fetched partitions and acknowledged ones into
// the response, one entry per partition.
func addShareFetchParts(resp *kmsg.ShareFetchResponse, reqParts []*sharePartReq, got map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition) {
	all := map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition{}
	for tp, sp := range got {
		all[tp] = sp
	}
	for _, pr := range reqParts {
		if !pr.hasAcks {
			continue
		}
		sp := all[pr.tp]
		if sp == nil {
			np := newSharePartition(pr.tp.Partition)
			sp = &np
			all[pr.tp] = sp
		}
		sp.AcknowledgeErrorCode, sp.AcknowledgeErrorMessage = pr.ackCode, pr.ackMsg
	}
	tps := make([]share.TopicPartition, 0, len(all))
	for tp := range all {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b share.TopicPartition) int {
		if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	for _, tp := range tps {
		n := len(resp.Topics)
		if n == 0 || resp.Topics[n-1].TopicID != tp.TopicID {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = tp.TopicID
			resp.Topics = append(resp.Topics, rt)
			n++
		}
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, *all[tp])
	}
}

// aclShareFetch: READ on the group; topics are checked per partition by
// the handler (a session names them by id across requests).
func aclShareFetch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ShareFetchRequest)
	if code := c.groupCode(auth.OpRead, deref(req.GroupID)); code != 0 {
		resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return nil, nil
}
