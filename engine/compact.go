package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/resp"
)

// Compaction of topics whose cleanup.policy includes compact. The key
// index knows the latest offset of every key, so a pass reads the
// partition's log once and deletes (XDEL) each record whose key has a
// strictly newer record in the same partition, once the record is older
// than min.compaction.lag.ms; a key's latest record, when it is a
// tombstone, goes after delete.retention.ms. Offsets keep their gaps; reads
// step over them.
//
// Only records below the partition's checkpoint are considered, so a
// "newer record" is always committed and indexed; the checkpoint never
// passes the last stable offset (kv_txn.go), so nothing of an open
// transaction, nor anything after its first record, is touched. Records
// of aborted transactions are removed (after min.compaction.lag.ms, like
// superseded ones): the index never points at them, so they are never a
// key's latest and an aborted overwrite cannot cost the committed value
// before it. Control records (commit and abort markers) are kept: they
// are small, and a reader of the log needs a transaction's marker while
// any of its records remains (Kafka drops a marker delete.retention.ms
// after its transaction's last record went; korvet does not yet). A concurrent append can
// only make a record more superseded, never less, so no lock is held while
// deleting; only removing a tombstone's pointer takes the partition's
// index lock, to check that no newer record of the key came in meanwhile.
//
// The partition's last record is never deleted, so that a fetch at any
// offset below the high watermark finds a record. XDEL frees Redis memory
// only when a whole stream node (up to stream-node-max-entries entries)
// is deleted; rewriting sealed segments would reclaim the rest.

// compactState is a partition's compaction bookkeeping between passes.
type compactState struct {
	passEnd    int64     // the last pass covered offsets below this
	live       int64     // records the last pass left
	retryAt    int64     // unix ms when records kept for a lag become eligible; 0: none
	dirtySince time.Time // when records first appeared past passEnd
}

// KVCompactionStats describes a compacted topic's compaction.
type KVCompactionStats struct {
	Passes            int64     `json:"passes"`
	Scanned           int64     `json:"scanned"`            // records read, all passes
	Deleted           int64     `json:"deleted"`            // superseded records removed
	TombstonesDeleted int64     `json:"tombstones_deleted"` // tombstones removed after delete.retention.ms
	LastPass          time.Time `json:"last_pass"`
	LastDurationMs    int64     `json:"last_duration_ms"`
	LastError         string    `json:"last_error,omitempty"`
}

// CompactionResult is what one compaction of a topic did.
type CompactionResult struct {
	Scanned    int64 `json:"scanned"`
	Deleted    int64 `json:"deleted"`
	Tombstones int64 `json:"tombstones"`
	Live       int64 `json:"live"` // records left in the compacted range
}

// compactSettings are the configs a pass honours.
type compactSettings struct {
	minLag, deleteRetention, maxLag int64 // ms
	dirtyRatio                      float64
}

func (t *Topic) compactSettings() compactSettings {
	i := func(name string) int64 {
		n, _ := strconv.ParseInt(t.ConfigValue(name), 10, 64)
		return n
	}
	ratio, err := strconv.ParseFloat(t.ConfigValue("min.cleanable.dirty.ratio"), 64)
	if err != nil || ratio < 0 || ratio > 1 {
		ratio = 0.5
	}
	return compactSettings{
		minLag:          i("min.compaction.lag.ms"),
		deleteRetention: i("delete.retention.ms"),
		maxLag:          i("max.compaction.lag.ms"),
		dirtyRatio:      ratio,
	}
}

// due reports whether a pass over [.., end) is worth it: enough new
// records since the last pass (min.cleanable.dirty.ratio), new records
// waiting longer than max.compaction.lag.ms, or records kept by a lag that
// has now passed.
func (st *compactState) due(end int64, s compactSettings, now time.Time) bool {
	if st.retryAt > 0 && now.UnixMilli() >= st.retryAt {
		return true
	}
	dirty := end - st.passEnd
	if dirty <= 0 {
		return false
	}
	if st.dirtySince.IsZero() {
		st.dirtySince = now
	}
	if float64(dirty) >= s.dirtyRatio*float64(dirty+st.live) {
		return true
	}
	return now.Sub(st.dirtySince).Milliseconds() >= s.maxLag
}

// compactionLoop runs passes over compacted topics, reconciles the index
// with the topics and refreshes key counts.
func (kv *kvIndex) compactionLoop() {
	defer kv.e.wg.Done()
	tick := time.NewTicker(kv.opts.CompactionInterval)
	defer tick.Stop()
	for {
		select {
		case <-kv.e.bg.Done():
			return
		case <-tick.C:
		}
		if err := kv.reconcile(); err != nil {
			kv.log.Warn("key index: reconcile", "err", err)
		}
		kv.mu.RLock()
		kts := make([]*kvTopic, 0, len(kv.topics))
		for _, kt := range kv.topics {
			kts = append(kts, kt)
		}
		kv.mu.RUnlock()
		for _, kt := range kts {
			if kv.e.bg.Err() != nil {
				return
			}
			if kt.dirty.Load() {
				if err := kv.count(kv.e.bg, kt); err != nil {
					kv.log.Warn("key index: count keys", "topic", kt.t.name, "err", err)
				}
			}
			if kt.t.Compacted() {
				if _, err := kv.compactTopic(kv.e.bg, kt, false); err != nil && kv.e.bg.Err() == nil {
					kv.log.Warn("compaction", "topic", kt.t.name, "err", err)
				}
			}
		}
	}
}

// CompactTopic runs a compaction pass over every partition of a compacted
// topic now, whatever the dirty ratio says, once the index has caught up.
func (e *Engine) CompactTopic(ctx context.Context, topic string) (CompactionResult, error) {
	kt, err := e.kv.topicFor(topic)
	if err != nil {
		return CompactionResult{}, err
	}
	if !kt.t.Compacted() {
		return CompactionResult{}, fmt.Errorf("compact %s: cleanup.policy is %s, not compact", topic, kt.t.ConfigValue("cleanup.policy"))
	}
	if err := kt.waitReady(ctx); err != nil {
		return CompactionResult{}, fmt.Errorf("compact %s: %w", topic, err)
	}
	return e.kv.live.compactTopic(ctx, kt, true)
}

func (kv *kvIndex) compactTopic(ctx context.Context, kt *kvTopic, force bool) (CompactionResult, error) {
	kv.compactMu.Lock()
	defer kv.compactMu.Unlock()
	var total CompactionResult
	var firstErr error
	ran := false
	began := time.Now()
	for _, kp := range kt.partitions() {
		r, did, err := kv.compactPartition(ctx, kp, force)
		ran = ran || did
		total.Scanned += r.Scanned
		total.Deleted += r.Deleted
		total.Tombstones += r.Tombstones
		total.Live += r.Live
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("compact %s partition %d: %w", kt.t.name, kp.p.id, err)
		}
	}
	if ran {
		kt.cmpMu.Lock()
		kt.cmp.Passes++
		kt.cmp.Scanned += total.Scanned
		kt.cmp.Deleted += total.Deleted
		kt.cmp.TombstonesDeleted += total.Tombstones
		kt.cmp.LastPass = began
		kt.cmp.LastDurationMs = time.Since(began).Milliseconds()
		kt.cmp.LastError = ""
		if firstErr != nil {
			kt.cmp.LastError = firstErr.Error()
		}
		kt.cmpMu.Unlock()
		if total.Deleted+total.Tombstones > 0 {
			kv.log.Debug("compacted", "topic", kt.t.name, "scanned", total.Scanned, "deleted", total.Deleted, "tombstones", total.Tombstones, "took", time.Since(began))
		}
	}
	return total, firstErr
}

// tombCandidate is a tombstone old enough to go.
type tombCandidate struct {
	key    []byte
	id     recordID
	ptr    index.Pointer
	hasPtr bool
}

// compactPartition runs one pass if one is due (or forced); did says
// whether it ran.
func (kv *kvIndex) compactPartition(ctx context.Context, kp *kvPart, force bool) (res CompactionResult, did bool, err error) {
	p, t := kp.p, kp.p.t
	if !kp.isReady() || !p.IsLeader() {
		// Only the partition's leader compacts it.
		return res, false, nil
	}
	s := t.compactSettings()
	kp.mu.Lock()
	end := kp.applied
	kp.mu.Unlock()
	now := time.Now()
	st := &kp.cmp
	if !force && !st.due(end, s, now) {
		return res, false, nil
	}
	last := p.HighWatermark() - 1
	lagCut := now.UnixMilli() - s.minLag
	delCut := now.UnixMilli() - s.deleteRetention
	var retryAt int64
	retry := func(at int64) {
		if retryAt == 0 || at < retryAt {
			retryAt = at
		}
	}
	// Keys with a record this pass keeps although it is not their latest:
	// a later tombstone of such a key must stay, or the older record would
	// come back as the key's value.
	kept := map[string]struct{}{}
	var dels []recordID
	var tombs []tombCandidate
	flush := func() error {
		if len(dels) == 0 {
			return nil
		}
		n, err := p.deleteRecords(ctx, dels)
		res.Deleted += n
		dels = dels[:0]
		return err
	}

	from := p.LogStart()
	_, ab := p.stableView(from)
	for from < end {
		rr, err := p.Read(ctx, from, 4<<20)
		if errors.Is(err, ErrOffsetOutOfRange) && from < p.LogStart() {
			from = p.LogStart()
			continue
		}
		if err != nil {
			return res, true, err
		}
		if len(rr.Records) == 0 {
			rr.Release()
			break
		}
		for i := range rr.Records {
			r := &rr.Records[i]
			if r.Offset >= end {
				break
			}
			id := recordID{offset: r.Offset}
			if len(rr.Codecs) == len(rr.Records) {
				id.codec, id.known = rr.Codecs[i], true
			}
			res.Scanned++
			if i < len(rr.Txns) && rr.Txns[i].Control {
				res.Live++ // a marker: kept (see above)
				continue
			}
			if i < len(rr.Txns) && ab.aborted(rr.Txns[i].ProducerID, r.Offset) && r.Offset != last {
				if r.Timestamp <= lagCut {
					dels = append(dels, id)
					continue
				}
				retry(r.Timestamp + s.minLag)
				res.Live++
				continue
			}
			if r.Key == nil {
				res.Live++
				continue
			}
			ptr, ok, err := kv.lookup(t.id, r.Key)
			if err != nil {
				rr.Release()
				return res, true, err
			}
			same := ok && ptr.Partition == p.id
			switch {
			case same && ptr.Offset > r.Offset:
				if r.Timestamp <= lagCut {
					dels = append(dels, id)
					continue
				}
				kept[string(r.Key)] = struct{}{}
				retry(r.Timestamp + s.minLag)
			case r.Value == nil && (!ok || same && ptr.Offset == r.Offset):
				// The key's latest record is this tombstone (or one whose
				// pointer a crash already removed).
				_, older := kept[string(r.Key)]
				switch {
				case r.Offset == last || older:
				case r.Timestamp <= delCut:
					tombs = append(tombs, tombCandidate{key: bytes.Clone(r.Key), id: id, ptr: ptr, hasPtr: ok})
					continue
				default:
					retry(r.Timestamp + s.deleteRetention)
				}
			case !same || ptr.Offset < r.Offset:
				// Not this partition's latest as far as the index knows
				// (the key moved partitions, or lost its pointer): keep.
				kept[string(r.Key)] = struct{}{}
			}
			res.Live++
		}
		from = rr.Records[len(rr.Records)-1].Offset + 1
		rr.Release()
		if len(dels) >= 4096 {
			if err := flush(); err != nil {
				return res, true, err
			}
		}
	}
	if err := flush(); err != nil {
		return res, true, err
	}
	n, err := kv.dropTombstones(ctx, kp, tombs)
	res.Tombstones += n
	if err != nil {
		return res, true, err
	}
	*st = compactState{passEnd: end, live: res.Live, retryAt: retryAt}
	return res, true, nil
}

// dropTombstones removes expired tombstones: first their pointers, under
// the partition's lock and only if no newer record of the key has been
// indexed since the scan, then the records. A crash in between leaves a
// tombstone without a pointer, which the next pass removes.
func (kv *kvIndex) dropTombstones(ctx context.Context, kp *kvPart, tombs []tombCandidate) (int64, error) {
	if len(tombs) == 0 {
		return 0, nil
	}
	t := kp.p.t
	var ids []recordID
	err := func() error {
		kv.closeMu.RLock()
		defer kv.closeMu.RUnlock()
		if kv.closed {
			return errKVClosed
		}
		kp.mu.Lock()
		defer kp.mu.Unlock()
		b := kv.ix.NewBatch()
		defer b.Close()
		for _, c := range tombs {
			cur, ok, err := kv.ix.Get(t.id, c.key)
			if err != nil {
				return err
			}
			switch {
			case c.hasPtr && ok && cur == c.ptr:
				if err := b.Delete(t.id, c.key); err != nil {
					return err
				}
			case c.hasPtr || ok:
				continue // a newer record of the key arrived
			}
			ids = append(ids, c.id)
		}
		if b.Len() == 0 {
			return nil
		}
		kp.kt.dirty.Store(true)
		return b.Commit()
	}()
	if err != nil {
		return 0, err
	}
	return kp.p.deleteRecords(ctx, ids)
}

// recordID names a record's stream entry (entry.AppendID): its offset and,
// when known, the producer's compression codec.
type recordID struct {
	offset int64
	codec  int8
	known  bool
}

// deleteRecords removes records from the log (compaction), routing each
// to its segment's stream. Records of segments that have left Redis are
// kept: the cold tier's files are immutable. It returns how many records
// Redis deleted.
func (p *Partition) deleteRecords(ctx context.Context, recs []recordID) (int64, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	p.mu.Lock()
	segs := p.segs
	p.mu.Unlock()
	var pl resp.Pipeline
	const perCmd = 512
	var ids []string
	seg := int64(-1)
	emit := func() {
		if len(ids) == 0 {
			return
		}
		args := make([]any, 0, len(ids)+2)
		args = append(args, "XDEL", p.streamKey(seg))
		for _, id := range ids {
			args = append(args, id)
		}
		pl.Cmd(args...)
		ids = ids[:0]
	}
	for _, rec := range recs {
		off := rec.offset
		i := segmentFor(segs, off)
		if len(segs) > 0 && (i < 0 || !segs[i].Local) {
			continue
		}
		id := int64(0)
		if i >= 0 {
			id = segs[i].ID
		}
		if id != seg || len(ids) >= perCmd {
			emit()
			seg = id
		}
		if rec.known {
			ids = append(ids, string(entry.AppendID(nil, off, rec.codec)))
			continue
		}
		// Unknown: every ID the record may have (XDEL ignores missing IDs).
		for codec := range entry.MaxCodec + 1 {
			ids = append(ids, string(entry.AppendID(nil, off, codec)))
		}
	}
	emit()
	if pl.Len() == 0 {
		return 0, nil
	}
	rs, err := p.t.e.rc.Exec(ctx, &pl)
	// Counted whatever the outcome: the records may be gone.
	p.noteRemoval()
	if err != nil {
		return 0, fmt.Errorf("%w: compaction delete: %v", ErrStorageUnavailable, err)
	}
	defer rs.Release()
	var n int64
	for i := 0; i < rs.Len(); i++ {
		d, err := rs.At(i).Int()
		if err != nil {
			return n, fmt.Errorf("compaction delete: %w", err)
		}
		n += d
	}
	return n, nil
}
