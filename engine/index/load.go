package index

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
)

// Loader bulk-loads one partition's pointers, for a rebuild: updates are
// collected in memory and Flush writes them, sorted, into an SSTable that
// ends with the partition's checkpoint and ingests it. The keys are encoded
// exactly as Batch writes them; ingesting a whole table is atomic, so the
// checkpoint still never claims more than the index holds. Cheaper than
// batches: no memtable inserts, no flush, and the table is written once.
//
// Updates that come in key order (a partition whose keys were produced in
// order, as a bulk load of ids is) need no sorting, and the Loader does
// not wait for Flush to write them: once streamAfter of them came in
// order, it opens the table and writes each update into it as soon as the
// next one shows it is the key's latest, so that the table is written
// while the log is still being read instead of after it. A key that
// would break the order cannot go into that table: Fits tells, and the
// caller Flushes first (the checkpoint then says where the table ends).
//
// Not safe for concurrent use; loaders of different partitions may run in
// parallel.
type Loader struct {
	ix     *Index
	topic  TopicID
	part   int32
	ents   []loadEnt
	keys   []byte // the user keys, back to back
	key    []byte // scratch for encoded keys
	sorted bool   // ents are in key order (each key at or after the one before)

	wantEnts, wantKeys int // room to make once the buffers fill (Grow)

	// The table being written while updates come, nil when none; ents
	// then hold only the latest update, not written yet.
	sw       *sstable.Writer
	swPath   string
	streamed int   // updates written into sw
	swBytes  int   // what they would take in memory (Size)
	err      error // writing sw failed; Flush reports it
}

// streamAfter is how many updates in key order a Loader collects before
// it writes them into the table as they come: fewer, and a partition of
// keys in random order would open a table for its first few keys.
const streamAfter = 4096

// loadEnt is one update; seq orders updates of one key (the last wins).
// pre, the key's first 8 bytes, settles most comparisons of the sort
// without reaching for the key.
type loadEnt struct {
	pre        uint64
	koff, klen uint32
	seq        uint32
	del        bool
	ptr        [PointerSize]byte
}

// NewLoader starts a load of one partition of topic.
func (ix *Index) NewLoader(topic TopicID, partition int32) *Loader {
	return &Loader{ix: ix, topic: topic, part: partition, sorted: true}
}

// Set points key at p (key is copied). While a table is being written,
// key must Fit.
func (l *Loader) Set(key []byte, p Pointer) {
	if e := l.add(key); e != nil {
		e.del = false
		p.encode(&e.ptr)
	}
}

// Delete removes key's pointer (key is copied). While a table is being
// written, key must Fit.
func (l *Loader) Delete(key []byte) {
	if e := l.add(key); e != nil {
		e.del = true
	}
}

// Fits reports whether key can be added now: always, except while a
// table is being written and key sorts before the last key added. The
// caller then Flushes before it adds key.
func (l *Loader) Fits(key []byte) bool {
	return l.sw == nil || l.compareLast(prefix(key), key) >= 0
}

// prefix is a key's first 8 bytes, zero-padded, as a number: prefixes
// compare as the keys do, except where they are equal.
func prefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var pre [8]byte
	copy(pre[:], key)
	return binary.BigEndian.Uint64(pre[:])
}

// compareLast compares key (pre its prefix) with the last key added.
func (l *Loader) compareLast(pre uint64, key []byte) int {
	last := &l.ents[len(l.ents)-1]
	if pre != last.pre {
		return cmp.Compare(pre, last.pre)
	}
	return bytes.Compare(key, l.user(last))
}

func (l *Loader) user(e *loadEnt) []byte { return l.keys[e.koff : e.koff+e.klen] }

// add returns the entry to fill for an update of key: a new one, or,
// while a table is being written, the last one when key is its key.
func (l *Loader) add(key []byte) *loadEnt {
	pre := prefix(key)
	if l.sw != nil {
		c := l.compareLast(pre, key)
		switch {
		case c == 0:
			return &l.ents[0] // a later update of the same key
		case c < 0:
			if l.err == nil {
				l.err = fmt.Errorf("index: load: key %q added out of order to the table being written", key)
			}
			return nil
		}
		// key comes after the last one, which is its key's latest then.
		if err := l.put(l.sw, &l.ents[0]); err != nil {
			l.err = err
			return nil
		}
		l.streamed++
		l.swBytes += int(l.ents[0].klen) + loadEntSize
		l.ents, l.keys = l.ents[:0], l.keys[:0]
	} else if l.sorted && len(l.ents) > 0 && l.compareLast(pre, key) < 0 {
		l.sorted = false
	}
	if len(l.ents) == cap(l.ents) && l.wantEnts > cap(l.ents) {
		l.ents = slices.Grow(l.ents, l.wantEnts-len(l.ents))
	}
	if len(l.keys)+len(key) > cap(l.keys) && l.wantKeys > len(l.keys)+len(key) {
		l.keys = slices.Grow(l.keys, l.wantKeys-len(l.keys))
	}
	l.ents = append(l.ents, loadEnt{pre: pre, koff: uint32(len(l.keys)), klen: uint32(len(key)), seq: uint32(len(l.ents))})
	l.keys = append(l.keys, key...)
	e := &l.ents[len(l.ents)-1]
	if l.sw == nil && l.sorted && len(l.ents) >= streamAfter && l.err == nil {
		l.stream()
		if l.sw != nil && l.err == nil {
			e = &l.ents[0]
		}
	}
	return e
}

// stream opens the table and writes the updates collected, all in key
// order, but the last one into it.
func (l *Loader) stream() {
	w, path, err := l.create()
	if err != nil {
		l.err = err
		return
	}
	l.sw, l.swPath = w, path
	n := len(l.ents) - 1
	if err := l.write(w, l.ents, true); err != nil {
		l.err = err
		return
	}
	for i := range l.ents[:n] {
		l.swBytes += int(l.ents[i].klen) + loadEntSize
	}
	l.streamed += n
	last := l.ents[n]
	copy(l.keys, l.user(&last))
	l.keys = l.keys[:last.klen]
	last.koff, last.seq = 0, 0
	l.ents = append(l.ents[:0], last)
}

// Grow makes room for n more updates of keys of keyBytes in all, so
// that a load of known size does not copy its buffers as they grow: room
// for streamAfter of them now, and for all of them once they outgrow it
// (updates that come in key order are written as they come and need no
// more).
func (l *Loader) Grow(n, keyBytes int) {
	l.wantEnts, l.wantKeys = len(l.ents)+n, len(l.keys)+keyBytes
	l.ents = slices.Grow(l.ents, min(n, streamAfter))
	l.keys = slices.Grow(l.keys, min(keyBytes, keyBytes/max(n, 1)*streamAfter))
}

// Reset drops the updates collected since the last Flush, and the table
// being written, if any.
func (l *Loader) Reset() {
	if l.sw != nil {
		_ = l.sw.Close() // a table never ingested: only the file goes
		_ = l.ix.po.FS.Remove(l.swPath)
	}
	l.sw, l.swPath, l.streamed, l.swBytes, l.err = nil, "", 0, 0, nil
	l.ents, l.keys, l.sorted = l.ents[:0], l.keys[:0], true
}

// Len is the number of updates collected since the last Flush (those
// already written into the table included).
func (l *Loader) Len() int { return len(l.ents) + l.streamed }

// Size is the memory the collected updates take, in bytes, counting
// those already written into the table as if they were held; callers
// Flush before it passes their budget (and before 4 GiB of keys), so a
// table ends, with a checkpoint, where it would have ended in memory.
func (l *Loader) Size() int { return len(l.keys) + len(l.ents)*loadEntSize + l.swBytes }

const loadEntSize = 40

// Flush writes the collected updates, the latest per key, with the
// partition's checkpoint next, into one table and ingests it; the buffers
// are kept for the next run.
func (l *Loader) Flush(ctx context.Context, next int64) error {
	if err := l.flush(ctx, next); err != nil {
		n := l.Len()
		l.Reset()
		return fmt.Errorf("index: load %d updates: %w", n, err)
	}
	l.Reset()
	return nil
}

func (l *Loader) flush(ctx context.Context, next int64) error {
	if l.err != nil {
		return l.err
	}
	w := l.sw
	if w == nil {
		if !l.sorted {
			kb := l.keys
			slices.SortFunc(l.ents, func(a, b loadEnt) int {
				if a.pre != b.pre {
					return cmp.Compare(a.pre, b.pre) // zero padding sorts as bytes.Compare does
				}
				if c := bytes.Compare(kb[a.koff:a.koff+a.klen], kb[b.koff:b.koff+b.klen]); c != 0 {
					return c
				}
				return cmp.Compare(a.seq, b.seq)
			})
		}
		var err error
		if w, l.swPath, err = l.create(); err != nil {
			return err
		}
		l.sw = w
	}
	err := l.write(w, l.ents, false)
	if err == nil {
		// Checkpoint keys sort after every pointer key (namespace byte).
		l.key = checkpointKey(l.key, l.topic, l.part)
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(next))
		err = w.Set(l.key, v[:])
	}
	l.sw = nil
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	path := l.swPath
	defer l.ix.po.FS.Remove(path) //nolint:errcheck // ingestion links the table; the name is ours to drop
	if err == nil {
		err = l.ix.db.Ingest(ctx, []string{path})
	}
	return err
}

// create opens a new table file in the index directory (Open removes
// those a crash left behind). Its data blocks are compressed with zstd at
// level 1 (Pebble's Balanced profile), not 3 as compactions do: level 3
// took a quarter of a rebuild's CPU for 4% fewer bytes (7.54 MB for 1M
// keys of 9 bytes, 7.85-8.02 at level 1).
func (l *Loader) create() (*sstable.Writer, string, error) {
	path := filepath.Join(l.ix.dir, fmt.Sprintf("load-%d-%d.sst", os.Getpid(), l.ix.loads.Add(1)))
	f, err := l.ix.po.FS.Create(path, "")
	if err != nil {
		return nil, "", err
	}
	wo := l.ix.po.MakeWriterOptions(0, l.ix.db.TableFormat())
	wo.Compression = block.BalancedCompression
	return sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo), path, nil
}

// write writes ents, sorted, into w: of updates of one key, only the last
// (the one a later update of the same key does not follow). With
// keepLast, ents[len(ents)-1] is left out: more updates of its key may
// come.
func (l *Loader) write(w *sstable.Writer, ents []loadEnt, keepLast bool) error {
	n := len(ents)
	if keepLast {
		n--
	}
	for i := range n {
		e := &ents[i]
		if i+1 < len(ents) && e.klen == ents[i+1].klen && bytes.Equal(l.user(e), l.user(&ents[i+1])) {
			continue // a later update of the same key follows
		}
		if err := l.put(w, e); err != nil {
			return err
		}
	}
	return nil
}

// put writes one update into w.
func (l *Loader) put(w *sstable.Writer, e *loadEnt) error {
	l.key = dataKey(l.key, l.topic, l.user(e))
	if e.del {
		return w.Delete(l.key)
	}
	return w.Set(l.key, e.ptr[:])
}
