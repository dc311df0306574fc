package cold

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/cold/icemeta"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/engine/schema"
)

const topicIDProp = "korvet.topic-id"

// loadTopic returns the topic's table metadata, caching it with the data
// files of its current snapshot. With create, a missing table is created
// for ref's topic id. ts.mu must be held.
func (s *Store) loadTopic(ctx context.Context, ts *topicState, topic string, create *SegmentRef) (*icemeta.Metadata, error) {
	if ts.meta == nil {
		meta, loc, err := s.cat.loadTable(ctx, s.ident(topic))
		if errors.Is(err, errNoTable) && create != nil {
			fresh, merr := newTableMetadata(s.cat.tableLocation(s.ident(topic)), map[string]string{
				topicIDProp:          hex.EncodeToString(create.TopicID[:]),
				"korvet.kafka-topic": topic,
			})
			if merr != nil {
				return nil, merr
			}
			meta, loc, err = s.cat.createTable(ctx, s.ident(topic), fresh)
			if err == nil {
				s.log.Info("cold: created table", "topic", topic, "location", meta.Location)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("load table for topic %s: %w", topic, err)
		}
		if err := checkSchema(meta.CurrentSchema()); err != nil {
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		mans, files, err := s.readSnapshot(ctx, meta.CurrentSnapshot())
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		ts.meta, ts.loc, ts.manifests, ts.files = meta, loc, mans, files
	}
	if create != nil {
		want := hex.EncodeToString(create.TopicID[:])
		if got := ts.meta.Properties[topicIDProp]; got != want {
			return nil, fmt.Errorf("%w: table %s is for topic id %s, segment is of %s", ErrTopicMismatch, topic, got, want)
		}
	}
	return ts.meta, nil
}

// forget drops a topic's cached table after a failed commit, whose outcome
// is unknown: the next call reloads it from the catalog.
func (ts *topicState) forget() { ts.meta, ts.loc, ts.manifests, ts.files = nil, "", nil, nil }

// Archive writes one sealed segment as a Parquet file and commits it to the
// topic's table: Upload, then Commit. next returns the segment's records
// in offset order, a chunk at a time, and io.EOF (or an empty chunk) at
// the end; chunks are not retained after the following call, so memory
// stays bounded by a chunk plus a row group. With each chunk next returns
// the records' transaction info: empty when none of them is
// transactional, else one entry per record (ProducerID -1 for a record
// outside transactions).
//
// A table without the transaction columns (created before they existed, or
// just now) gets them (Iceberg schema evolution) in the commit that adds
// the file.
//
// Archive is idempotent: the file's path depends only on (topic id,
// partition, segment), and a segment already in the table is returned as
// it is without calling next.
func (s *Store) Archive(ctx context.Context, ref SegmentRef, next func() ([]record.Record, []record.Txn, error)) (DataFile, error) {
	u, err := s.Upload(ctx, ref, next)
	if err != nil {
		return DataFile{}, err
	}
	return u.Commit(ctx)
}

// Upload is a segment's file in the store, on its way into the table.
type Upload struct {
	s      *Store
	ts     *topicState
	ref    SegmentRef
	df     *iceberg.DataFile
	plan   *typedPlan // nil: no typed columns
	start  time.Time
	queued time.Time     // when Commit queued it
	done   chan struct{} // closed once out and err are set
	out    DataFile
	err    error
}

// Upload writes one sealed segment as a Parquet file (see Archive) and
// returns it for Commit, which adds it to the table and must follow
// (until it does, the topic's commits count the file as still
// uploading). Segments of one topic upload concurrently. A segment the
// table has already comes back committed, without a call of next.
func (s *Store) Upload(ctx context.Context, ref SegmentRef, next func() ([]record.Record, []record.Txn, error)) (*Upload, error) {
	if err := validTopic(ref.Topic); err != nil {
		return nil, err
	}
	if ref.Partition < 0 || ref.Segment < 0 {
		return nil, fmt.Errorf("cold: bad segment ref %+v", ref)
	}
	ts, err := s.topic(ctx, ref.Topic)
	if err != nil {
		return nil, fmt.Errorf("archive %s/%d segment %d: %w", ref.Topic, ref.Partition, ref.Segment, err)
	}
	typed := s.typedFor(ctx, ref.Topic)
	// The table as it is now gives the file's location and typed columns;
	// the upload runs without the lock.
	ts.mu.Lock()
	meta, err := s.loadTopic(ctx, ts, ref.Topic, &ref)
	if err != nil {
		ts.mu.Unlock()
		return nil, fmt.Errorf("archive %s/%d segment %d: %w", ref.Topic, ref.Partition, ref.Segment, err)
	}
	u := &Upload{s: s, ts: ts, ref: ref, start: time.Now(), done: make(chan struct{})}
	p := dataPath(meta.Location, ref)
	if e, ok := ts.files[p]; ok {
		ts.mu.Unlock()
		s.log.Info("cold: segment already archived", "topic", ref.Topic, "partition", ref.Partition, "segment", ref.Segment)
		u.out = toDataFile(&e.DataFile)
		close(u.done)
		return u, nil
	}
	if typed != nil {
		u.plan = s.planTyped(meta, ref.Topic, typed)
	}
	ts.mu.Unlock()

	ts.changeUploads(+1)
	if u.df, err = s.upload(ctx, meta, ref, p, next, u.plan); err != nil {
		ts.changeUploads(-1)
		return nil, fmt.Errorf("archive %s/%d segment %d: %w", ref.Topic, ref.Partition, ref.Segment, err)
	}
	if s.afterUpload != nil {
		if err := s.afterUpload(); err != nil {
			ts.changeUploads(-1)
			return nil, err
		}
	}
	return u, nil // (Commit counts the upload as ended when it queues it)
}

// UploadMemory is about the most that Upload holds of a segment of n
// bytes of records besides what next returns: the open row group in the
// column writers and their pages (twice the row group, and twice a page
// being compressed), and the file's upload buffer (see objects), the
// file being at most about as large as its records.
func (s *Store) UploadMemory(n int64) int64 {
	return 2*int64(s.cfg.RowGroupBytes) + 2*int64(s.cfg.PageBytes) + s.obj.writeBuffer(n)
}

// A commit waits for files still uploading, so that they go into the
// table together (each commit writes a manifest, a manifest list and the
// table metadata, and reads the metadata back), unless maxCommitFiles are
// waiting or the first has waited maxCommitWait.
const (
	maxCommitFiles = 32
	maxCommitWait  = time.Second
)

// Commit adds the uploaded file to the table and returns it, once the
// table has it. Files uploaded meanwhile go in the same commit (one
// snapshot adding them all), and a commit waits for uploads of the topic
// still running, within maxCommitFiles and maxCommitWait: the table gets
// one snapshot per batch of segments rather than one per segment.
func (u *Upload) Commit(ctx context.Context) (DataFile, error) {
	select {
	case <-u.done: // in the table already
		return u.out, u.err
	default:
	}
	s, ts := u.s, u.ts
	ts.qmu.Lock()
	u.queued = time.Now()
	ts.waiting = append(ts.waiting, u)
	ts.uploads--
	ts.notifyLocked()
	ts.qmu.Unlock()
	for {
		ts.qmu.Lock()
		wait, changed := ts.commitWait(), ts.changed
		ts.qmu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-changed:
			case <-t.C:
			case <-u.done:
			case <-ctx.Done():
				t.Stop()
				return u.abandon(ctx)
			}
			t.Stop()
			continue
		}
		ts.mu.Lock()
		select {
		case <-u.done: // a turn before this one committed it
		default:
			ts.qmu.Lock()
			batch := ts.waiting
			ts.waiting = nil
			ts.qmu.Unlock()
			s.commitBatch(ctx, ts, u.ref.Topic, batch)
		}
		ts.mu.Unlock()
		if u.err != nil {
			return DataFile{}, fmt.Errorf("archive %s/%d segment %d: %w", u.ref.Topic, u.ref.Partition, u.ref.Segment, u.err)
		}
		s.log.Debug("cold: archived segment", "topic", u.ref.Topic, "partition", u.ref.Partition, "segment", u.ref.Segment,
			"records", u.out.Records, "bytes", u.out.Bytes, "took", time.Since(u.start))
		return u.out, nil
	}
}

// abandon leaves the commit queue when ctx ends first; a commit that has
// taken the file already is waited for (it runs under its own context).
func (u *Upload) abandon(ctx context.Context) (DataFile, error) {
	ts := u.ts
	ts.qmu.Lock()
	if i := slices.Index(ts.waiting, u); i >= 0 {
		ts.waiting = slices.Delete(ts.waiting, i, i+1)
		ts.qmu.Unlock()
		return DataFile{}, fmt.Errorf("archive %s/%d segment %d: commit: %w", u.ref.Topic, u.ref.Partition, u.ref.Segment, ctx.Err())
	}
	ts.qmu.Unlock()
	<-u.done
	if u.err != nil {
		return DataFile{}, fmt.Errorf("archive %s/%d segment %d: %w", u.ref.Topic, u.ref.Partition, u.ref.Segment, u.err)
	}
	return u.out, nil
}

// commitWait is how long the queued files should wait for more; 0: commit
// now. ts.qmu must be held.
func (ts *topicState) commitWait() time.Duration {
	if len(ts.waiting) == 0 || ts.uploads == 0 || len(ts.waiting) >= maxCommitFiles {
		return 0 // (none waiting: a commit took them, and the caller's is done)
	}
	return max(maxCommitWait-time.Since(ts.waiting[0].queued), 0)
}

// changeUploads counts an upload of the topic starting (+1) or ending (-1).
func (ts *topicState) changeUploads(d int) {
	ts.qmu.Lock()
	ts.uploads += d
	ts.notifyLocked()
	ts.qmu.Unlock()
}

// notifyLocked wakes the commits waiting for a change of the queue or of
// the uploads. ts.qmu must be held.
func (ts *topicState) notifyLocked() {
	if ts.changed != nil {
		close(ts.changed)
	}
	ts.changed = make(chan struct{})
}

// commitBatch commits uploaded files, as few commits as their typed
// columns allow (files planned with the same value_fields go together),
// and settles each. ts.mu must be held.
func (s *Store) commitBatch(ctx context.Context, ts *topicState, topic string, batch []*Upload) {
	settle := func(us []*Upload, err error) {
		for _, u := range us {
			if err == nil {
				u.out = toDataFile(u.df)
				if e, ok := ts.files[u.df.FilePath]; ok {
					u.out = toDataFile(&e.DataFile) // another writer's, same segment
				}
			}
			u.err = err
			close(u.done)
		}
	}
	for len(batch) > 0 {
		var group, rest []*Upload
		for _, u := range batch {
			if samePlan(u.plan, batch[0].plan) {
				group = append(group, u)
			} else {
				rest = append(rest, u)
			}
		}
		batch = rest
		settle(group, s.commitGroup(ctx, ts, group))
	}
	if ts.meta != nil && len(ts.meta.Snapshots) > 2*s.keepSnaps {
		// Each commit adds a snapshot: keep the list (and so the metadata
		// file) short.
		if err := s.expire(ctx, ts, topic, s.keepSnaps); err != nil {
			s.log.Warn("cold: expire snapshots", "topic", topic, "err", err)
		}
	}
}

// samePlan reports whether files of plans a and b can be committed
// together: both without typed columns, or with the same value_fields.
func samePlan(a, b *typedPlan) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.field.Equals(b.field)
}

// commitGroup commits files of one plan in one snapshot, retrying after
// lost races with other writers; files the table has meanwhile (a retry
// after a crash, or another broker) are not added again. ts.mu must be
// held.
func (s *Store) commitGroup(ctx context.Context, ts *topicState, group []*Upload) error {
	ref := group[0].ref
	// (After a failed commit the table is reloaded; loading also checks
	// the topic id.)
	meta, err := s.loadTopic(ctx, ts, ref.Topic, &ref)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		var add []*iceberg.DataFile
		for _, u := range group {
			if u.ref.TopicID != ref.TopicID {
				return fmt.Errorf("%w: segments of two topic ids in one commit", ErrTopicMismatch)
			}
			if _, ok := ts.files[u.df.FilePath]; !ok {
				add = append(add, u.df)
			}
		}
		if len(add) == 0 {
			return nil
		}
		var typed *schema.Typed
		plan := group[0].plan
		if plan != nil {
			typed = plan.typed
		}
		sc, ups, f, err := s.evolveSchema(meta, typed)
		if err == nil && plan != nil && !f.Equals(plan.field) {
			// The files carry the planned ids: a table that changed
			// meanwhile (another writer evolved it) needs them written
			// again.
			err = errors.New("the table's typed columns changed while the file was written")
		}
		if err != nil {
			return err
		}
		err = s.appendFiles(ctx, ts, ref.Topic, add, sc, ups, commitProps(group))
		if err == nil {
			return nil
		}
		if !errors.Is(err, errCommitFailed) || attempt == maxCommitAttempts-1 {
			return fmt.Errorf("commit: %w", err)
		}
		// Another writer committed first: start again from its table,
		// which may even hold these very files already.
		if meta, err = s.reload(ctx, ts, ref.Topic, &ref, attempt); err != nil {
			return err
		}
	}
}

// commitProps are the snapshot summary's korvet properties: the segment
// a snapshot adds, or the segments ("partition/segment", comma-separated).
func commitProps(group []*Upload) map[string]string {
	if len(group) == 1 {
		return map[string]string{
			"korvet.partition": strconv.Itoa(int(group[0].ref.Partition)),
			"korvet.segment":   strconv.FormatInt(group[0].ref.Segment, 10),
		}
	}
	var b []byte
	for i, u := range group {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(u.ref.Partition), 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, u.ref.Segment, 10)
	}
	return map[string]string{"korvet.segments": string(b)}
}

// maxCommitAttempts bounds the retries of a commit that lost a race with
// another writer (korvet is meant to be the only one).
const maxCommitAttempts = 8

// reload drops the cached table after a lost commit race and loads the
// winner's, after a short random pause so racing writers spread out.
func (s *Store) reload(ctx context.Context, ts *topicState, topic string, create *SegmentRef, attempt int) (*icemeta.Metadata, error) {
	ts.forget()
	pause := time.Duration(10<<min(attempt, 6)) * time.Millisecond
	select {
	case <-time.After(pause/2 + rand.N(pause/2)):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.loadTopic(ctx, ts, topic, create)
}

// upload streams the segment into its Parquet object and returns the
// manifest entry for it.
func (s *Store) upload(ctx context.Context, meta *icemeta.Metadata, ref SegmentRef, p string, next func() ([]record.Record, []record.Txn, error), plan *typedPlan) (*iceberg.DataFile, error) {
	w, err := s.obj.create(ctx, p)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.Abort()
		}
	}()
	sc, cols, tw := s.schema, s.cols, (*typedWriter)(nil)
	if plan != nil {
		sc, cols, tw = plan.schema, plan.cols, plan.writer
	}
	sw := newSegmentWriter(w, sc, cols, tw, s.codec, ref, s.cfg.RowGroupBytes, s.cfg.PageBytes)
	for {
		recs, txns, err := next()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read segment: %w", err)
		}
		if len(recs) > 0 {
			if ref.LastOffset >= ref.BaseOffset {
				if o := recs[0].Offset; o < ref.BaseOffset {
					return nil, fmt.Errorf("record offset %d below the segment's base %d", o, ref.BaseOffset)
				}
				if o := recs[len(recs)-1].Offset; o > ref.LastOffset {
					return nil, fmt.Errorf("record offset %d beyond the segment's last %d", o, ref.LastOffset)
				}
			}
			if werr := sw.write(recs, txns); werr != nil {
				return nil, werr
			}
		}
		if err != nil || len(recs) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if sw.count == 0 {
		return nil, ErrNoRecords
	}
	if err := sw.close(); err != nil {
		return nil, err
	}
	size, err := w.Close()
	ok = true // Close has finished or dropped the upload either way
	if err != nil {
		return nil, err
	}
	le32 := func(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
	le64 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	values := map[int]int64{
		idPartition: sw.count, idOffset: sw.count, idTimestamp: sw.count, idKey: sw.count, idValue: sw.count,
	}
	nulls := map[int]int64{
		idPartition: 0, idOffset: 0, idTimestamp: 0, idKey: sw.nullKeys, idValue: sw.nullVals,
	}
	if s.cols.hasTxn() {
		// Null counts let a query engine skip files without transactions
		// (producer_id IS NOT NULL).
		for _, id := range []int{idProducerID, idProducerEpoch, idControl} {
			values[id] = sw.count
		}
		nulls[idProducerID], nulls[idProducerEpoch], nulls[idControl] = sw.count-sw.txnRows, sw.count-sw.txnRows, 0
	}
	// The typed columns get no counts: Iceberg keeps metrics of leaf
	// columns, and these are not computed.
	return &iceberg.DataFile{
		Content: iceberg.EntryContentData, FilePath: p, FileFormat: iceberg.ParquetFile,
		Partition:   map[string]any{meta.Spec().Fields[0].Name: ref.Partition},
		RecordCount: sw.count, FileSizeInBytes: size,
		ValueCounts: iceberg.IntLongs(values), NullValueCounts: iceberg.IntLongs(nulls),
		LowerBounds: iceberg.IntBytesOf(map[int][]byte{
			idPartition: le32(ref.Partition), idOffset: le64(sw.minOff), idTimestamp: le64(sw.minTs),
		}),
		UpperBounds: iceberg.IntBytesOf(map[int][]byte{
			idPartition: le32(ref.Partition), idOffset: le64(sw.maxOff), idTimestamp: le64(sw.maxTs),
		}),
	}, nil
}

// toDataFile describes a manifest entry in korvet's terms.
func toDataFile(df *iceberg.DataFile) DataFile {
	out := DataFile{
		Path:         df.FilePath,
		Records:      df.RecordCount,
		Bytes:        df.FileSizeInBytes,
		MinOffset:    -1,
		MaxOffset:    -1,
		MinTimestamp: -1,
		MaxTimestamp: -1,
	}
	if id, part, seg, ok := parseDataPath(out.Path); ok {
		out.TopicID, out.Partition, out.Segment = id, part, seg
	} else {
		out.Segment = -1
		if v, ok := df.Partition["partition"].(int32); ok {
			out.Partition = v
		}
	}
	i64 := func(b []byte) int64 {
		if len(b) == 8 {
			return int64(binary.LittleEndian.Uint64(b))
		}
		return -1
	}
	out.MinOffset, out.MaxOffset = i64(df.LowerBound(idOffset)), i64(df.UpperBound(idOffset))
	out.MinTimestamp, out.MaxTimestamp = i64(df.LowerBound(idTimestamp)), i64(df.UpperBound(idTimestamp))
	return out
}

// Files lists the segments the topic's table holds, by partition and
// offset; none if the table does not exist. (A crash between an upload
// and its bookkeeping needs no listing: Archive finds its file again.)
func (s *Store) Files(ctx context.Context, topic string) ([]DataFile, error) {
	if err := validTopic(topic); err != nil {
		return nil, err
	}
	ts, err := s.topic(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list files of topic %s: %w", topic, err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, err := s.loadTopic(ctx, ts, topic, nil); err != nil {
		if errors.Is(err, errNoTable) {
			return nil, nil
		}
		return nil, fmt.Errorf("list files of topic %s: %w", topic, err)
	}
	out := make([]DataFile, 0, len(ts.files))
	for _, e := range ts.files {
		out = append(out, toDataFile(&e.DataFile))
	}
	slices.SortFunc(out, func(a, b DataFile) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.MinOffset, b.MinOffset), cmp.Compare(a.Path, b.Path))
	})
	return out, nil
}

// Remove drops files from the topic's table (retention): a snapshot
// without them, then expiry of the older snapshots, then deletion of the
// objects. Files no longer in the table are skipped, so a retried Remove
// finishes what a failed one started.
func (s *Store) Remove(ctx context.Context, topic string, files []DataFile) error {
	if err := validTopic(topic); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	ts, err := s.topic(ctx, topic)
	if err != nil {
		return fmt.Errorf("remove files of topic %s: %w", topic, err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, err := s.loadTopic(ctx, ts, topic, nil); err != nil {
		if errors.Is(err, errNoTable) {
			return nil
		}
		return fmt.Errorf("remove files of topic %s: %w", topic, err)
	}
	for attempt := 0; ; attempt++ {
		err := s.removeFromTable(ctx, ts, topic, files)
		if err == nil {
			break
		}
		if !errors.Is(err, errCommitFailed) || attempt == maxCommitAttempts-1 {
			return fmt.Errorf("remove files of topic %s: %w", topic, err)
		}
		if _, err := s.reload(ctx, ts, topic, nil, attempt); err != nil {
			return fmt.Errorf("remove files of topic %s: %w", topic, err)
		}
	}
	for _, f := range files {
		if err := s.obj.remove(ctx, f.Path); err != nil {
			return fmt.Errorf("remove files of topic %s: %w", topic, err)
		}
		s.footers.forget(f.Path)
		s.groups.forget(f.Path)
	}
	return nil
}

// removeFromTable commits a snapshot without files, then expires the
// snapshots before it.
func (s *Store) removeFromTable(ctx context.Context, ts *topicState, topic string, files []DataFile) error {
	del := map[string]bool{}
	for _, f := range files {
		if _, ok := ts.files[f.Path]; ok {
			del[f.Path] = true
		}
	}
	if len(del) == 0 {
		return nil
	}
	if err := s.removeFiles(ctx, ts, topic, del, map[string]string{"korvet.operation": "retention"}); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	// Snapshots that still list the files would keep them readable (and
	// their objects referenced); expiring them deletes the manifests
	// nobody needs any more.
	if err := s.expire(ctx, ts, topic, 1); err != nil {
		return fmt.Errorf("expire snapshots: %w", err)
	}
	return nil
}

// Drop deletes a topic's table and all its files (DeleteTopics). A topic
// created again under the same name starts a new table.
func (s *Store) Drop(ctx context.Context, topic string) error {
	if err := validTopic(topic); err != nil {
		return err
	}
	ts, err := s.topic(ctx, topic)
	if err != nil {
		return fmt.Errorf("drop table of topic %s: %w", topic, err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for p := range ts.files {
		s.footers.forget(p)
		s.groups.forget(p)
	}
	ts.forget()
	if err := s.cat.dropTable(ctx, s.ident(topic)); err != nil && !errors.Is(err, errNoTable) {
		return fmt.Errorf("drop table of topic %s: %w", topic, err)
	}
	return nil
}
