package cold

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/lru"
)

// Read returns f's records with offset >= from in offset order, about
// maxBytes of them (record.Size), and at least one when there is any, as a
// Kafka fetch needs. It reads the footer once per file (then from the
// cache) and, per row group it needs, one ranged GET for its column
// chunks; the offset statistics of row groups pick where to start. Decoded
// row groups are kept for a while, so a consumer paging through a file
// fetches and decodes each row group once. The records' bytes are shared
// with that cache: read them, never modify them.
//
// txns is empty when none of the records returned is transactional, else
// parallel to recs (ProducerID -1 for a record outside transactions). A
// file written before the transaction columns holds no transactional
// records.
func (s *Store) Read(ctx context.Context, f DataFile, from int64, maxBytes int) (recs []record.Record, txns []record.Txn, err error) {
	pf, err := s.openFile(ctx, f.Path, f.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("cold read %s: %w", f.Path, err)
	}
	cols, err := columnsOf(pf.Schema())
	if err != nil {
		return nil, nil, fmt.Errorf("cold read %s: %w", f.Path, err)
	}
	md := pf.Metadata()
	size := 0
	for rg := range md.RowGroups {
		if _, hi, ok := int64Bounds(&md.RowGroups[rg], cols.offset); ok && hi < from {
			continue
		}
		g, err := s.rowGroup(ctx, f.Path, pf, &cols, rg)
		if err != nil {
			return nil, nil, fmt.Errorf("cold read %s: %w", f.Path, err)
		}
		i, _ := slices.BinarySearchFunc(g.recs, from, func(r record.Record, off int64) int { return cmp.Compare(r.Offset, off) })
		for ; i < len(g.recs); i++ {
			sz := g.recs[i].Size()
			if size+sz > maxBytes && len(recs) > 0 {
				return recs, txns, nil
			}
			tx := record.Txn{ProducerID: -1}
			if len(g.txns) > 0 {
				tx = g.txns[i]
			}
			if len(txns) > 0 || tx.ProducerID >= 0 || tx.Control {
				// From the first transactional record on; the ones
				// before it were not.
				for len(txns) < len(recs) {
					txns = append(txns, record.Txn{ProducerID: -1})
				}
				txns = append(txns, tx)
			}
			recs = append(recs, g.recs[i])
			size += sz
		}
		if size >= maxBytes && len(recs) > 0 {
			break
		}
	}
	return recs, txns, nil
}

// rowGroupData is a decoded row group; txns is empty when no record in it
// is transactional, else parallel to recs.
type rowGroupData struct {
	recs []record.Record
	txns []record.Txn
}

// rowGroup returns all records of a row group, from the cache or decoded
// from one ranged GET.
func (s *Store) rowGroup(ctx context.Context, uri string, pf *parquet.File, cols *fileColumns, rg int) (rowGroupData, error) {
	key := rgKey{uri: uri, rg: rg, size: pf.Size()}
	if g, ok := s.groups.get(key); ok {
		return g, nil
	}
	g, bytes, err := s.readRowGroup(ctx, uri, pf, cols, rg)
	if err != nil {
		return rowGroupData{}, err
	}
	s.groups.add(key, g, bytes)
	return g, nil
}

// OffsetForTime returns the first record of f (in offset order) whose
// timestamp is at or after ts. It reads only the offset and timestamp
// columns of the one row group whose timestamp statistics say the record
// is there.
func (s *Store) OffsetForTime(ctx context.Context, f DataFile, ts int64) (offset, timestamp int64, found bool, err error) {
	pf, err := s.openFile(ctx, f.Path, f.Bytes)
	if err != nil {
		return 0, 0, false, fmt.Errorf("cold offset for time %s: %w", f.Path, err)
	}
	cols, err := columnsOf(pf.Schema())
	if err != nil {
		return 0, 0, false, fmt.Errorf("cold offset for time %s: %w", f.Path, err)
	}
	md := pf.Metadata()
	for rg := range md.RowGroups {
		if _, hi, ok := int64Bounds(&md.RowGroups[rg], cols.timestamp); ok && hi < ts {
			continue
		}
		r, err := s.fetchColumns(ctx, f.Path, &md.RowGroups[rg], cols.offset, cols.timestamp)
		if err != nil {
			return 0, 0, false, fmt.Errorf("cold offset for time %s: %w", f.Path, err)
		}
		chunks := pf.RowGroups()[rg].ColumnChunks()
		offs, err := readInt64s(chunks[cols.offset], r)
		if err != nil {
			return 0, 0, false, fmt.Errorf("cold offset for time %s: %w", f.Path, err)
		}
		tss, err := readInt64s(chunks[cols.timestamp], r)
		if err != nil {
			return 0, 0, false, fmt.Errorf("cold offset for time %s: %w", f.Path, err)
		}
		for i := range min(len(offs), len(tss)) {
			if tss[i] >= ts {
				return offs[i], tss[i], true, nil
			}
		}
	}
	return 0, 0, false, nil
}

// int64Bounds reads a column chunk's min and max from the footer.
func int64Bounds(rg *format.RowGroup, col int) (lo, hi int64, ok bool) {
	if col >= len(rg.Columns) {
		return 0, 0, false
	}
	st := &rg.Columns[col].MetaData.Statistics
	if len(st.MinValue) != 8 || len(st.MaxValue) != 8 {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(st.MinValue)), int64(binary.LittleEndian.Uint64(st.MaxValue)), true
}

// chunkRange is the byte range of a column chunk, dictionary page included.
func chunkRange(cc *format.ColumnChunk) (start, end int64) {
	md := &cc.MetaData
	start = md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	return start, start + md.TotalCompressedSize
}

// fetchColumns reads the chunks of the given columns of a row group,
// merging neighbours into one ranged GET, and returns a ReaderAt over them.
func (s *Store) fetchColumns(ctx context.Context, uri string, rg *format.RowGroup, cols ...int) (*spanReader, error) {
	type span struct{ start, end int64 }
	var spans []span
	for _, c := range cols {
		start, end := chunkRange(&rg.Columns[c])
		spans = append(spans, span{start, end})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	// Reading a small gap costs less than another request.
	const gap = 256 << 10
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end+gap {
			last.end = max(last.end, sp.end)
		} else {
			merged = append(merged, sp)
		}
	}
	r := &spanReader{ctx: ctx, uri: uri, o: s.obj}
	for _, sp := range merged {
		buf := make([]byte, sp.end-sp.start)
		n, err := s.obj.readAt(ctx, uri, buf, sp.start)
		if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
			return nil, err
		}
		r.spans = append(r.spans, dataSpan{off: sp.start, data: buf})
	}
	return r, nil
}

// spanReader serves reads from prefetched byte ranges of an object and,
// for anything else, with a ranged GET of its own.
type spanReader struct {
	ctx   context.Context
	uri   string
	o     objects
	spans []dataSpan
}

type dataSpan struct {
	off  int64
	data []byte
}

func (r *spanReader) ReadAt(p []byte, off int64) (int, error) {
	for _, sp := range r.spans {
		if off >= sp.off && off+int64(len(p)) <= sp.off+int64(len(sp.data)) {
			return copy(p, sp.data[off-sp.off:]), nil
		}
	}
	return r.o.readAt(r.ctx, r.uri, p, off)
}

// readRowGroup decodes all records of row group rg; bytes is the memory
// they hold.
func (s *Store) readRowGroup(ctx context.Context, uri string, pf *parquet.File, cols *fileColumns, rg int) (rowGroupData, int, error) {
	md := &pf.Metadata().RowGroups[rg]
	// The raw columns come first; the typed ones (last) are for query
	// engines, not fetched.
	raw := make([]int, cols.n-cols.typed)
	for i := range raw {
		raw[i] = i
	}
	r, err := s.fetchColumns(ctx, uri, md, raw...)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	chunks := pf.RowGroups()[rg].ColumnChunks()
	offs, err := readInt64s(chunks[cols.offset], r)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	tss, err := readInt64s(chunks[cols.timestamp], r)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	var arena []byte
	keys, err := readBytes(chunks[cols.key], r, &arena)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	vals, err := readBytes(chunks[cols.value], r, &arena)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	hdrs, err := readHeaders(chunks[cols.headerKey], chunks[cols.headerValue], r, &arena)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	n := len(offs)
	if len(tss) != n || len(keys) != n || len(vals) != n || len(hdrs) != n {
		return rowGroupData{}, 0, fmt.Errorf("row group %d: columns disagree on the row count", rg)
	}
	var txns []record.Txn
	if cols.hasTxn() {
		if txns, err = readTxns(chunks, cols, r, n); err != nil {
			return rowGroupData{}, 0, fmt.Errorf("row group %d: %w", rg, err)
		}
	}
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: offs[i], Timestamp: tss[i], Key: keys[i], Value: vals[i], Headers: hdrs[i]}
	}
	// A Record is two int64s and three slice headers; a Txn 16 bytes.
	const recordSize, txnSize = 2*8 + 3*24, 16
	return rowGroupData{recs, txns}, cap(arena) + n*recordSize + len(txns)*txnSize, nil
}

// readTxns decodes the transaction columns of a row group of n rows: nil
// when no row is transactional (the common case keeps nothing).
func readTxns(chunks []parquet.ColumnChunk, cols *fileColumns, r io.ReaderAt, n int) ([]record.Txn, error) {
	pids, err := readOptional(chunks[cols.producerID], r, func(v parquet.Value) int64 { return v.Int64() })
	if err != nil {
		return nil, err
	}
	epochs, err := readOptional(chunks[cols.producerEpoch], r, func(v parquet.Value) int64 { return int64(v.Int32()) })
	if err != nil {
		return nil, err
	}
	ctls, err := readOptional(chunks[cols.control], r, func(v parquet.Value) int64 { return int64(btoi(v.Boolean())) })
	if err != nil {
		return nil, err
	}
	if len(pids) != n || len(epochs) != n || len(ctls) != n {
		return nil, errors.New("transaction columns disagree on the row count")
	}
	found := false
	for i := range n {
		if pids[i] >= 0 || ctls[i] > 0 {
			found = true
			break
		}
	}
	if !found {
		return nil, nil
	}
	txns := make([]record.Txn, n)
	for i := range txns {
		txns[i] = record.Txn{ProducerID: -1, Control: ctls[i] > 0}
		if pids[i] >= 0 {
			if epochs[i] < math.MinInt16 || epochs[i] > math.MaxInt16 {
				return nil, fmt.Errorf("producer epoch %d out of range", epochs[i])
			}
			txns[i].ProducerID, txns[i].Epoch = pids[i], int16(epochs[i])
		}
	}
	return txns, nil
}

// readOptional decodes an optional primitive column chunk, null as -1.
func readOptional(cc parquet.ColumnChunk, r io.ReaderAt, conv func(parquet.Value) int64) ([]int64, error) {
	fc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return nil, errors.New("not a file column chunk")
	}
	pages := fc.PagesFrom(r)
	defer pages.Close()
	out := make([]int64, 0, fc.NumValues())
	vals := make([]parquet.Value, 1024)
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", fc.Column(), err)
		}
		vr := p.Values()
		for {
			n, err := vr.ReadValues(vals)
			for _, v := range vals[:n] {
				if v.IsNull() {
					out = append(out, -1)
				} else {
					out = append(out, conv(v))
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return nil, fmt.Errorf("column %d: %w", fc.Column(), err)
			}
		}
		parquet.Release(p)
	}
}

// readInt64s decodes a required int64 column chunk.
func readInt64s(cc parquet.ColumnChunk, r io.ReaderAt) ([]int64, error) {
	fc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return nil, errors.New("not a file column chunk")
	}
	pages := fc.PagesFrom(r)
	defer pages.Close()
	out := make([]int64, 0, fc.NumValues())
	buf := make([]int64, 4096)
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", fc.Column(), err)
		}
		vr, ok := p.Values().(parquet.Int64Reader)
		if !ok {
			parquet.Release(p)
			return nil, fmt.Errorf("column %d is not int64", fc.Column())
		}
		for {
			n, err := vr.ReadInt64s(buf)
			out = append(out, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return nil, fmt.Errorf("column %d: %w", fc.Column(), err)
			}
		}
		parquet.Release(p)
	}
}

// readBytes decodes an optional byte array column chunk: nil for null,
// non-nil (maybe empty) otherwise; bytes are copied to arena.
func readBytes(cc parquet.ColumnChunk, r io.ReaderAt, arena *[]byte) ([][]byte, error) {
	fc := cc.(*parquet.FileColumnChunk)
	pages := fc.PagesFrom(r)
	defer pages.Close()
	out := make([][]byte, 0, fc.NumValues())
	vals := make([]parquet.Value, 1024)
	var spans [][2]int // arena positions, resolved once the arena stops growing
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", fc.Column(), err)
		}
		vr := p.Values()
		for {
			n, err := vr.ReadValues(vals)
			for _, v := range vals[:n] {
				if v.IsNull() {
					spans = append(spans, [2]int{-1, -1})
				} else {
					b := v.ByteArray()
					spans = append(spans, [2]int{len(*arena), len(*arena) + len(b)})
					*arena = append(*arena, b...)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return nil, fmt.Errorf("column %d: %w", fc.Column(), err)
			}
		}
		parquet.Release(p)
	}
	a := *arena
	for _, sp := range spans {
		if sp[0] < 0 {
			out = append(out, nil)
		} else {
			out = append(out, a[sp[0]:sp[1]:sp[1]])
		}
	}
	return out, nil
}

// readHeaders rebuilds each row's header list from the key and value
// columns of the headers list (repetition level 0 starts a row; definition
// level 0 is an empty list, 1 a null header value).
func readHeaders(keyCol, valCol parquet.ColumnChunk, r io.ReaderAt, arena *[]byte) ([][]record.Header, error) {
	type hv struct {
		row      int
		present  bool // the row has this header (not an empty list)
		val      [2]int
		nullable bool
	}
	read := func(cc parquet.ColumnChunk, fn func(v parquet.Value, row int)) error {
		fc := cc.(*parquet.FileColumnChunk)
		pages := fc.PagesFrom(r)
		defer pages.Close()
		vals := make([]parquet.Value, 1024)
		row := -1
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("column %d: %w", fc.Column(), err)
			}
			vr := p.Values()
			for {
				n, err := vr.ReadValues(vals)
				for _, v := range vals[:n] {
					if v.RepetitionLevel() == 0 {
						row++
					}
					fn(v, row)
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					parquet.Release(p)
					return fmt.Errorf("column %d: %w", fc.Column(), err)
				}
			}
			parquet.Release(p)
		}
	}
	span := func(v parquet.Value) [2]int {
		b := v.ByteArray()
		sp := [2]int{len(*arena), len(*arena) + len(b)}
		*arena = append(*arena, b...)
		return sp
	}
	var ks, vs []hv
	if err := read(keyCol, func(v parquet.Value, row int) {
		h := hv{row: row, present: v.DefinitionLevel() > 0}
		if h.present {
			h.val = span(v)
		}
		ks = append(ks, h)
	}); err != nil {
		return nil, err
	}
	if err := read(valCol, func(v parquet.Value, row int) {
		h := hv{row: row, present: v.DefinitionLevel() > 0, nullable: v.DefinitionLevel() < 2}
		if !h.nullable {
			h.val = span(v)
		}
		vs = append(vs, h)
	}); err != nil {
		return nil, err
	}
	if len(ks) != len(vs) {
		return nil, errors.New("header key and value columns disagree")
	}
	a := *arena
	var out [][]record.Header
	last := -1
	for i := range ks {
		k, v := ks[i], vs[i]
		if k.row != v.row {
			return nil, errors.New("header key and value columns disagree")
		}
		for last < k.row {
			out = append(out, nil)
			last++
		}
		if !k.present {
			continue
		}
		h := record.Header{Key: a[k.val[0]:k.val[1]:k.val[1]]}
		if !v.nullable {
			h.Value = a[v.val[0]:v.val[1]:v.val[1]]
		}
		out[len(out)-1] = append(out[len(out)-1], h)
	}
	return out, nil
}

// groupCache keeps recently decoded row groups, bounded by the memory
// their records hold; a row group larger than the whole bound is not kept.
type groupCache struct {
	mem *lru.Cache[rgKey, rowGroupData]
}

type rgKey struct {
	uri  string
	rg   int
	size int64
}

func newGroupCache(limit int) *groupCache {
	return &groupCache{mem: lru.New[rgKey, rowGroupData](limit)}
}

func (c *groupCache) get(k rgKey) (rowGroupData, bool) {
	return c.mem.Get(k)
}

func (c *groupCache) add(k rgKey, g rowGroupData, bytes int) {
	c.mem.Add(k, g, bytes)
}

// forget drops the row groups of a removed file.
func (c *groupCache) forget(uri string) {
	c.mem.RemoveFunc(func(k rgKey) bool { return k.uri == uri })
}
