package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/resp"
)

// SharePartitionState is what korvet (and Redis) know of a share group on
// one partition.
type SharePartitionState struct {
	Topic     string
	Partition int32
	// StartOffset is the share-partition start offset: no record below it
	// is available or in flight. -1 if the group has not started here.
	StartOffset int64
	InFlight    int64 // records acquired or released and not yet redelivered
	Lag         int64 // records at or after StartOffset not yet acknowledged
	// Counters since the share-partition started.
	Deliveries, Redeliveries, Accepted, Released, Rejected, ArchivedByLimit int64
}

// ShareState returns a share group's state on p.
func (e *Engine) ShareState(ctx context.Context, group string, p *Partition) (SharePartitionState, error) {
	st := SharePartitionState{Topic: p.t.name, Partition: p.id, StartOffset: -1}
	if err := p.refresh(ctx); err != nil {
		return st, err
	}
	sp := e.sharePartFor(group, p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	ok, err := sp.load(ctx, e, group, p)
	if err != nil || !ok {
		return st, err
	}
	segs := p.Segments()
	g := shareGroupName(group)
	var pl resp.Pipeline
	pl.Cmd("HGETALL", e.k.SharePartition(group, p.t.name, p.id))
	var local []Segment
	for _, sg := range segs {
		if sg.ID < sp.seg {
			continue
		}
		if !sg.Local {
			continue
		}
		local = append(local, sg)
		pl.Cmd("XPENDING", p.streamKey(sg.ID), g)
		pl.Cmd("XINFO", "GROUPS", p.streamKey(sg.ID))
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return st, fmt.Errorf("%w: share state: %v", ErrStorageUnavailable, err)
	}
	defer rs.Release()
	var f []resp.Reply
	f = rs.At(0).Elems(f)
	counters := map[string]*int64{"deliveries": &st.Deliveries, "redeliveries": &st.Redeliveries, "accepted": &st.Accepted,
		"released": &st.Released, "rejected": &st.Rejected, "archived_limit": &st.ArchivedByLimit}
	for i := 0; i+1 < len(f); i += 2 {
		if c := counters[string(f[i].Bytes())]; c != nil {
			*c, _ = strconv.ParseInt(string(f[i+1].Bytes()), 10, 64)
		}
	}
	hw := p.HighWatermark()
	cold, coldStart, err := e.shareColdState(ctx, group, p, sp.seg)
	if err != nil {
		return st, err
	}
	st.InFlight += cold
	start := coldStart
	for i, sg := range local {
		pend, info := rs.At(1+2*i), rs.At(2+2*i)
		var pf []resp.Reply
		pf = pend.Elems(pf)
		var n int64
		if len(pf) >= 2 {
			n, _ = pf[0].Int()
		}
		st.InFlight += n
		if start >= 0 {
			continue
		}
		if n > 0 {
			start, _, _ = entry.ParseID(pf[1].Bytes())
			continue
		}
		// Nothing in flight: the start is past what was delivered, if
		// anything is left in this segment.
		last := hw - 1
		for j := range segs {
			if segs[j].ID == sg.ID && j < len(segs)-1 {
				last = segs[j+1].Base - 1
			}
		}
		next, found := lastDelivered(info, g)
		if !found {
			next = sg.Base
		}
		if next <= last {
			start = max(next, sg.Base)
		}
	}
	if start < 0 {
		start = hw
	}
	st.StartOffset = max(start, p.LogStart())
	// Lag as Kafka counts it: records from the start offset on that are
	// not yet acknowledged (in flight ones included).
	st.Lag = max(hw-st.StartOffset, 0)
	return st, nil
}

// lastDelivered finds group g in an XINFO GROUPS reply and returns the
// offset after its last-delivered-id.
func lastDelivered(info resp.Reply, g string) (int64, bool) {
	if info.Err() != nil {
		return 0, false
	}
	var groups, kv []resp.Reply
	groups = info.Elems(groups)
	for _, gr := range groups {
		kv = gr.Elems(kv[:0])
		name, id := "", ""
		for i := 0; i+1 < len(kv); i += 2 {
			switch string(kv[i].Bytes()) {
			case "name":
				name = string(kv[i+1].Bytes())
			case "last-delivered-id":
				id = string(kv[i+1].Bytes())
			}
		}
		if name != g {
			continue
		}
		ms, seq, _ := strings.Cut(id, "-")
		off, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return 0, false
		}
		if off == 0 && seq == "0" {
			return 0, true
		}
		return off + 1, true
	}
	return 0, false
}

// ShareTopics lists the partitions a share group has state for.
func (e *Engine) ShareTopics(ctx context.Context, group string) (map[string][]int32, error) {
	r, err := e.rc.Do(ctx, "SMEMBERS", e.k.ShareIndex(group))
	if err != nil {
		return nil, fmt.Errorf("%w: share partitions: %v", ErrStorageUnavailable, err)
	}
	out := map[string][]int32{}
	r.ForEach(func(m resp.Reply) bool {
		s := string(m.Bytes())
		i := strings.LastIndexByte(s, ':')
		if i < 0 {
			return true
		}
		p, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err == nil {
			out[s[:i]] = append(out[s[:i]], int32(p))
		}
		return true
	})
	return out, nil
}

// AlterShareOffset moves a share group's start offset on p (the group must
// have no members): everything before is skipped, everything from it on is
// delivered again, delivery counts starting over.
func (e *Engine) AlterShareOffset(ctx context.Context, group string, p *Partition, offset int64) error {
	if d, ok := e.ShareDescribe(group); ok && len(d.Members) > 0 {
		return share.ErrGroupNotEmpty
	}
	if err := p.refresh(ctx); err != nil {
		return err
	}
	if offset < 0 || offset > p.HighWatermark() {
		return fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, p.LogStart(), p.HighWatermark())
	}
	if err := e.ensureShareGroup(ctx, group); err != nil {
		return err
	}
	sp := e.sharePartFor(group, p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := e.destroyShareGroups(ctx, group, p); err != nil {
		return err
	}
	return sp.initAt(ctx, e, group, p, offset)
}

// ensureShareGroup registers a share group (Alter creates an empty one).
func (e *Engine) ensureShareGroup(ctx context.Context, group string) error {
	if e.groups.Exists(group) {
		return fmt.Errorf("%w: %q is a consumer group", ErrGroupExists, group)
	}
	if err := e.registerShareGroup(ctx, group); err != nil {
		return err
	}
	e.share.Ensure(group)
	return nil
}

// destroyShareGroups removes the group's Redis consumer groups from p's
// segment streams and its share-partition state.
func (e *Engine) destroyShareGroups(ctx context.Context, group string, p *Partition) error {
	var pl resp.Pipeline
	for _, sg := range p.Segments() {
		if sg.Local {
			pl.Cmd("XGROUP", "DESTROY", p.streamKey(sg.ID), shareGroupName(group))
		}
	}
	pl.Cmd("DEL", e.k.SharePartition(group, p.t.name, p.id), e.k.ShareCold(group, p.t.name, p.id))
	pl.Cmd("SREM", e.k.ShareIndex(group), p.t.name+":"+strconv.Itoa(int(p.id)))
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("%w: reset share group %q on %s/%d: %v", ErrStorageUnavailable, group, p.t.name, p.id, err)
	}
	rs.Release() // XGROUP DESTROY on a missing stream errs: nothing to remove
	sp := e.sharePartFor(group, p)
	sp.loaded = false
	return nil
}

// DeleteShareOffsets removes a share group's state on a topic: the next
// fetch starts it over from share.auto.offset.reset.
func (e *Engine) DeleteShareOffsets(ctx context.Context, group, topic string) error {
	if d, ok := e.ShareDescribe(group); ok && len(d.Members) > 0 {
		return share.ErrGroupNotEmpty
	}
	t := e.Topic(topic)
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	for _, p := range t.Partitions() {
		sp := e.sharePartFor(group, p)
		sp.mu.Lock()
		err := e.destroyShareGroups(ctx, group, p)
		sp.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteShareGroup deletes an empty share group: its Redis consumer
// groups, share-partition state and configs.
func (e *Engine) DeleteShareGroup(ctx context.Context, group string) error {
	if err := e.share.Delete(group); err != nil {
		return err
	}
	parts, err := e.ShareTopics(ctx, group)
	if err != nil {
		return err
	}
	for topic, ps := range parts {
		t := e.Topic(topic)
		for _, id := range ps {
			if t != nil && t.Partition(id) != nil {
				if err := e.destroyShareGroups(ctx, group, t.Partition(id)); err != nil {
					return err
				}
				continue
			}
			if _, err := e.rc.Do(ctx, "DEL", e.k.SharePartition(group, topic, id), e.k.ShareCold(group, topic, id)); err != nil {
				return fmt.Errorf("%w: delete share group: %v", ErrStorageUnavailable, err)
			}
		}
	}
	var pl resp.Pipeline
	pl.Cmd("DEL", e.k.ShareIndex(group))
	pl.Cmd("HDEL", e.k.ShareGroups(), group)
	pl.Cmd("HDEL", e.k.GroupConfigs(), group)
	e.events.Append(&pl, events.GroupConfig, "group", group)
	if err := e.execAll(ctx, &pl); err != nil {
		return fmt.Errorf("delete share group %q: %w", group, err)
	}
	e.forgetShareParts(group)
	return nil
}

func nowMillis() int64 { return time.Now().UnixMilli() }
