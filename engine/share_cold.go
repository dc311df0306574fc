package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/resp"
)

// Share groups across the cold tier. An archived segment whose stream has
// left Redis has no consumer group, so korvet keeps the delivery state of
// its records itself, in the hash keys.ShareCold: "next" (the next offset
// never acquired) and "o:<offset>" -> "<a|r>,<delivery count>,<lock
// deadline unix ms>,<member>" for each record acquired (a) or released
// (r); a finished record has no field. Operations on one share-partition
// are serialized by its sharePart lock, so read-modify-write is safe.
//
// When a segment leaves Redis while a share group still has records in
// flight on it (its consumer group dies with the stream), korvet cannot
// tell which of its records were acknowledged: it delivers the segment
// again from its base (at least once, as Kafka promises).

type coldAcq struct {
	off   int64
	count int16
	idx   int // into ShareRecords.Records
}

type coldRec struct {
	released bool
	count    int
	deadline int64
	member   string
}

func (r coldRec) encode() string {
	st := "a"
	if r.released {
		st = "r"
	}
	return st + "," + strconv.Itoa(r.count) + "," + strconv.FormatInt(r.deadline, 10) + "," + r.member
}

func parseColdRec(v string) (coldRec, bool) {
	parts := strings.SplitN(v, ",", 4)
	if len(parts) != 4 {
		return coldRec{}, false
	}
	n, err1 := strconv.Atoi(parts[1])
	d, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return coldRec{}, false
	}
	return coldRec{released: parts[0] == "r", count: n, deadline: d, member: parts[3]}, true
}

// coldState is a share-partition's cold hash as read.
type coldState struct {
	next int64 // -1: not set
	recs map[int64]coldRec
}

func (e *Engine) loadCold(ctx context.Context, key string) (coldState, error) {
	st := coldState{next: -1, recs: map[int64]coldRec{}}
	r, err := e.rc.Do(ctx, "HGETALL", key)
	if err != nil {
		return st, fmt.Errorf("%w: share cold state: %v", ErrStorageUnavailable, err)
	}
	if err := r.Err(); err != nil {
		return st, fmt.Errorf("share cold state: %w", err)
	}
	var f []resp.Reply
	f = r.Elems(f)
	for i := 0; i+1 < len(f); i += 2 {
		name, v := string(f[i].Bytes()), string(f[i+1].Bytes())
		if name == "next" {
			st.next, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		if o, ok := strings.CutPrefix(name, "o:"); ok {
			off, err := strconv.ParseInt(o, 10, 64)
			rec, ok := parseColdRec(v)
			if err == nil && ok {
				st.recs[off] = rec
			}
		}
	}
	return st, nil
}

func coldField(off int64) string { return "o:" + strconv.FormatInt(off, 10) }

// shareAcquireCold acquires up to n records of an archived segment for a
// member; done reports that nothing in the segment is left to deliver or
// in flight.
func (e *Engine) shareAcquireCold(ctx context.Context, group, member string, p *Partition, sg Segment, set shareSettings, n int, out *ShareRecords) (got []coldAcq, done bool, err error) {
	key := e.k.ShareCold(group, p.t.name, p.id)
	stateKey := e.k.SharePartition(group, p.t.name, p.id)
	st, err := e.loadCold(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if st.next < 0 {
		// The segment left Redis under the share group: from where the
		// group started, or the segment's base.
		from := sg.Base
		if r, err := e.rc.Do(ctx, "HGET", stateKey, "start"); err == nil && !r.IsNil() {
			if s, err := strconv.ParseInt(string(r.Bytes()), 10, 64); err == nil {
				from = max(from, s)
			}
		}
		st.next = from
	}
	st.next = max(st.next, sg.Base, p.LogStart())
	now := time.Now().UnixMilli()
	var pl resp.Pipeline
	var offs []int64
	for off := range st.recs {
		if off >= sg.Base && off <= sg.Last {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	var archived, redelivered int
	remaining := 0
	for _, off := range offs {
		rec := st.recs[off]
		if !rec.released && rec.deadline > now {
			remaining++
			continue
		}
		if rec.count >= set.limit {
			pl.Cmd("HDEL", key, coldField(off))
			archived++
			continue
		}
		if len(got) >= n {
			remaining++
			continue
		}
		recs, txns, err := p.readCold(ctx, sg, off, 1)
		if err != nil {
			return nil, false, fmt.Errorf("share acquire cold %s/%d at %d: %w", p.t.name, p.id, off, err)
		}
		if len(recs) == 0 || recs[0].Offset != off {
			pl.Cmd("HDEL", key, coldField(off)) // gone (retention)
			continue
		}
		rec = coldRec{count: rec.count + 1, deadline: now + set.lock.Milliseconds(), member: member}
		pl.Cmd("HSET", key, coldField(off), rec.encode())
		got = append(got, coldAcq{off, int16(rec.count), len(out.Records)})
		out.Records = append(out.Records, recs[0])
		out.Codecs = append(out.Codecs, 0)
		out.Txns = appendTxns(out.Txns, txns, 1)
		redelivered++
		remaining++
	}
	for st.next <= sg.Last && len(got) < n && remaining < e.opts.Share.MaxPartitionLocks {
		recs, txns, err := p.readCold(ctx, sg, st.next, 1<<20)
		if err != nil {
			return nil, false, fmt.Errorf("share acquire cold %s/%d at %d: %w", p.t.name, p.id, st.next, err)
		}
		if len(recs) == 0 {
			st.next = sg.Last + 1
			break
		}
		for i, r := range recs {
			if r.Offset < st.next || r.Offset > sg.Last {
				continue
			}
			if len(got) >= n || remaining >= e.opts.Share.MaxPartitionLocks {
				break
			}
			rec := coldRec{count: 1, deadline: now + set.lock.Milliseconds(), member: member}
			pl.Cmd("HSET", key, coldField(r.Offset), rec.encode())
			got = append(got, coldAcq{r.Offset, 1, len(out.Records)})
			out.Records = append(out.Records, r)
			out.Codecs = append(out.Codecs, 0)
			if len(txns) > 0 {
				out.Txns = append(out.Txns, txns[i])
			} else {
				out.Txns = appendTxns(out.Txns, nil, 1)
			}
			st.next = r.Offset + 1
			remaining++
		}
	}
	pl.Cmd("HSET", key, "next", st.next)
	if len(got) > 0 {
		pl.Cmd("HINCRBY", stateKey, "deliveries", len(got))
	}
	if redelivered > 0 {
		pl.Cmd("HINCRBY", stateKey, "redeliveries", redelivered)
	}
	if archived > 0 {
		pl.Cmd("HINCRBY", stateKey, "archived_limit", archived)
	}
	if err := e.execAll(ctx, &pl); err != nil {
		return nil, false, fmt.Errorf("share acquire cold %s/%d: %w", p.t.name, p.id, err)
	}
	return got, st.next > sg.Last && remaining == 0, nil
}

// shareAckCold applies acknowledgements to cold records; like the Redis
// script, all or nothing.
func (e *Engine) shareAckCold(ctx context.Context, group, member string, p *Partition, runs []share.AckRun, set shareSettings) error {
	key := e.k.ShareCold(group, p.t.name, p.id)
	stateKey := e.k.SharePartition(group, p.t.name, p.id)
	st, err := e.loadCold(ctx, key)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	for _, r := range runs {
		for off := r.First; off <= r.Last; off++ {
			rec, ok := st.recs[off]
			if !ok || rec.released || rec.member != member || rec.deadline <= now {
				return fmt.Errorf("%w: offset %d on %s/%d", share.ErrInvalidRecordState, off, p.t.name, p.id)
			}
		}
	}
	var pl resp.Pipeline
	counts := map[string]int{}
	for _, r := range runs {
		for off := r.First; off <= r.Last; off++ {
			rec := st.recs[off]
			switch r.Type {
			case share.AckAccept:
				pl.Cmd("HDEL", key, coldField(off))
				counts["accepted"]++
			case share.AckReject:
				pl.Cmd("HDEL", key, coldField(off))
				counts["rejected"]++
			case share.AckRelease:
				if rec.count >= set.limit {
					pl.Cmd("HDEL", key, coldField(off))
					counts["archived_limit"]++
					continue
				}
				rec.released, rec.deadline, rec.member = true, 0, ""
				pl.Cmd("HSET", key, coldField(off), rec.encode())
				counts["released"]++
			case share.AckRenew:
				rec.deadline = now + set.lock.Milliseconds()
				pl.Cmd("HSET", key, coldField(off), rec.encode())
				counts["renewed"]++
			}
		}
	}
	for name, n := range counts {
		pl.Cmd("HINCRBY", stateKey, name, n)
	}
	if pl.Len() == 0 {
		return nil
	}
	return e.execAll(ctx, &pl)
}

// shareReleaseCold releases the cold records a member holds.
func (e *Engine) shareReleaseCold(ctx context.Context, group, member string, p *Partition, set shareSettings) error {
	key := e.k.ShareCold(group, p.t.name, p.id)
	st, err := e.loadCold(ctx, key)
	if err != nil {
		return err
	}
	var pl resp.Pipeline
	for off, rec := range st.recs {
		if rec.released || rec.member != member {
			continue
		}
		if rec.count >= set.limit {
			pl.Cmd("HDEL", key, coldField(off))
			pl.Cmd("HINCRBY", e.k.SharePartition(group, p.t.name, p.id), "archived_limit", 1)
			continue
		}
		rec.released, rec.deadline, rec.member = true, 0, ""
		pl.Cmd("HSET", key, coldField(off), rec.encode())
	}
	if pl.Len() == 0 {
		return nil
	}
	return e.execAll(ctx, &pl)
}

// shareColdState returns the records in flight in cold segments at or
// after the cursor, and the start offset there (-1 when the cold part is
// done).
func (e *Engine) shareColdState(ctx context.Context, group string, p *Partition, seg int64) (inflight, start int64, err error) {
	coldEnd := int64(-1)
	for _, sg := range p.Segments() {
		if sg.ID >= seg && !sg.Local {
			coldEnd = max(coldEnd, sg.Last)
		}
	}
	if coldEnd < 0 {
		return 0, -1, nil
	}
	st, err := e.loadCold(ctx, e.k.ShareCold(group, p.t.name, p.id))
	if err != nil {
		return 0, -1, err
	}
	start = -1
	for off := range st.recs {
		inflight++
		if start < 0 || off < start {
			start = off
		}
	}
	if start < 0 && st.next >= 0 && st.next <= coldEnd {
		start = st.next
	}
	return inflight, start, nil
}
