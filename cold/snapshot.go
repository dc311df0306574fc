package cold

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/cold/icemeta"
)

// Snapshots: manifests and manifest lists are written with cold/iceberg
// (Avro), the table metadata with icemeta.

// readSnapshot reads a snapshot's manifests and its data files.
func (s *Store) readSnapshot(ctx context.Context, snap *icemeta.Snapshot) ([]iceberg.ManifestFile, map[string]iceberg.ManifestEntry, error) {
	files := make(map[string]iceberg.ManifestEntry)
	if snap == nil {
		return nil, files, nil
	}
	mans, err := s.readManifestList(ctx, snap.ManifestList)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range mans {
		if m.Content != iceberg.ManifestContentData {
			continue
		}
		b, err := s.obj.get(ctx, m.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("read manifest %s: %w", m.Path, err)
		}
		entries, err := iceberg.ReadManifest(m, b, true)
		if err != nil {
			return nil, nil, fmt.Errorf("read manifest: %w", err)
		}
		for _, e := range entries {
			files[e.DataFile.FilePath] = e
		}
	}
	return mans, files, nil
}

func (s *Store) readManifestList(ctx context.Context, p string) ([]iceberg.ManifestFile, error) {
	b, err := s.obj.get(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read manifest list: %w", err)
	}
	mans, err := iceberg.ReadManifestList(b)
	if err != nil {
		return nil, fmt.Errorf("read manifest list %s: %w", p, err)
	}
	return mans, nil
}

// writeManifest writes a data manifest of snapshot id: existing entries
// (as EXISTING, keeping their sequence numbers) and added ones.
func (s *Store) writeManifest(ctx context.Context, meta *icemeta.Metadata, sc *iceberg.Schema, id int64, existing []iceberg.ManifestEntry, added []*iceberg.DataFile) (iceberg.ManifestFile, error) {
	entries := make([]iceberg.ManifestEntry, 0, len(existing)+len(added))
	for _, e := range existing {
		e.Status = iceberg.EntryStatusEXISTING
		entries = append(entries, e)
	}
	for _, df := range added {
		entries = append(entries, iceberg.ManifestEntry{Status: iceberg.EntryStatusADDED, DataFile: *df})
	}
	var buf bytes.Buffer
	mf, err := iceberg.WriteManifest(&buf, *meta.Spec(), sc, id, entries)
	if err != nil {
		return iceberg.ManifestFile{}, err
	}
	mf.Path, mf.Length = joinURI(meta.Location, "metadata", icemeta.NewUUID()+"-m0.avro"), int64(buf.Len())
	if err := s.obj.put(ctx, mf.Path, buf.Bytes()); err != nil {
		return iceberg.ManifestFile{}, fmt.Errorf("write manifest: %w", err)
	}
	return mf, nil
}

// newSnapshotID picks an unused positive snapshot id.
func newSnapshotID(meta *icemeta.Metadata) int64 {
	for {
		id := rand.Int64N(math.MaxInt64-1) + 1
		if meta.Snapshot(id) == nil {
			return id
		}
	}
}

// sortedEntries lists entries by path, so manifests come out the same for
// the same files.
func sortedEntries(files map[string]iceberg.ManifestEntry) []iceberg.ManifestEntry {
	return slices.SortedFunc(maps.Values(files), func(a, b iceberg.ManifestEntry) int {
		return cmp.Compare(a.DataFile.FilePath, b.DataFile.FilePath)
	})
}

// appendFiles commits a snapshot that adds dfs (operation "append"), in
// one new manifest, with the schema updates ups (sc is the schema they
// make current).
func (s *Store) appendFiles(ctx context.Context, ts *topicState, topic string, dfs []*iceberg.DataFile, sc *iceberg.Schema, ups []icemeta.Update, props map[string]string) error {
	meta := ts.meta
	id, seq := newSnapshotID(meta), meta.LastSequenceNumber+1
	var mans, data []iceberg.ManifestFile
	for _, m := range ts.manifests {
		if m.Content == iceberg.ManifestContentData {
			data = append(data, m)
		} else {
			mans = append(mans, m)
		}
	}
	var existing []iceberg.ManifestEntry
	if len(data)+1 > s.maxMans {
		existing, data = sortedEntries(ts.files), nil
	}
	mf, err := s.writeManifest(ctx, meta, sc, id, existing, dfs)
	if err != nil {
		return err
	}
	mans = append(append(mans, data...), mf)
	files := maps.Clone(ts.files)
	var records, size int64
	parts := map[any]bool{}
	for _, df := range dfs {
		files[df.FilePath] = iceberg.ManifestEntry{
			Status: iceberg.EntryStatusADDED, SnapshotID: &id, SequenceNumber: &seq, FileSequenceNumber: &seq, DataFile: *df,
		}
		records += df.RecordCount
		size += df.FileSizeInBytes
		for _, v := range df.Partition {
			parts[v] = true // (one partition field: the Kafka partition)
		}
	}
	sum := summary("append", files, props)
	sum["added-data-files"] = strconv.Itoa(len(dfs))
	sum["added-records"] = strconv.FormatInt(records, 10)
	sum["added-files-size"] = strconv.FormatInt(size, 10)
	sum["changed-partition-count"] = strconv.Itoa(max(len(parts), 1))
	if _, ok := meta.Properties[icemeta.PropNameMapping]; !ok {
		// Readers map files without field ids by name; iceberg-go's
		// and Java's writers set the mapping on a table's first append
		// too.
		b, err := json.Marshal(sc.NameMapping())
		if err != nil {
			return fmt.Errorf("name mapping: %w", err)
		}
		ups = append(ups, icemeta.SetProperties(map[string]string{icemeta.PropNameMapping: string(b)}))
	}
	return s.commitSnapshot(ctx, ts, topic, id, seq, sc, ups, mans, sum, files, []string{mf.Path})
}

// removeFiles commits a snapshot without the files in del (operation
// "delete"): the kept files move to one new manifest.
func (s *Store) removeFiles(ctx context.Context, ts *topicState, topic string, del map[string]bool, props map[string]string) error {
	meta := ts.meta
	id, seq := newSnapshotID(meta), meta.LastSequenceNumber+1
	var mans []iceberg.ManifestFile
	for _, m := range ts.manifests {
		if m.Content != iceberg.ManifestContentData {
			mans = append(mans, m)
		}
	}
	files := maps.Clone(ts.files)
	var delRecords, delBytes int64
	for p := range del {
		if e, ok := files[p]; ok {
			delRecords += e.DataFile.RecordCount
			delBytes += e.DataFile.FileSizeInBytes
			delete(files, p)
		}
	}
	var written []string
	if len(files) > 0 {
		mf, err := s.writeManifest(ctx, meta, meta.CurrentSchema(), id, sortedEntries(files), nil)
		if err != nil {
			return err
		}
		mans = append(mans, mf)
		written = append(written, mf.Path)
	}
	sum := summary("delete", files, props)
	sum["deleted-data-files"] = strconv.Itoa(len(ts.files) - len(files))
	sum["deleted-records"] = strconv.FormatInt(delRecords, 10)
	sum["removed-files-size"] = strconv.FormatInt(delBytes, 10)
	return s.commitSnapshot(ctx, ts, topic, id, seq, meta.CurrentSchema(), nil, mans, sum, files, written)
}

// summary is a snapshot summary with the table's totals after it.
func summary(op string, files map[string]iceberg.ManifestEntry, props map[string]string) map[string]string {
	var records, size int64
	for _, e := range files {
		records += e.DataFile.RecordCount
		size += e.DataFile.FileSizeInBytes
	}
	sum := maps.Clone(props)
	if sum == nil {
		sum = map[string]string{}
	}
	maps.Copy(sum, map[string]string{
		"operation":              op,
		"total-data-files":       strconv.Itoa(len(files)),
		"total-delete-files":     "0",
		"total-records":          strconv.FormatInt(records, 10),
		"total-files-size":       strconv.FormatInt(size, 10),
		"total-position-deletes": "0",
		"total-equality-deletes": "0",
	})
	return sum
}

// commitSnapshot writes the manifest list of snapshot id and commits the
// snapshot (with the updates ups before it) as the main branch. On
// success ts caches the new table with files; after a lost race the
// objects written for it (written, the list) are deleted, and after any
// error the cache is dropped.
func (s *Store) commitSnapshot(ctx context.Context, ts *topicState, topic string, id, seq int64, sc *iceberg.Schema, ups []icemeta.Update, mans []iceberg.ManifestFile, sum map[string]string, files map[string]iceberg.ManifestEntry, written []string) error {
	meta := ts.meta
	var parent *int64
	if meta.CurrentSnapshotID != nil {
		p := *meta.CurrentSnapshotID
		parent = &p
	}
	var buf bytes.Buffer
	// The manifests as written carry their sequence numbers.
	mans, err := iceberg.WriteManifestList(&buf, id, parent, seq, mans)
	if err != nil {
		return err
	}
	list := joinURI(meta.Location, "metadata", fmt.Sprintf("snap-%d-1-%s.avro", id, icemeta.NewUUID()))
	if err := s.obj.put(ctx, list, buf.Bytes()); err != nil {
		return fmt.Errorf("write manifest list: %w", err)
	}
	written = append(written, list)
	schemaID := sc.ID
	snap := icemeta.Snapshot{
		SnapshotID: id, ParentSnapshotID: parent, SequenceNumber: seq, TimestampMs: time.Now().UnixMilli(),
		ManifestList: list, Summary: sum, SchemaID: &schemaID,
	}
	reqs := icemeta.Requirements(meta, len(ups) > 0)
	next, loc, err := s.cat.commitTable(ctx, s.ident(topic), reqs, append(ups, icemeta.AddSnapshot(snap)...))
	if err != nil {
		ts.forget()
		if errors.Is(err, errCommitFailed) {
			for _, p := range written {
				if rerr := s.obj.remove(ctx, p); rerr != nil {
					s.log.Warn("cold: orphaned file not deleted", "file", p, "err", rerr)
				}
			}
		}
		return err
	}
	ts.meta, ts.loc, ts.manifests, ts.files = next, loc, mans, files
	return nil
}

// expire removes the snapshots before the main branch's retain newest,
// then deletes the manifest lists and manifests only they used.
func (s *Store) expire(ctx context.Context, ts *topicState, topic string, retain int) error {
	meta := ts.meta
	ids := icemeta.ExpireSnapshots(meta, retain)
	if len(ids) == 0 {
		return nil
	}
	var lists []string
	for _, id := range ids {
		lists = append(lists, meta.Snapshot(id).ManifestList)
	}
	next, loc, err := s.cat.commitTable(ctx, s.ident(topic), icemeta.Requirements(meta, false), []icemeta.Update{icemeta.RemoveSnapshots(ids)})
	if err != nil {
		ts.forget()
		return err
	}
	ts.meta, ts.loc = next, loc
	if err := s.deleteUnreferenced(ctx, ts, lists); err != nil {
		// Only space is lost.
		s.log.Warn("cold: expired snapshots' files not deleted", "topic", topic, "err", err)
	}
	return nil
}

// deleteUnreferenced deletes the manifest lists of expired snapshots and
// their manifests that the table's snapshots no longer use.
func (s *Store) deleteUnreferenced(ctx context.Context, ts *topicState, lists []string) error {
	used := map[string]bool{}
	for _, m := range ts.manifests {
		used[m.Path] = true
	}
	for _, snap := range ts.meta.Snapshots {
		if ts.meta.CurrentSnapshotID != nil && snap.SnapshotID == *ts.meta.CurrentSnapshotID {
			continue
		}
		mans, err := s.readManifestList(ctx, snap.ManifestList)
		if err != nil {
			return err
		}
		for _, m := range mans {
			used[m.Path] = true
		}
	}
	for _, l := range lists {
		mans, err := s.readManifestList(ctx, l)
		if err != nil {
			return err
		}
		for _, m := range mans {
			if !used[m.Path] {
				used[m.Path] = true // once
				if err := s.obj.remove(ctx, m.Path); err != nil {
					return err
				}
			}
		}
		if err := s.obj.remove(ctx, l); err != nil {
			return err
		}
	}
	return nil
}
