package engine

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/share"
	"github.com/korvet/korvet/resp"
)

// Share groups (KIP-932) on Redis consumer groups: see share_scripts.go
// for how delivery state maps to them. Membership and share sessions are
// in memory (package share); groups, their configs and each
// share-partition's cursor are in Redis.

// ShareOptions configure share groups.
type ShareOptions struct {
	// LockDuration is how long an acquired record stays locked to its
	// member before it is redelivered (group.share.record.lock.duration.ms).
	// Default 30s.
	LockDuration time.Duration
	// DeliveryLimit: a record delivered this many times is archived rather
	// than delivered again (group.share.delivery.count.limit). Default 5.
	DeliveryLimit int
	// MaxPartitionLocks bounds the records in flight on one segment
	// stream of a share-partition (group.share.partition.max.record.locks).
	// Default 2000.
	MaxPartitionLocks int
	// SessionTimeout and HeartbeatInterval of share group members.
	// Defaults 45s and 5s.
	SessionTimeout, HeartbeatInterval time.Duration
	// MaxMembers bounds one share group's members; MaxSessions the share
	// sessions of the broker. Defaults 200 and 1000.
	MaxMembers, MaxSessions int
}

// Share group configs (GROUP resources of IncrementalAlterConfigs).
const (
	CfgShareAutoOffsetReset = "share.auto.offset.reset"
	CfgShareLockDuration    = "share.record.lock.duration.ms"
	CfgShareDeliveryLimit   = "share.delivery.count.limit"
)

// GroupConfigDefs are the group configs korvet knows, with their defaults
// (the lock and limit defaults are the broker's).
func (e *Engine) GroupConfigDefs() []ConfigDef {
	return []ConfigDef{
		{Name: CfgShareAutoOffsetReset, Default: "latest", Doc: "Where a share group starts on a partition it has not read: latest, earliest or by_duration:<ISO-8601 duration>."},
		{Name: CfgShareLockDuration, Default: strconv.FormatInt(e.opts.Share.LockDuration.Milliseconds(), 10), Doc: "How long an acquired record stays locked to its member."},
		{Name: CfgShareDeliveryLimit, Default: strconv.Itoa(e.opts.Share.DeliveryLimit), Doc: "Deliveries after which a record is archived."},
	}
}

// ErrGroupExists is a group id taken by a group of another type.
var ErrGroupExists = errors.New("group id belongs to a group of another type")

const (
	shareGroupPrefix = "share:" // Redis consumer group of share group g: "share:" + g
	shareMaxSegments = 16       // segment streams one acquisition visits
	maxIDSeq         = "18446744073709551615"
)

func shareGroupName(g string) string { return shareGroupPrefix + g }

// sharePart is one share-partition's cached cursor, and the lock that
// serializes its operations within this korvet.
type sharePart struct {
	mu     sync.Mutex
	loaded bool
	tid    [16]byte
	seg    int64 // the cursor segment: none below it holds records in flight
}

type shareState struct {
	mu    sync.Mutex
	parts map[string]*sharePart
}

func (e *Engine) openShare(ctx context.Context) error {
	o := &e.opts.Share
	if o.LockDuration <= 0 {
		o.LockDuration = 30 * time.Second
	}
	if o.DeliveryLimit <= 0 {
		o.DeliveryLimit = 5
	}
	if o.MaxPartitionLocks <= 0 {
		o.MaxPartitionLocks = 2000
	}
	e.share = share.NewCoordinator(share.Options{
		SessionTimeout: o.SessionTimeout, HeartbeatInterval: o.HeartbeatInterval,
		MaxMembers: o.MaxMembers, MaxSessions: o.MaxSessions,
	})
	e.shareParts.parts = map[string]*sharePart{}
	r, err := e.rc.Do(ctx, "HKEYS", e.k.ShareGroups())
	if err != nil {
		return fmt.Errorf("load share groups: %w", err)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("load share groups: %w", err)
	}
	r.ForEach(func(g resp.Reply) bool {
		e.share.Ensure(string(g.Bytes()))
		return true
	})
	return nil
}

// Share is the share group membership coordinator.
func (e *Engine) Share() *share.Coordinator { return e.share }

// ShareOptions returns the share group settings in force.
func (e *Engine) ShareOptions() ShareOptions { return e.opts.Share }

// partitionCounts is share.PartitionCounts over this engine's topics.
func (e *Engine) partitionCounts(topics []string) map[string]int32 {
	out := make(map[string]int32, len(topics))
	for _, name := range topics {
		if t := e.Topic(name); t != nil && !t.Internal() {
			out[name] = int32(len(t.Partitions()))
		}
	}
	return out
}

// ShareHeartbeat runs a ShareGroupHeartbeat. A group id held by a
// classic group is refused with ErrGroupExists.
func (e *Engine) ShareHeartbeat(ctx context.Context, req share.HeartbeatRequest) (share.HeartbeatResult, error) {
	if !e.OwnsGroup(req.Group) {
		return share.HeartbeatResult{}, fmt.Errorf("%w: share group %q is coordinated by broker %d", group.ErrNotCoordinator, req.Group, e.Coordinator(req.Group))
	}
	if e.groups.Exists(req.Group) {
		return share.HeartbeatResult{}, fmt.Errorf("%w: %q is a consumer group", ErrGroupExists, req.Group)
	}
	res, err := e.share.Heartbeat(req, e.partitionCounts)
	if err != nil {
		return res, err
	}
	if res.Joined {
		if err := e.registerShareGroup(ctx, req.Group); err != nil {
			return res, err
		}
	}
	return res, nil
}

// ShareDescribe describes a share group.
func (e *Engine) ShareDescribe(name string) (share.Group, bool) {
	return e.share.Describe(name, e.partitionCounts)
}

// IsShareGroup reports whether name is a share group.
func (e *Engine) IsShareGroup(name string) bool { return e.share.Exists(name) }

// shareSettings are the lock duration and delivery limit of a group.
type shareSettings struct {
	lock  time.Duration
	limit int
	reset string
}

func (e *Engine) shareSettings(ctx context.Context, group string) (shareSettings, error) {
	s := shareSettings{lock: e.opts.Share.LockDuration, limit: e.opts.Share.DeliveryLimit, reset: "latest"}
	cfg, err := e.GroupConfigs(ctx, group)
	if err != nil {
		return s, err
	}
	if v, ok := cfg[CfgShareLockDuration]; ok {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			s.lock = time.Duration(ms) * time.Millisecond
		}
	}
	if v, ok := cfg[CfgShareDeliveryLimit]; ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			s.limit = n
		}
	}
	if v, ok := cfg[CfgShareAutoOffsetReset]; ok {
		s.reset = v
	}
	return s, nil
}

// GroupConfigs returns a group's dynamic configs.
func (e *Engine) GroupConfigs(ctx context.Context, group string) (map[string]string, error) {
	r, err := e.rc.Do(ctx, "HGET", e.k.GroupConfigs(), group)
	if err != nil {
		return nil, fmt.Errorf("%w: group configs: %v", ErrStorageUnavailable, err)
	}
	cfg := map[string]string{}
	if r.IsNil() {
		return cfg, nil
	}
	if err := json.Unmarshal(r.Bytes(), &cfg); err != nil {
		return nil, fmt.Errorf("group configs of %q: %w", group, err)
	}
	return cfg, nil
}

// ValidateGroupConfig checks one group config value.
func ValidateGroupConfig(name, value string) error {
	switch name {
	case CfgShareAutoOffsetReset:
		if value == "latest" || value == "earliest" {
			return nil
		}
		if d, ok := strings.CutPrefix(value, "by_duration:"); ok {
			if _, err := parseISODuration(d); err == nil {
				return nil
			}
		}
		return fmt.Errorf("%w: %s must be latest, earliest or by_duration:<ISO-8601 duration>, not %q", ErrInvalidConfig, name, value)
	case CfgShareLockDuration:
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil || ms < 1000 || ms > 3600000 {
			return fmt.Errorf("%w: %s must be 1000 to 3600000 ms, not %q", ErrInvalidConfig, name, value)
		}
		return nil
	case CfgShareDeliveryLimit:
		n, err := strconv.Atoi(value)
		if err != nil || n < 2 || n > 10 {
			return fmt.Errorf("%w: %s must be 2 to 10, not %q", ErrInvalidConfig, name, value)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown group config %q", ErrInvalidConfig, name)
}

// IncrementalAlterGroupConfigs sets (op 0) or deletes (op 1) group
// configs. Like Kafka, a group's configs may be set before it exists.
func (e *Engine) IncrementalAlterGroupConfigs(ctx context.Context, group string, ops []ConfigOp, validateOnly bool) error {
	if e.groups.Exists(group) {
		return fmt.Errorf("%w: %q is a consumer group; korvet has group configs for share groups only", ErrInvalidConfig, group)
	}
	cfg, err := e.GroupConfigs(ctx, group)
	if err != nil {
		return err
	}
	for _, op := range ops {
		switch op.Op {
		case 0:
			if err := ValidateGroupConfig(op.Name, op.Value); err != nil {
				return err
			}
			cfg[op.Name] = op.Value
		case 1:
			if err := ValidateGroupConfig(op.Name, e.groupDefault(op.Name)); err != nil {
				return err
			}
			delete(cfg, op.Name)
		default:
			return fmt.Errorf("%w: operation %d on %s (group configs are not lists)", ErrInvalidConfig, op.Op, op.Name)
		}
	}
	if validateOnly {
		return nil
	}
	b, _ := json.Marshal(cfg)
	var pl resp.Pipeline
	pl.Cmd("HSET", e.k.GroupConfigs(), group, b)
	e.events.Append(&pl, events.GroupConfig, "group", group)
	if err := e.execAll(ctx, &pl); err != nil {
		return fmt.Errorf("%w: save group configs: %v", ErrStorageUnavailable, err)
	}
	return nil
}

func (e *Engine) groupDefault(name string) string {
	for _, d := range e.GroupConfigDefs() {
		if d.Name == name {
			return d.Default
		}
	}
	return ""
}

// parseISODuration reads the ISO-8601 durations Kafka's by_duration takes
// (PnDTnHnMnS; days, hours, minutes, seconds).
func parseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	var d time.Duration
	inTime, units := false, 0
	num := ""
	for _, r := range rest {
		switch {
		case r == 'T':
			inTime = true
		case r >= '0' && r <= '9' || r == '.':
			num += string(r)
		default:
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("bad duration %q", s)
			}
			unit := map[bool]map[rune]time.Duration{false: {'D': 24 * time.Hour, 'W': 7 * 24 * time.Hour}, true: {'H': time.Hour, 'M': time.Minute, 'S': time.Second}}[inTime][r]
			if unit == 0 {
				return 0, fmt.Errorf("bad duration %q", s)
			}
			d += time.Duration(f * float64(unit))
			num = ""
			units++
		}
	}
	if num != "" || units == 0 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

// sharePartFor returns the cached share-partition, creating it.
func (e *Engine) sharePartFor(group string, p *Partition) *sharePart {
	k := group + "\x00" + p.t.name + "\x00" + strconv.Itoa(int(p.id))
	e.shareParts.mu.Lock()
	defer e.shareParts.mu.Unlock()
	sp := e.shareParts.parts[k]
	if sp == nil {
		sp = &sharePart{}
		e.shareParts.parts[k] = sp
	}
	return sp
}

// forgetShareParts drops the cached share-partitions of a group.
func (e *Engine) forgetShareParts(group string) {
	e.shareParts.mu.Lock()
	defer e.shareParts.mu.Unlock()
	for k := range e.shareParts.parts {
		if strings.HasPrefix(k, group+"\x00") {
			delete(e.shareParts.parts, k)
		}
	}
}

// groupID is the consumer group ID that makes offset the next delivered.
func groupID(offset int64) string {
	if offset <= 0 {
		return "0-0"
	}
	return strconv.FormatInt(offset-1, 10) + "-" + maxIDSeq
}

// load reads the share-partition's cursor; initialized reports whether
// the share group has started on the partition.
func (sp *sharePart) load(ctx context.Context, e *Engine, group string, p *Partition) (initialized bool, err error) {
	if sp.loaded && sp.tid == p.t.id {
		return true, nil
	}
	sp.loaded = false
	r, err := e.rc.Do(ctx, "HMGET", e.k.SharePartition(group, p.t.name, p.id), "tid", "seg")
	if err != nil {
		return false, fmt.Errorf("%w: share state: %v", ErrStorageUnavailable, err)
	}
	var f []resp.Reply
	f = r.Elems(f)
	if len(f) != 2 || f[0].IsNil() || f[1].IsNil() || string(f[0].Bytes()) != hex.EncodeToString(p.t.id[:]) {
		return false, nil
	}
	seg, err := strconv.ParseInt(string(f[1].Bytes()), 10, 64)
	if err != nil {
		return false, fmt.Errorf("share state of %s/%d: bad segment %q", p.t.name, p.id, f[1].Bytes())
	}
	sp.loaded, sp.tid, sp.seg = true, p.t.id, seg
	return true, nil
}

// initAt starts the share group on p at offset: its consumer group on the
// segment holding offset is created (or moved) there, and the cursor
// saved.
func (sp *sharePart) initAt(ctx context.Context, e *Engine, group string, p *Partition, offset int64) error {
	segs := p.Segments()
	offset = min(max(offset, p.LogStart()), p.HighWatermark())
	i := max(segmentFor(segs, offset), 0)
	seg := segs[i].ID
	g := shareGroupName(group)
	stream := p.streamKey(seg)
	if segs[i].Local {
		r, err := e.rc.Do(ctx, "XGROUP", "CREATE", stream, g, groupID(offset), "MKSTREAM")
		if err == nil && r.Err() != nil && strings.Contains(r.Err().Error(), "BUSYGROUP") {
			r, err = e.rc.Do(ctx, "XGROUP", "SETID", stream, g, groupID(offset))
		}
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			return fmt.Errorf("%w: start share group %q on %s/%d: %v", ErrStorageUnavailable, group, p.t.name, p.id, err)
		}
	}
	var pl resp.Pipeline
	key := e.k.SharePartition(group, p.t.name, p.id)
	pl.Cmd("HSET", key, "tid", hex.EncodeToString(p.t.id[:]), "seg", seg, "start", offset)
	pl.Cmd("SADD", e.k.ShareIndex(group), p.t.name+":"+strconv.Itoa(int(p.id)))
	pl.Cmd("DEL", e.k.ShareCold(group, p.t.name, p.id))
	if !segs[i].Local {
		pl.Cmd("HSET", e.k.ShareCold(group, p.t.name, p.id), "next", offset)
	}
	if err := e.execAll(ctx, &pl); err != nil {
		return fmt.Errorf("start share group %q on %s/%d: %w", group, p.t.name, p.id, err)
	}
	sp.loaded, sp.tid, sp.seg = true, p.t.id, seg
	return nil
}

// execAll runs a pipeline and fails on the first error reply.
func (e *Engine) execAll(ctx context.Context, pl *resp.Pipeline) error {
	rs, err := e.rc.Exec(ctx, pl)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStorageUnavailable, err)
	}
	defer rs.Release()
	for i := 0; i < rs.Len(); i++ {
		if err := rs.At(i).Err(); err != nil {
			return err
		}
	}
	return nil
}

// resetOffset is where share.auto.offset.reset starts a group on p.
func (e *Engine) resetOffset(ctx context.Context, reset string, p *Partition) (int64, error) {
	switch {
	case reset == "earliest":
		return p.LogStart(), nil
	case strings.HasPrefix(reset, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(reset, "by_duration:"))
		if err != nil {
			return p.HighWatermark(), nil
		}
		off, _, err := p.OffsetForTime(ctx, time.Now().Add(-d).UnixMilli())
		return off, err
	}
	return p.HighWatermark(), nil
}

// AcquiredRange is a run of acquired offsets with one delivery count.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// ShareRecords are records acquired for a member: Records, Codecs and
// Txns as in ReadResult (so that markers go out as control batches), and
// the acquired ranges. Call Release when done.
type ShareRecords struct {
	Records []record.Record
	Codecs  []int8
	Txns    []record.Txn
	Ranges  []AcquiredRange
	results []*ReadResult
}

// Release returns the buffers the records point into.
func (s *ShareRecords) Release() {
	for _, r := range s.results {
		r.Release()
	}
	s.results = nil
}

// ShareAcquire acquires up to maxRecords records (about maxBytes) of p for
// a member of a share group: records whose lock expired or that were
// released first, then records never delivered.
func (e *Engine) ShareAcquire(ctx context.Context, group, member string, p *Partition, maxRecords, maxBytes int) (*ShareRecords, error) {
	set, err := e.shareSettings(ctx, group)
	if err != nil {
		return nil, err
	}
	sp := e.sharePartFor(group, p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	ok, err := sp.load(ctx, e, group, p)
	if err != nil {
		return nil, err
	}
	if !ok {
		start, err := e.resetOffset(ctx, set.reset, p)
		if err != nil {
			return nil, err
		}
		if err := sp.initAt(ctx, e, group, p, start); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	avg := int64(100)
	if p.next > 0 && p.bytes > 0 {
		avg = max(p.bytes/p.next, 1)
	}
	p.mu.Unlock()
	want := min(int64(maxRecords), max(int64(maxBytes)/avg, 1), maxReadCount)
	out := &ShareRecords{}
	type acq = coldAcq
	var got []acq
	segs := p.Segments()
	first := -1
	for i, sg := range segs {
		if sg.ID >= sp.seg {
			first = i
			break
		}
	}
	if first < 0 {
		return out, nil
	}
	g := shareGroupName(group)
	stateKey := e.k.SharePartition(group, p.t.name, p.id)
	// The cursor moves past the leading segments that are sealed, read to
	// their end and hold nothing in flight.
	advance := int64(-1)
	prefixDone := true
	for i := first; i < len(segs) && i < first+shareMaxSegments && int64(len(got)) < want; i++ {
		sg := segs[i]
		sealed := i < len(segs)-1
		if !sg.Local {
			recs, done, err := e.shareAcquireCold(ctx, group, member, p, sg, set, int(want)-len(got), out)
			if err != nil {
				out.Release()
				return nil, err
			}
			got = append(got, recs...)
			if prefixDone && sealed && done {
				advance = segs[i+1].ID
			} else {
				prefixDone = false
			}
			continue
		}
		createAt := "0-0"
		if sg.ID == sp.seg {
			createAt = groupID(sg.Base) // the cursor segment's group exists unless its stream was dropped
		}
		r, err := e.rc.Do(ctx, "EVAL", shareAcquireScript, 2, p.streamKey(sg.ID), stateKey,
			g, member, set.lock.Milliseconds(), set.limit, want-int64(len(got)), createAt, e.opts.Share.MaxPartitionLocks)
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			out.Release()
			return nil, fmt.Errorf("%w: share acquire %s/%d: %v", ErrStorageUnavailable, p.t.name, p.id, err)
		}
		var parts []resp.Reply
		parts = r.Elems(parts)
		if len(parts) != 5 {
			out.Release()
			return nil, fmt.Errorf("share acquire %s/%d: unexpected reply", p.t.name, p.id)
		}
		res := p.newReadResult()
		out.results = append(out.results, res)
		base := len(out.Records)
		var counts []resp.Reply
		counts = parts[1].Elems(counts)
		if err := res.decodeEntries(parts[0]); err != nil || len(counts) != len(res.Records) {
			out.Release()
			return nil, fmt.Errorf("share acquire %s/%d: bad entries: %v", p.t.name, p.id, err)
		}
		for j := range res.Records {
			n, _ := counts[j].Int()
			got = append(got, acq{res.Records[j].Offset, int16(n), base + j})
		}
		out.Records = append(out.Records, res.Records...)
		out.Codecs = append(out.Codecs, res.Codecs...)
		out.Txns = appendTxns(out.Txns, res.Txns, len(res.Records))
		exhausted, _ := parts[2].Int()
		pending, _ := parts[3].Int()
		if prefixDone && sealed && exhausted == 1 && pending == 0 {
			advance = segs[i+1].ID
		} else {
			prefixDone = false
		}
	}
	if advance > sp.seg {
		if _, err := e.rc.Do(ctx, "HSET", stateKey, "seg", advance); err == nil {
			sp.seg = advance
		}
	}
	// Records in offset order, ranges by delivery count.
	slices.SortFunc(got, func(a, b acq) int { return int(a.off - b.off) })
	recs := make([]record.Record, len(got))
	codecs := make([]int8, len(got))
	var txns []record.Txn
	transactional := slices.ContainsFunc(out.Txns, func(t record.Txn) bool { return t.ProducerID >= 0 })
	if transactional {
		txns = make([]record.Txn, len(got))
	}
	for i, a := range got {
		recs[i], codecs[i] = out.Records[a.idx], out.Codecs[a.idx]
		if transactional {
			txns[i] = out.Txns[a.idx]
		}
		if n := len(out.Ranges); n > 0 && out.Ranges[n-1].Last == a.off-1 && out.Ranges[n-1].DeliveryCount == a.count {
			out.Ranges[n-1].Last = a.off
			continue
		}
		out.Ranges = append(out.Ranges, AcquiredRange{a.off, a.off, a.count})
	}
	out.Records, out.Codecs, out.Txns = recs, codecs, txns
	return out, nil
}

// appendTxns appends n records' transaction marks to dst: src when it is
// not empty, else n records of no transaction.
func appendTxns(dst, src []record.Txn, n int) []record.Txn {
	if len(src) > 0 {
		return append(dst, src[:n]...)
	}
	for range n {
		dst = append(dst, record.Txn{ProducerID: -1})
	}
	return dst
}

// decodeEntries decodes an XRANGE-style reply (entries of ID and fields)
// into res.
func (res *ReadResult) decodeEntries(rep resp.Reply) error {
	w := resp.NewWalker(rep.Raw)
	n, err := w.Array()
	if err != nil {
		return fmt.Errorf("%w: %v", entry.ErrMalformed, err)
	}
	for range n {
		if _, err := res.walkEntry(&w); err != nil {
			return err
		}
	}
	return nil
}

// ShareAcknowledge applies a member's acknowledgements on p. Records not
// acquired by the member (or whose lock expired) fail the whole batch
// with share.ErrInvalidRecordState.
func (e *Engine) ShareAcknowledge(ctx context.Context, group, member string, p *Partition, runs []share.AckRun) error {
	set, err := e.shareSettings(ctx, group)
	if err != nil {
		return err
	}
	sp := e.sharePartFor(group, p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	ok, err := sp.load(ctx, e, group, p)
	if err != nil {
		return err
	}
	if !ok {
		for _, r := range runs {
			if r.Type != share.AckGap {
				return fmt.Errorf("%w: nothing acquired on %s/%d", share.ErrInvalidRecordState, p.t.name, p.id)
			}
		}
		return nil
	}
	hw := p.HighWatermark()
	for _, r := range runs {
		if r.Type != share.AckGap && r.Last >= hw {
			return fmt.Errorf("%w: offsets up to %d were never delivered (high watermark %d)", share.ErrInvalidRecordState, r.Last, hw)
		}
	}
	segs := p.Segments()
	stateKey := e.k.SharePartition(group, p.t.name, p.id)
	g := shareGroupName(group)
	var pl resp.Pipeline
	var coldRuns []share.AckRun
	for i, sg := range segs {
		end := int64(1<<63 - 1)
		if i < len(segs)-1 {
			end = segs[i+1].Base - 1
		}
		var args []any
		for _, r := range runs {
			first, last := max(r.First, sg.Base), min(r.Last, end)
			if first > last || r.Type == share.AckGap {
				continue
			}
			if sg.ID < sp.seg {
				return fmt.Errorf("%w: offsets %d-%d are not in flight", share.ErrInvalidRecordState, first, last)
			}
			if !sg.Local {
				coldRuns = append(coldRuns, share.AckRun{First: first, Last: last, Type: r.Type})
				continue
			}
			args = append(args, first, last, int(r.Type))
		}
		if len(args) == 0 {
			continue
		}
		pl.Cmd(append([]any{"EVAL", shareAckScript, 2, p.streamKey(sg.ID), stateKey, g, member, set.lock.Milliseconds(), set.limit}, args...)...)
	}
	if len(coldRuns) > 0 {
		if err := e.shareAckCold(ctx, group, member, p, coldRuns, set); err != nil {
			return err
		}
	}
	if pl.Len() == 0 {
		return nil
	}
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("%w: share acknowledge: %v", ErrStorageUnavailable, err)
	}
	defer rs.Release()
	for i := 0; i < rs.Len(); i++ {
		r := rs.At(i)
		if err := r.Err(); err != nil {
			return fmt.Errorf("%w: share acknowledge: %v", ErrStorageUnavailable, err)
		}
		if n, _ := r.Int(); n < 0 {
			return fmt.Errorf("%w: on %s/%d", share.ErrInvalidRecordState, p.t.name, p.id)
		}
	}
	return nil
}

// ShareRelease releases every record a member holds on p (its share
// session closed): they are redelivered at once.
func (e *Engine) ShareRelease(ctx context.Context, group, member string, p *Partition) error {
	set, err := e.shareSettings(ctx, group)
	if err != nil {
		return err
	}
	sp := e.sharePartFor(group, p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if ok, err := sp.load(ctx, e, group, p); err != nil || !ok {
		return err
	}
	var pl resp.Pipeline
	stateKey := e.k.SharePartition(group, p.t.name, p.id)
	coldDone := false
	for _, sg := range p.Segments() {
		if sg.ID < sp.seg {
			continue
		}
		if !sg.Local {
			if !coldDone {
				if err := e.shareReleaseCold(ctx, group, member, p, set); err != nil {
					return err
				}
				coldDone = true
			}
			continue
		}
		pl.Cmd("EVAL", shareReleaseScript, 2, p.streamKey(sg.ID), stateKey, shareGroupName(group), member, set.limit, e.opts.Share.MaxPartitionLocks)
	}
	if pl.Len() == 0 {
		return nil
	}
	return e.execAll(ctx, &pl)
}

// ShareLockDuration is the acquisition lock duration of a group.
func (e *Engine) ShareLockDuration(ctx context.Context, group string) (time.Duration, error) {
	s, err := e.shareSettings(ctx, group)
	return s.lock, err
}
