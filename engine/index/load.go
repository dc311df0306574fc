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

	order, tmp []sortEnt // Flush's sort, and its scratch
	blk        []loadEnt // updates copied in order (writeOrder)
	blkKeys    []byte

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

// loadEnt is one update (24 bytes); of updates of one key, the later one
// (further in ents) wins.
type loadEnt struct {
	koff, klen uint32
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
	last := l.user(&l.ents[len(l.ents)-1])
	if lp := prefix(last); pre != lp {
		return cmp.Compare(pre, lp)
	}
	return bytes.Compare(key, last)
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
		l.swBytes += int(l.ents[0].klen) + entSize
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
	l.ents = append(l.ents, loadEnt{koff: uint32(len(l.keys)), klen: uint32(len(key))})
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
	if err := l.write(w, l.ents, nil, true); err != nil {
		l.err = err
		return
	}
	for i := range l.ents[:n] {
		l.swBytes += int(l.ents[i].klen) + entSize
	}
	l.streamed += n
	last := l.ents[n]
	copy(l.keys, l.user(&last))
	l.keys = l.keys[:last.klen]
	last.koff = 0
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
// those already written into the table as if they were held (without a
// share in a sort they need not); callers Flush before it passes their
// budget (and before 4 GiB of keys), so that a table that takes no
// memory still ends, with a checkpoint, now and then.
func (l *Loader) Size() int { return len(l.keys) + len(l.ents)*loadEntSize + l.swBytes }

// LoadEntrySize is the memory an update takes in a Loader beside its key
// (Size): its entry, and its place and scratch in Flush's sort.
const LoadEntrySize = loadEntSize

const (
	entSize     = 24 // a loadEnt
	loadEntSize = entSize + 2*16
)

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
	var order []sortEnt
	if w == nil {
		if !l.sorted {
			order = l.sortEnts()
		}
		var err error
		if w, l.swPath, err = l.create(); err != nil {
			return err
		}
		l.sw = w
	}
	err := l.write(w, l.ents, order, false)
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

// sortEnt is an update's place in Flush's sort: pre holds its key's 8
// bytes at the depth sorted on (past the prefix every key shares),
// zero-padded, tail how many bytes of the key are left there (at most 9:
// more than pre holds), idx where it is in ents.
type sortEnt struct {
	pre  uint64
	idx  uint32
	tail uint8
}

// sortEnts returns the order of ents by key, the updates of one key in
// the order they came. Keys of a partition often share a long prefix
// ("user-000…"): past it, 8 bytes and the length settle the order of
// nearly all of them, sorted by radix (stable: the updates of one key
// stay in order) without reaching for the keys; only runs that share
// those 8 bytes too are sorted by the rest of their keys.
func (l *Loader) sortEnts() []sortEnt {
	ents := l.ents
	depth := 0
	if len(ents) > 0 {
		first := l.user(&ents[0])
		depth = len(first)
		for i := 1; i < len(ents) && depth > 0; i++ {
			k := l.user(&ents[i])
			n := min(depth, len(k))
			c := 0
			for c < n && k[c] == first[c] {
				c++
			}
			depth = c
		}
	}
	order := slices.Grow(l.order[:0], len(ents))[:len(ents)]
	for i := range ents {
		k := l.user(&ents[i])[depth:]
		order[i] = sortEnt{pre: prefix(k), idx: uint32(i), tail: uint8(min(len(k), 9))}
	}
	tmp := slices.Grow(l.tmp[:0], len(ents))[:len(ents)]
	radixSort(order, tmp)
	l.order, l.tmp = order, tmp
	// Runs of keys alike in those 8 bytes and longer: by the rest.
	kb := l.keys
	rest := func(o sortEnt) []byte { e := &ents[o.idx]; return kb[int(e.koff)+depth+8 : e.koff+e.klen] }
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && order[j].pre == order[i].pre && order[j].tail == order[i].tail {
			j++
		}
		if order[i].tail == 9 && j-i > 1 {
			slices.SortStableFunc(order[i:j], func(a, b sortEnt) int { return bytes.Compare(rest(a), rest(b)) })
		}
		i = j
	}
	return order
}

// radixSort sorts a by (pre, tail), stably, least significant byte first
// (tmp, as long, is scratch); bytes all entries share are skipped.
func radixSort(a, tmp []sortEnt) {
	var counts [9][256]int
	for i := range a {
		e := &a[i]
		counts[0][e.tail]++
		for d := range 8 {
			counts[d+1][byte(e.pre>>(8*d))]++
		}
	}
	src, dst := a, tmp
	for d := range 9 {
		c := &counts[d]
		if c[digit(&src[0], d)] == len(src) {
			continue // the same byte everywhere
		}
		at := 0
		for v := range c {
			at, c[v] = at+c[v], at
		}
		for i := range src {
			v := digit(&src[i], d)
			dst[c[v]] = src[i]
			c[v]++
		}
		src, dst = dst, src
	}
	if &src[0] != &a[0] {
		copy(a, src)
	}
}

// digit is byte d of the sort key, least significant first: the tail,
// then pre's bytes from its last.
func digit(e *sortEnt, d int) byte {
	if d == 0 {
		return e.tail
	}
	return byte(e.pre >> (8 * (d - 1)))
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

// write writes ents into w, in key order: as they are, or in order (the
// indexes sortEnts gives). Of updates of one key, only the last goes
// (the one a later update of the same key does not follow). With
// keepLast, the last of ents is left out: more updates of its key may
// come.
func (l *Loader) write(w *sstable.Writer, ents []loadEnt, order []sortEnt, keepLast bool) error {
	if order != nil {
		return l.writeOrder(w, ents, order)
	}
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

// gatherBlock is how many updates writeOrder copies in key order at a
// time.
const gatherBlock = 1024

// writeOrder is write in order. The updates, scattered over ents and
// keys, are copied a block at a time, in order, into small buffers
// first: the copy's loads (cache misses, mostly) overlap one another,
// those of the writer's loop would not (it took a third of a Flush of
// 500k keys in random order).
func (l *Loader) writeOrder(w *sstable.Writer, ents []loadEnt, order []sortEnt) error {
	for at := 0; at < len(order); at += gatherBlock {
		// One more than the block: the next key tells whether the
		// block's last is its key's last update.
		end := min(at+gatherBlock+1, len(order))
		blk, kb := l.blk[:0], l.blkKeys[:0]
		for _, o := range order[at:end] {
			e := ents[o.idx]
			kb = append(kb, l.keys[e.koff:e.koff+e.klen]...)
			e.koff = uint32(len(kb)) - e.klen
			blk = append(blk, e)
		}
		l.blk, l.blkKeys = blk, kb
		user := func(e *loadEnt) []byte { return kb[e.koff : e.koff+e.klen] }
		for i := range min(gatherBlock, len(blk)) {
			e := &blk[i]
			if i+1 < len(blk) && e.klen == blk[i+1].klen && bytes.Equal(user(e), user(&blk[i+1])) {
				continue // a later update of the same key follows
			}
			l.key = dataKey(l.key, l.topic, user(e))
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
