package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Changes to the segment registry, each made by the next flush in its
// transaction: sealing the open segment, trimming to a new log start
// (retention, DeleteRecords), marking a segment archived and dropping an
// archived segment's stream from Redis.

// rollIfIdle seals the open segment when it holds records and is older
// than segment.ms, so a quiet partition's data can still be archived.
func (p *Partition) rollIfIdle(now time.Time) {
	ms := p.t.currentSettings().segmentMs
	p.mu.Lock()
	defer p.mu.Unlock()
	open := p.segs[len(p.segs)-1]
	if p.next > open.Base && ms > 0 && now.UnixMilli()-open.Created >= ms {
		p.roll = true
		p.kickLocked()
	}
}

// planSegments seals the open segment when it is full or old (or a seal
// was asked for) before this flush's records go in, so no segment grows
// past segment.bytes by more than one flush; the new segment opens at the
// flush's first offset.
func (st *flushState) planSegments(settings topicSettings, now time.Time, appending, saved bool) {
	open := st.segs[len(st.segs)-1]
	hasRecords := st.base > open.Base
	full := settings.segmentBytes > 0 && st.bytes-open.StartBytes >= settings.segmentBytes
	old := settings.segmentMs > 0 && now.UnixMilli()-open.Created >= settings.segmentMs
	if !hasRecords || !(st.roll || appending && (full || old)) {
		st.roll = false
		st.segsChanged = !saved
		return
	}
	segs := append([]Segment(nil), st.segs...)
	sealed := &segs[len(segs)-1]
	sealed.Last, sealed.Bytes = st.base-1, st.bytes-sealed.StartBytes
	sealed.MinTs, sealed.MaxTs = st.segMin, st.segMax
	sealed.State, sealed.Sealed = SegmentSealed, now.UnixMilli()
	segs = append(segs, Segment{ID: open.ID + 1, Base: st.base, Last: -1, StartBytes: st.bytes, State: SegmentOpen, Local: true, Created: now.UnixMilli(), MinTs: -1, MaxTs: -1})
	st.segs, st.segsChanged, st.roll = segs, true, true
	st.segMin, st.segMax = -1, -1
}

// DeleteRecords moves the log start up to offset (Kafka's DeleteRecords;
// -1 means the high watermark) and returns the new log start once Redis
// has it.
func (p *Partition) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: %d not in [0, %d]", ErrOffsetOutOfRange, offset, hw)
	}
	if offset <= p.start.Load() {
		return p.start.Load(), nil
	}
	done := make(chan error, 1)
	p.mu.Lock()
	p.trimTo = max(p.trimTo, offset)
	p.trimWait = append(p.trimWait, done)
	p.kickLocked()
	p.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			return -1, err
		}
		return p.start.Load(), nil
	case <-ctx.Done():
		return -1, fmt.Errorf("delete records: %w", ctx.Err())
	}
}

// planTrim adds to the transaction what retention's trim to st.trimTo
// takes: whole segments below it go (their streams unlinked, cold files
// queued for deletion), the segment holding it is trimmed with XTRIM MINID.
func (p *Partition) planTrim(pl cmdSink, st *flushState) {
	target := st.trimTo
	var keep []Segment
	for i, sg := range st.segs {
		open := i == len(st.segs)-1
		switch {
		case !open && sg.Last < target:
			if sg.Local {
				pl.Cmd("UNLINK", p.streamKey(sg.ID))
			}
			if sg.File != "" {
				pl.Cmd("SADD", p.t.e.k.ColdGarbage(), "file\x00"+p.t.name+"\x00"+sg.File)
			}
			st.removed = append(st.removed, sg.ID)
		case sg.Base < target && sg.Local:
			pl.Cmd("XTRIM", p.streamKey(sg.ID), "MINID", strconv.FormatInt(target, 10))
			keep = append(keep, sg)
		default:
			keep = append(keep, sg)
		}
	}
	if len(st.removed) > 0 {
		st.segs, st.segsChanged = keep, true
	}
	pl.Cmd("XTRIM", p.batchesKey, "MINID", strconv.FormatInt(target, 10))
	pl.Cmd("XTRIM", p.abortedKey, "MINID", strconv.FormatInt(target, 10))
	pl.Cmd("HSET", p.metaKey, "start", target)
}

type archiveReq struct {
	seg       int64
	file      string
	fileBytes int64
	done      chan error
}

func (st *flushState) markArchived(a archiveReq) {
	for i, sg := range st.segs {
		if sg.ID == a.seg && sg.State == SegmentSealed {
			segs := append([]Segment(nil), st.segs...)
			segs[i].State, segs[i].File, segs[i].FileBytes = SegmentArchived, a.file, a.fileBytes
			st.segs, st.segsChanged = segs, true
		}
	}
}

// MarkArchived records in the registry that a sealed segment's records are
// in the cold tier as file. It returns once the registry is durable in
// Redis. Marking an already archived segment does nothing.
func (p *Partition) MarkArchived(ctx context.Context, seg int64, file string, fileBytes int64) error {
	done := make(chan error, 1)
	p.mu.Lock()
	p.archives = append(p.archives, archiveReq{seg, file, fileBytes, done})
	p.kickLocked()
	p.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("mark segment %d archived: %w", seg, ctx.Err())
	}
}

// DropLocal asks for an archived segment's stream to leave Redis.
func (p *Partition) DropLocal(seg int64) {
	p.mu.Lock()
	if p.dropLocal == nil {
		p.dropLocal = map[int64]bool{}
	}
	p.dropLocal[seg] = true
	p.kickLocked()
	p.mu.Unlock()
}

// planDropLocal removes an archived segment's stream from Redis: its
// records are read from the cold tier from then on.
func (p *Partition) planDropLocal(pl cmdSink, st *flushState, id int64) {
	for i, sg := range st.segs {
		if sg.ID != id || i == len(st.segs)-1 || sg.State != SegmentArchived || !sg.Local {
			continue
		}
		segs := append([]Segment(nil), st.segs...)
		segs[i].Local = false
		st.segs, st.segsChanged = segs, true
		pl.Cmd("UNLINK", p.streamKey(id))
	}
}
