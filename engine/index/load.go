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
)

// Loader bulk-loads one partition's pointers, for a rebuild: updates are
// collected in memory and Flush writes them, sorted, into an SSTable that
// ends with the partition's checkpoint and ingests it. The keys are encoded
// exactly as Batch writes them; ingesting a whole table is atomic, so the
// checkpoint still never claims more than the index holds. Cheaper than
// batches: no memtable inserts, no flush, and the table is written once.
// Not safe for concurrent use; loaders of different partitions may run in
// parallel.
type Loader struct {
	ix    *Index
	topic TopicID
	part  int32
	ents  []loadEnt
	keys  []byte // the user keys, back to back
	key   []byte // scratch for encoded keys
}

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
	return &Loader{ix: ix, topic: topic, part: partition}
}

// Set points key at p (key is copied).
func (l *Loader) Set(key []byte, p Pointer) {
	e := l.add(key)
	p.encode(&e.ptr)
}

// Delete removes key's pointer (key is copied).
func (l *Loader) Delete(key []byte) { l.add(key).del = true }

func (l *Loader) add(key []byte) *loadEnt {
	var pre [8]byte
	copy(pre[:], key)
	l.ents = append(l.ents, loadEnt{pre: binary.BigEndian.Uint64(pre[:]), koff: uint32(len(l.keys)), klen: uint32(len(key)), seq: uint32(len(l.ents))})
	l.keys = append(l.keys, key...)
	return &l.ents[len(l.ents)-1]
}

// Grow makes room for n more updates of keys of keyBytes in all, so
// that a load of known size does not copy its buffers as they grow.
func (l *Loader) Grow(n, keyBytes int) {
	l.ents = slices.Grow(l.ents, n)
	l.keys = slices.Grow(l.keys, keyBytes)
}

// Reset drops the updates collected since the last Flush.
func (l *Loader) Reset() { l.ents, l.keys = l.ents[:0], l.keys[:0] }

// Len is the number of updates collected since the last Flush.
func (l *Loader) Len() int { return len(l.ents) }

// Size is the memory the collected updates take, in bytes; callers Flush
// before it passes their budget (and before 4 GiB of keys).
func (l *Loader) Size() int { return len(l.keys) + len(l.ents)*loadEntSize }

const loadEntSize = 40

// Flush writes the collected updates, the latest per key, with the
// partition's checkpoint next, into one table and ingests it; the buffers
// are kept for the next run.
func (l *Loader) Flush(ctx context.Context, next int64) error {
	kb := l.keys
	user := func(e *loadEnt) []byte { return kb[e.koff : e.koff+e.klen] }
	slices.SortFunc(l.ents, func(a, b loadEnt) int {
		if a.pre != b.pre {
			return cmp.Compare(a.pre, b.pre) // zero padding sorts as bytes.Compare does
		}
		if c := bytes.Compare(user(&a), user(&b)); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	path := filepath.Join(l.ix.dir, fmt.Sprintf("load-%d-%d.sst", os.Getpid(), l.ix.loads.Add(1)))
	f, err := l.ix.po.FS.Create(path, "")
	if err != nil {
		return fmt.Errorf("index: load: %w", err)
	}
	defer l.ix.po.FS.Remove(path) //nolint:errcheck // ingestion links the table; the name is ours to drop
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), l.ix.po.MakeWriterOptions(0, l.ix.db.TableFormat()))
	err = l.write(w, user, next)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.ix.db.Ingest(ctx, []string{path})
	}
	if err != nil {
		return fmt.Errorf("index: load %d updates: %w", len(l.ents), err)
	}
	l.Reset()
	return nil
}

func (l *Loader) write(w *sstable.Writer, user func(*loadEnt) []byte, next int64) error {
	for i := range l.ents {
		e := &l.ents[i]
		k := user(e)
		if i+1 < len(l.ents) && bytes.Equal(k, user(&l.ents[i+1])) {
			continue // a later update of the same key follows
		}
		l.key = dataKey(l.key, l.topic, k)
		var err error
		if e.del {
			err = w.Delete(l.key)
		} else {
			err = w.Set(l.key, e.ptr[:])
		}
		if err != nil {
			return err
		}
	}
	// Checkpoint keys sort after every pointer key (namespace byte).
	l.key = checkpointKey(l.key, l.topic, l.part)
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(next))
	return w.Set(l.key, v[:])
}
