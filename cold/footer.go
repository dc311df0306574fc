package cold

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/korvet/korvet/internal/lru"
)

// footerCache keeps the tails of archived Parquet files (offset indexes,
// footer, footer length, magic) in memory, parsed, and on local disk, so a
// cold read fetches a file's footer from the store once. Archived files never change
// under a path (a retried upload writes the same segment again), and their
// size is part of the key anyway.
type footerCache struct {
	dir string // "" keeps nothing on disk
	// mem costs an entry its tail's bytes; the newest stays even when it
	// alone exceeds the bound, as parsing a footer again costs a GET.
	mem *lru.Cache[string, *parquet.File]
}

func newFooterCache(dir string, limit int) (*footerCache, error) {
	if dir != "" {
		dir = filepath.Join(dir, "footers")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cold: footer cache: %w", err)
		}
	}
	return &footerCache{dir: dir, mem: lru.New[string, *parquet.File](limit, lru.KeepOversize())}, nil
}

func cacheKey(uri string) string {
	h := sha256.Sum256([]byte(uri))
	return hex.EncodeToString(h[:16])
}

func (c *footerCache) get(key string, size int64) *parquet.File {
	if f, ok := c.mem.Get(key); ok && (size <= 0 || f.Size() == size) {
		return f
	}
	return nil
}

func (c *footerCache) add(key string, tail int, f *parquet.File) {
	c.mem.Add(key, f, tail)
}

// forget drops a file that retention removed.
func (c *footerCache) forget(uri string) {
	key := cacheKey(uri)
	c.mem.Remove(key)
	if c.dir != "" {
		os.Remove(filepath.Join(c.dir, key))
	}
}

// loadDisk returns a cached tail: 8 bytes of file size, then the tail.
func (c *footerCache) loadDisk(key string, size int64) (int64, []byte) {
	if c.dir == "" {
		return 0, nil
	}
	b, err := os.ReadFile(filepath.Join(c.dir, key))
	if err != nil || len(b) < 16 {
		return 0, nil
	}
	got := int64(binary.LittleEndian.Uint64(b))
	if size > 0 && got != size {
		return 0, nil
	}
	return got, b[8:]
}

func (c *footerCache) saveDisk(key string, size int64, tail []byte) error {
	if c.dir == "" {
		return nil
	}
	f, err := os.CreateTemp(c.dir, key+".*.tmp")
	if err != nil {
		return err
	}
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(tail)), uint64(size))
	_, err = f.Write(append(b, tail...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(c.dir, key))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// tailGuess is how much of a file's end the first GET takes: enough for
// the footer and offset indexes of a segment of about 200 row groups
// (bounds are kept only for small columns, so a row group costs a few
// hundred bytes of footer and a few more of offset index), so that one
// request usually does.
const tailGuess = 64 << 10

// maxOffsetIndexBytes bounds the offset indexes kept with a footer. A
// file whose offset indexes take more is read by row groups only.
const maxOffsetIndexBytes = 16 << 20

// openFile returns the parsed footer of an archived file. size may be 0
// when unknown (one HEAD then). Column data is read later through
// FileColumnChunk.PagesFrom, with the caller's context.
//
// The cached tail holds the footer and, in front of it, the offset
// indexes of the column chunks (where parquet-go writes them): with them
// FileColumnChunk.OffsetIndex answers from memory, so that a point read
// knows which pages to fetch without a request of its own. A tail cached
// on disk before offset indexes were kept gets them once.
func (s *Store) openFile(ctx context.Context, uri string, size int64) (*parquet.File, error) {
	key := cacheKey(uri)
	if f := s.footers.get(key, size); f != nil {
		return f, nil
	}
	size, tail := s.footers.loadDisk(key, size)
	fetched := tail == nil
	if fetched {
		var err error
		if size, tail, err = s.fetchTail(ctx, uri, size); err != nil {
			return nil, err
		}
	}
	tr := &tailReader{off: size - int64(len(tail)), tail: tail}
	f, err := parquet.OpenFile(tr, size,
		parquet.SkipMagicBytes(true), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet footer: %w", err)
	}
	if _, err := columnsOf(f.Schema()); err != nil {
		return nil, err
	}
	for i := range f.Metadata().RowGroups {
		if n := len(f.Metadata().RowGroups[i].Columns); n != len(f.Schema().Columns()) {
			return nil, fmt.Errorf("not a korvet segment file: row group %d has %d columns", i, n)
		}
	}
	// Keep [offset indexes, end): less when the file has none (or too
	// much of them), more only when it must be fetched.
	footerStart := size - 8 - int64(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	start := footerStart
	if oi, ok := offsetIndexStart(f.Metadata()); ok && footerStart-oi <= maxOffsetIndexBytes {
		start = oi
	}
	switch {
	case start > tr.off && fetched:
		tr.tail = slices.Clone(tr.tail[start-tr.off:])
		tr.off = start
	case start < tr.off:
		more := make([]byte, tr.off-start)
		if _, err := s.obj.readAt(ctx, uri, more, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read offset indexes: %w", err)
		}
		tr.tail = append(more, tr.tail...)
		tr.off = start
		fetched = true
	}
	if fetched {
		if err := s.footers.saveDisk(key, size, tr.tail); err != nil {
			s.log.Warn("cold: footer cache write failed", "err", err)
		}
	}
	s.footers.add(key, len(tr.tail), f)
	return f, nil
}

// offsetIndexStart is where the first offset index of a file begins.
func offsetIndexStart(md *format.FileMetaData) (int64, bool) {
	start, ok := int64(math.MaxInt64), false
	for i := range md.RowGroups {
		for j := range md.RowGroups[i].Columns {
			if c := &md.RowGroups[i].Columns[j]; c.OffsetIndexOffset > 0 && c.OffsetIndexLength > 0 {
				start, ok = min(start, c.OffsetIndexOffset), true
			}
		}
	}
	return start, ok
}

// fetchTail reads the end of a file: at least its footer region
// [size-8-footerLen, size), and all of the first tailGuess bytes.
func (s *Store) fetchTail(ctx context.Context, uri string, size int64) (int64, []byte, error) {
	if size <= 0 {
		var err error
		if size, err = s.obj.size(ctx, uri); err != nil {
			return 0, nil, err
		}
	}
	if size < 12 {
		return 0, nil, fmt.Errorf("%s: %d bytes is too short for Parquet", uri, size)
	}
	n := min(size, tailGuess)
	buf := make([]byte, n)
	if _, err := s.obj.readAt(ctx, uri, buf, size-n); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	if string(buf[n-4:]) != "PAR1" {
		return 0, nil, fmt.Errorf("%s: no Parquet magic at the end", uri)
	}
	flen := int64(binary.LittleEndian.Uint32(buf[n-8:]))
	need := flen + 8
	if need > size-4 {
		return 0, nil, fmt.Errorf("%s: footer length %d exceeds the file", uri, flen)
	}
	if need <= n {
		return size, buf, nil
	}
	more := make([]byte, need-n)
	if _, err := s.obj.readAt(ctx, uri, more, size-need); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	return size, append(more, buf...), nil
}

// tailReader serves the cached end of a file: footer and offset indexes.
// parquet.OpenFile with the options above reads nothing else, and
// FileColumnChunk.OffsetIndex only the offset indexes.
type tailReader struct {
	off  int64
	tail []byte
}

func (r *tailReader) ReadAt(p []byte, off int64) (int, error) {
	if off < r.off || off+int64(len(p)) > r.off+int64(len(r.tail)) {
		return 0, fmt.Errorf("read [%d,+%d) outside the cached footer: %w", off, len(p), fs.ErrInvalid)
	}
	return copy(p, r.tail[off-r.off:]), nil
}
