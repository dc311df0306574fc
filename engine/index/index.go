// Package index is the KV view's key index: a Pebble store that maps each
// key of an indexed topic to where its latest record lives in the log
// (partition, offset), plus one checkpoint per partition saying how far
// the log has been applied.
//
// It stores pointers, never values, and it is disposable: everything in it
// can be rebuilt from the log. So writes are not synced; what must hold is
// that a checkpoint never claims more than the index holds, which Pebble's
// atomic batches give as long as a checkpoint is written in the same batch
// as the pointers it covers.
//
// Layout of Pebble keys (one namespace byte, so the kinds never collide):
//
//	0x01 topic-id(16) user-key        -> pointer (12 bytes)
//	0x02 topic-id(16) partition(4 BE) -> next offset to apply (8 bytes BE)
//
// A pointer is partition (int32, big-endian; the top bit marks a
// tombstone kept for compaction) then offset (int64, big-endian).
package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrLocked means another process (a running korvet, or a korvet index
// command) has the index directory open.
var ErrLocked = errors.New("index directory is in use by another process")

const (
	nsKey        byte = 0x01
	nsCheckpoint byte = 0x02

	// PointerSize is the size of a stored pointer.
	PointerSize = 12
	tombBit     = uint32(1) << 31
)

// TopicID is a topic's UUID; keys are scoped by it, so a topic deleted and
// created again under the same name starts from an empty index.
type TopicID = [16]byte

// Pointer says where a key's latest record is.
type Pointer struct {
	Partition int32
	Offset    int64
	// Tombstone marks a key whose latest record is a tombstone. Such
	// pointers exist only for compacted topics, until compaction removes
	// the tombstone from the log; a lookup treats them as absent.
	Tombstone bool
}

func (p Pointer) encode(dst *[PointerSize]byte) {
	part := uint32(p.Partition)
	if p.Tombstone {
		part |= tombBit
	}
	binary.BigEndian.PutUint32(dst[:4], part)
	binary.BigEndian.PutUint64(dst[4:], uint64(p.Offset))
}

func decodePointer(b []byte) (Pointer, error) {
	if len(b) != PointerSize {
		return Pointer{}, fmt.Errorf("index: pointer of %d bytes, want %d", len(b), PointerSize)
	}
	part := binary.BigEndian.Uint32(b[:4])
	return Pointer{
		Partition: int32(part &^ tombBit),
		Offset:    int64(binary.BigEndian.Uint64(b[4:])),
		Tombstone: part&tombBit != 0,
	}, nil
}

// Options configure an Index.
type Options struct {
	// Bulk tunes the store for one big load (a rebuild): no WAL, large
	// memtables. Only Close, which flushes, makes it durable.
	Bulk bool
	// CacheSize is Pebble's block cache; default 16 MiB.
	CacheSize int64
	Logger    *slog.Logger
}

// Index is the key index. It is safe for concurrent use.
type Index struct {
	db    *pebble.DB
	po    *pebble.Options // as opened, for the tables a Loader writes
	dir   string
	loads atomic.Uint64 // names the tables of Loaders
}

// Open opens (creating if needed) the index in dir.
func Open(dir string, opts Options) (*Index, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 16 << 20
	}
	po := pebbleOptions(opts)
	lock, err := pebble.LockDirectory(dir, po.FS)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	po.Lock = lock
	// Tables a Loader wrote but a crash kept from being ingested or removed.
	if left, _ := filepath.Glob(filepath.Join(dir, "load-*.sst")); len(left) > 0 {
		for _, f := range left {
			_ = os.Remove(f)
		}
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	// The DB holds its own reference to the lock from here on; closing ours
	// lets Close release the file lock.
	lock.Close()
	po.EnsureDefaults()
	return &Index{db: db, po: po, dir: dir}, nil
}

func pebbleOptions(opts Options) *pebble.Options {
	po := &pebble.Options{
		CacheSize:          opts.CacheSize,
		FormatMajorVersion: pebble.FormatNewest,
		// Small memtables keep the WAL (and recycled WAL files) small; the
		// index takes a few bytes per record, so 4 MiB is many appends.
		MemTableSize:                2 << 20,
		MemTableStopWritesThreshold: 2,
		L0CompactionThreshold:       4,
		MaxOpenFiles:                256,
		Logger:                      quietLogger{log: opts.Logger},
		FS:                          vfs.Default,
	}
	if opts.Bulk {
		po.DisableWAL = true
		po.MemTableSize = 64 << 20
		po.MemTableStopWritesThreshold = 4
		po.L0CompactionThreshold = 8
		po.L0StopWritesThreshold = 64
	}
	// Pointers are small and keys share long prefixes (the topic id, key
	// patterns), so blocks compress well: zstd everywhere.
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return block.ZstdCompression }
		po.Levels[i].BlockSize = 16 << 10
	}
	po.Experimental.EnableColumnarBlocks = func() bool { return true }
	return po
}

// quietLogger sends Pebble's informational chatter to debug.
type quietLogger struct{ log *slog.Logger }

func (l quietLogger) Infof(format string, args ...any) {
	if l.log != nil {
		l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l quietLogger) Errorf(format string, args ...any) {
	if l.log != nil {
		l.log.Error("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l quietLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.log != nil {
		l.log.Error("pebble: fatal: " + msg)
	}
	panic("pebble: " + msg)
}

// Dir is the index's directory.
func (ix *Index) Dir() string { return ix.dir }

// Close flushes the memtable, so that a restart replays no WAL and the
// directory holds only compressed tables, and closes the store.
func (ix *Index) Close() error {
	err := ix.db.Flush()
	if cerr := ix.db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = removeRecycledLogs(ix.dir)
	}
	if err != nil {
		return fmt.Errorf("index: close %s: %w", ix.dir, err)
	}
	return nil
}

// removeRecycledLogs deletes the WAL files a closed store keeps for
// recycling: Pebble holds up to MemTableStopWritesThreshold+1 of them,
// each as large as a memtable, which would be most of a small index's
// size. After a clean close every log but the newest is obsolete (the
// memtable was flushed), and Pebble deletes such logs itself on open.
func removeRecycledLogs(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var logs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") && e.Type().IsRegular() {
			logs = append(logs, e.Name())
		}
	}
	// Log names are zero-padded numbers: sorted names are sorted numbers.
	sort.Strings(logs)
	for i := 0; i+1 < len(logs); i++ {
		if err := os.Remove(filepath.Join(dir, logs[i])); err != nil {
			return err
		}
	}
	return nil
}

func dataKey(dst []byte, topic TopicID, key []byte) []byte {
	dst = append(dst[:0], nsKey)
	dst = append(dst, topic[:]...)
	return append(dst, key...)
}

func checkpointKey(dst []byte, topic TopicID, partition int32) []byte {
	dst = append(dst[:0], nsCheckpoint)
	dst = append(dst, topic[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// topicBounds returns [lo, hi) covering every key of ns and topic.
func topicBounds(ns byte, topic TopicID) (lo, hi []byte) {
	lo = append([]byte{ns}, topic[:]...)
	hi = bytes.Clone(lo)
	for i := len(hi) - 1; i >= 0; i-- {
		hi[i]++
		if hi[i] != 0 {
			break
		}
	}
	return lo, hi
}

// Get returns the pointer of key; ok is false when the key has none.
// Tombstone pointers are returned as they are (ok true).
func (ix *Index) Get(topic TopicID, key []byte) (p Pointer, ok bool, err error) {
	var buf [64]byte
	v, closer, err := ix.db.Get(dataKey(buf[:0], topic, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return Pointer{}, false, nil
	}
	if err != nil {
		return Pointer{}, false, fmt.Errorf("index: get: %w", err)
	}
	p, err = decodePointer(v)
	closer.Close()
	return p, err == nil, err
}

// Checkpoint returns the next offset to apply for a partition; ok is false
// when the partition has never been indexed.
func (ix *Index) Checkpoint(topic TopicID, partition int32) (next int64, ok bool, err error) {
	var buf [24]byte
	v, closer, err := ix.db.Get(checkpointKey(buf[:0], topic, partition))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("index: get checkpoint: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, false, fmt.Errorf("index: checkpoint of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// Topics returns the ids of the topics that have a checkpoint.
func (ix *Index) Topics() ([]TopicID, error) {
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: []byte{nsCheckpoint}, UpperBound: []byte{nsCheckpoint + 1}})
	if err != nil {
		return nil, fmt.Errorf("index: list topics: %w", err)
	}
	defer it.Close()
	var out []TopicID
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 17 {
			valid = it.Next()
			continue
		}
		var id TopicID
		copy(id[:], k[1:17])
		out = append(out, id)
		_, hi := topicBounds(nsCheckpoint, id)
		valid = it.SeekGE(hi)
	}
	return out, it.Error()
}

// DropTopic removes a topic's pointers and checkpoints in one batch.
func (ix *Index) DropTopic(topic TopicID) error {
	b := ix.db.NewBatch()
	defer b.Close()
	for _, ns := range []byte{nsKey, nsCheckpoint} {
		lo, hi := topicBounds(ns, topic)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return fmt.Errorf("index: drop topic: %w", err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("index: drop topic: %w", err)
	}
	return nil
}

// Scan calls fn for each key of topic in key order, tombstone pointers
// included, until fn returns false. key is valid only during the call.
func (ix *Index) Scan(ctx context.Context, topic TopicID, fn func(key []byte, p Pointer) bool) error {
	lo, hi := topicBounds(nsKey, topic)
	it, err := ix.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("index: scan: %w", err)
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		p, err := decodePointer(it.Value())
		if err != nil {
			return err
		}
		if !fn(it.Key()[17:], p) {
			break
		}
	}
	return it.Error()
}

// Count returns the number of live keys and of tombstone pointers of a
// topic. It scans the topic's keys: callers cache it.
func (ix *Index) Count(ctx context.Context, topic TopicID) (live, tombstones int64, err error) {
	err = ix.Scan(ctx, topic, func(_ []byte, p Pointer) bool {
		if p.Tombstone {
			tombstones++
		} else {
			live++
		}
		return true
	})
	return live, tombstones, err
}

// DiskUsage estimates the bytes a topic's keys take on disk.
func (ix *Index) DiskUsage(topic TopicID) uint64 {
	lo, hi := topicBounds(nsKey, topic)
	n, err := ix.db.EstimateDiskUsage(lo, hi)
	if err != nil {
		return 0
	}
	return n
}

// DiskSize is the bytes of every file of the index, WAL included.
func (ix *Index) DiskSize() uint64 { return ix.db.Metrics().DiskSpaceUsage() }

// Batch collects updates applied atomically by Commit. Not safe for
// concurrent use.
type Batch struct {
	b   *pebble.Batch
	key []byte
	val [PointerSize]byte
}

// NewBatch starts a batch.
func (ix *Index) NewBatch() *Batch { return &Batch{b: ix.db.NewBatch()} }

// Set points key at p.
func (b *Batch) Set(topic TopicID, key []byte, p Pointer) error {
	b.key = dataKey(b.key, topic, key)
	p.encode(&b.val)
	// Batch copies key and value, so the scratch buffers can be reused.
	return b.b.Set(b.key, b.val[:], nil)
}

// Delete removes key's pointer.
func (b *Batch) Delete(topic TopicID, key []byte) error {
	b.key = dataKey(b.key, topic, key)
	return b.b.Delete(b.key, nil)
}

// SetCheckpoint records that a partition's log is applied up to next
// (exclusive).
func (b *Batch) SetCheckpoint(topic TopicID, partition int32, next int64) error {
	b.key = checkpointKey(b.key, topic, partition)
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(next))
	return b.b.Set(b.key, v[:], nil)
}

// Len is the number of updates in the batch.
func (b *Batch) Len() int { return int(b.b.Count()) }

// Size is the batch's encoded size in bytes.
func (b *Batch) Size() int { return b.b.Len() }

// Commit applies the batch atomically (without fsync: see the package
// doc) and resets it for reuse.
func (b *Batch) Commit() error {
	if err := b.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("index: commit: %w", err)
	}
	b.b.Reset()
	return nil
}

// Close releases the batch; uncommitted updates are dropped.
func (b *Batch) Close() { _ = b.b.Close() }

// DirSize sums the sizes of the regular files in dir (the figure the
// benchmark reports: every file of a closed index).
func DirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// Iter walks a topic's keys in order.
type Iter struct {
	it    *pebble.Iterator
	valid bool
	first bool
	err   error
}

// NewIter returns an iterator over topic's keys; call Next first.
func (ix *Index) NewIter(topic TopicID) (*Iter, error) {
	lo, hi := topicBounds(nsKey, topic)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("index: iterate: %w", err)
	}
	return &Iter{it: it, first: true}, nil
}

// Next moves to the next key and reports whether there is one.
func (i *Iter) Next() bool {
	if i.first {
		i.valid, i.first = i.it.First(), false
	} else if i.valid {
		i.valid = i.it.Next()
	}
	return i.valid
}

// Key is the current user key, valid until Next.
func (i *Iter) Key() []byte { return i.it.Key()[17:] }

// Pointer is the current pointer.
func (i *Iter) Pointer() Pointer {
	p, err := decodePointer(i.it.Value())
	if err != nil && i.err == nil {
		i.err = err
	}
	return p
}

// Close releases the iterator and returns any error met.
func (i *Iter) Close() error {
	err := i.it.Close()
	if i.err != nil {
		return i.err
	}
	return err
}

// Lock takes the directory lock of the index in dir (creating dir), as
// Open does, without opening the store: korvet index rebuild holds it
// while it builds a replacement next to dir, so that no korvet starts on
// the old index meanwhile.
func Lock(dir string) (io.Closer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	return lock, nil
}
