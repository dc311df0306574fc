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
	"sort"
	"sync"

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
// A read of at most pointReadBytes (a KV read asks for one record) whose
// row group is not decoded already is a point read: one ranged GET for
// the pages that hold the record, found with the offset indexes of the
// columns, and it returns records of those pages only.
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
		lo, hi, bounded := int64Bounds(&md.RowGroups[rg], cols.offset)
		if bounded && hi < from {
			continue
		}
		var g rowGroupData
		window := false
		if maxBytes <= pointReadBytes && bounded {
			g, window, err = s.pointGroup(ctx, f.Path, pf, &cols, rg, from, lo, hi)
		} else {
			g, err = s.rowGroup(ctx, f.Path, pf, &cols, rg)
		}
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
		// A window ends the read: what follows it in the row group was
		// not read. It holds a record at or after from (pointGroup).
		if window || size >= maxBytes && len(recs) > 0 {
			break
		}
	}
	return recs, txns, nil
}

// pointReadBytes is the largest read that is a point read (see Read): it
// wants a record or a few, not the rest of a row group.
const pointReadBytes = 4 << 10

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

// pointGroup returns records of row group rg (offsets minOff to maxOff)
// that include the first one at or after from: the whole row group when
// it is decoded already, else a window (true), the rows that the pages
// holding that record cover in every column, from one ranged GET. A file
// without offset indexes is read by whole row groups.
func (s *Store) pointGroup(ctx context.Context, uri string, pf *parquet.File, cols *fileColumns, rg int, from, minOff, maxOff int64) (rowGroupData, bool, error) {
	whole := rgKey{uri: uri, rg: rg, size: pf.Size()}
	if g, ok := s.groups.get(whole); ok {
		return g, false, nil
	}
	r1, r2, ok := rowsOf(from, minOff, maxOff, pf.Metadata().RowGroups[rg].NumRows)
	var plan pagePlan
	if ok {
		plan, ok = planPages(pf, cols, rg, r1, r2)
	}
	if !ok {
		g, err := s.rowGroup(ctx, uri, pf, cols, rg)
		return g, false, err
	}
	key := rgKey{uri: uri, rg: rg, size: pf.Size(), lo: plan.lo, hi: plan.hi}
	if g, ok := s.groups.get(key); ok {
		return g, true, nil
	}
	g, bytes, err := s.readWindow(ctx, uri, pf, cols, rg, plan)
	if err != nil {
		return rowGroupData{}, false, err
	}
	if n := len(g.recs); n == 0 || g.recs[n-1].Offset < from {
		return rowGroupData{}, false, fmt.Errorf("row group %d: rows %d-%d hold no offset from %d on, against the footer's bounds %d-%d",
			rg, plan.lo, plan.hi-1, from, minOff, maxOff)
	}
	s.groups.add(key, g, bytes)
	return g, true, nil
}

// rowsOf bounds the row of the first record at or after from in a row
// group of n rows whose offsets run from minOff to maxOff. Offsets
// increase by at least 1 a row, so row i holds an offset in
// [minOff+i, maxOff-(n-1-i)]: the row is in [r1, r2], one row (r1 == r2)
// when the offsets have no gaps. false: the bounds are not a row group's.
func rowsOf(from, minOff, maxOff, n int64) (r1, r2 int64, ok bool) {
	if n <= 0 || maxOff-minOff+1 < n || from > maxOff {
		return 0, 0, false
	}
	if from <= minOff {
		return 0, 0, true
	}
	return max(0, n-1-(maxOff-from)), min(n-1, from-minOff), true
}

// pagePlan is what a point read fetches and decodes: rows [lo, hi) of a
// row group, which the pages in bytes [start, end) of the file hold in
// every column a record needs.
type pagePlan struct {
	lo, hi     int64
	start, end int64
}

// planPages finds, with the offset indexes of the columns a record
// needs, the pages that hold rows r1 to r2 and the rows they all cover.
// false when a column has no offset index. The columns of a row group
// are contiguous, so the span from the first page to the last one is one
// ranged GET; the pages of the columns between them come with it.
func planPages(pf *parquet.File, cols *fileColumns, rg int, r1, r2 int64) (pagePlan, bool) {
	md := &pf.Metadata().RowGroups[rg]
	chunks := pf.RowGroups()[rg].ColumnChunks()
	plan := pagePlan{lo: 0, hi: md.NumRows, start: math.MaxInt64, end: 0}
	for _, c := range cols.recordColumns() {
		fc, ok := chunks[c].(*parquet.FileColumnChunk)
		if !ok {
			return plan, false
		}
		oi, err := fc.OffsetIndex()
		if err != nil {
			return plan, false
		}
		p1, p2 := pageOf(oi, r1), pageOf(oi, r2)
		if p1 < 0 || p2 < 0 {
			return plan, false
		}
		plan.lo = max(plan.lo, oi.FirstRowIndex(p1))
		if p2+1 < oi.NumPages() {
			plan.hi = min(plan.hi, oi.FirstRowIndex(p2+1))
		}
		start := oi.Offset(p1)
		if dict := md.Columns[c].MetaData.DictionaryPageOffset; dict > 0 {
			// Pages of a dictionary-encoded column need the dictionary,
			// the chunk's first page.
			start = min(start, dict)
		}
		plan.start = min(plan.start, start)
		plan.end = max(plan.end, oi.Offset(p2)+oi.CompressedPageSize(p2))
	}
	if plan.lo > r1 || plan.hi <= r2 || plan.start <= 0 || plan.end <= plan.start || plan.end > pf.Size() {
		return plan, false // not the offset index of a file korvet wrote
	}
	return plan, true
}

// pageOf is the page of an offset index that holds row r; -1 for none.
func pageOf(oi parquet.OffsetIndex, r int64) int {
	n := oi.NumPages()
	if n == 0 || oi.FirstRowIndex(0) > r {
		return -1
	}
	return sort.Search(n, func(i int) bool { return oi.FirstRowIndex(i) > r }) - 1
}

// readWindow fetches the pages of a plan with one ranged GET and decodes
// its rows.
func (s *Store) readWindow(ctx context.Context, uri string, pf *parquet.File, cols *fileColumns, rg int, plan pagePlan) (rowGroupData, int, error) {
	// Decoding copies what it keeps: the fetched bytes can serve the
	// next point read.
	bp := getSpanBuf(int(plan.end - plan.start))
	defer spanBufs.Put(bp)
	buf := *bp
	n, err := s.obj.readAt(ctx, uri, buf, plan.start)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return rowGroupData{}, 0, err
	}
	// Only what was fetched: a read past it is a bug, not another GET.
	r := &spanReader{spans: []dataSpan{{off: plan.start, data: buf}}}
	g, bytes, err := decodeRows(pf.RowGroups()[rg].ColumnChunks(), &pf.Metadata().RowGroups[rg], cols, r, plan.lo, plan.hi)
	if err != nil {
		return rowGroupData{}, 0, fmt.Errorf("row group %d rows %d-%d: %w", rg, plan.lo, plan.hi-1, err)
	}
	return g, bytes, nil
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
		rows := rowRange{r: r, n: int(md.RowGroups[rg].NumRows)}
		offs, err := readInt64s(chunks[cols.offset], rows)
		if err != nil {
			return 0, 0, false, fmt.Errorf("cold offset for time %s: %w", f.Path, err)
		}
		tss, err := readInt64s(chunks[cols.timestamp], rows)
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

// spanBufs holds buffers of point reads (*[]byte).
var spanBufs sync.Pool

// getSpanBuf returns a buffer of n bytes from spanBufs.
func getSpanBuf(n int) *[]byte {
	if bp, ok := spanBufs.Get().(*[]byte); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n)
	return &b
}

// spanReader serves reads from prefetched byte ranges of an object and,
// for anything else, with a ranged GET of its own; without o, a read
// that goes past the ranges gets what they hold and errNotFetched.
type spanReader struct {
	ctx   context.Context
	uri   string
	o     objects
	spans []dataSpan
}

var errNotFetched = errors.New("read outside the fetched pages")

type dataSpan struct {
	off  int64
	data []byte
}

func (r *spanReader) ReadAt(p []byte, off int64) (int, error) {
	for _, sp := range r.spans {
		if off >= sp.off && off+int64(len(p)) <= sp.off+int64(len(sp.data)) {
			return copy(p, sp.data[off-sp.off:]), nil
		}
		if r.o == nil && off >= sp.off && off < sp.off+int64(len(sp.data)) {
			// Buffered readers ask for more than a page needs.
			return copy(p, sp.data[off-sp.off:]), fmt.Errorf("[%d,+%d): %w", off, len(p), errNotFetched)
		}
	}
	if r.o == nil {
		return 0, fmt.Errorf("[%d,+%d): %w", off, len(p), errNotFetched)
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
	g, bytes, err := decodeRows(pf.RowGroups()[rg].ColumnChunks(), md, cols, r, 0, md.NumRows)
	if err != nil {
		return rowGroupData{}, 0, fmt.Errorf("row group %d: %w", rg, err)
	}
	return g, bytes, nil
}

// recordColumns are the columns a record is read from.
func (c *fileColumns) recordColumns() []int {
	cs := []int{c.offset, c.timestamp, c.key, c.value, c.headerKey, c.headerValue}
	if c.hasTxn() {
		cs = append(cs, c.producerID, c.producerEpoch, c.control)
	}
	return cs
}

// decodeRows decodes rows [lo, hi) of a row group from r; bytes is the
// memory they hold. With lo > 0 the column chunks must have their offset
// indexes loaded, so that each column starts at the page holding lo.
func decodeRows(chunks []parquet.ColumnChunk, md *format.RowGroup, cols *fileColumns, r io.ReaderAt, lo, hi int64) (rowGroupData, int, error) {
	rows := rowRange{r: r, lo: lo, n: int(hi - lo)}
	rows.scratch = make([]parquet.Value, max(1, min(1024, 2*rows.n)))
	offs, err := readInt64s(chunks[cols.offset], rows)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	tss, err := readInt64s(chunks[cols.timestamp], rows)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	// The byte columns' bytes go to one arena, sized for their share of
	// the row group's uncompressed bytes (a little more than they need).
	var est int64
	for _, c := range []int{cols.key, cols.value, cols.headerKey, cols.headerValue} {
		est += md.Columns[c].MetaData.TotalUncompressedSize
	}
	if md.NumRows > 0 {
		est = est * (hi - lo) / md.NumRows
	}
	arena := make([]byte, 0, min(est, 64<<20))
	keys, err := readBytes(chunks[cols.key], rows, &arena)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	vals, err := readBytes(chunks[cols.value], rows, &arena)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	hdrs, err := readHeaders(chunks[cols.headerKey], chunks[cols.headerValue], rows, &arena)
	if err != nil {
		return rowGroupData{}, 0, err
	}
	n := rows.n
	if len(offs) != n || len(tss) != n || len(keys) != n || len(vals) != n || len(hdrs) != n {
		return rowGroupData{}, 0, errors.New("columns disagree on the row count")
	}
	var txns []record.Txn
	if cols.hasTxn() {
		if txns, err = readTxns(chunks, cols, rows); err != nil {
			return rowGroupData{}, 0, err
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

// rowRange says which rows of a column chunk to decode: n rows from row
// lo, read from r. scratch, when set, is a buffer for values that the
// readers of one row range share.
type rowRange struct {
	r       io.ReaderAt
	lo      int64
	n       int
	scratch []parquet.Value
}

// values is a buffer for up to n values.
func (c rowRange) values(n int) []parquet.Value {
	if len(c.scratch) > 0 {
		return c.scratch[:min(len(c.scratch), n)]
	}
	return make([]parquet.Value, max(1, min(1024, n)))
}

// pages opens the page reader of a column chunk at the page holding row
// lo.
func (c rowRange) pages(cc parquet.ColumnChunk) (*parquet.FilePages, error) {
	fc, ok := cc.(*parquet.FileColumnChunk)
	if !ok {
		return nil, errors.New("not a file column chunk")
	}
	pages := fc.PagesFrom(c.r)
	if c.lo > 0 {
		if err := pages.SeekToRow(c.lo); err != nil {
			pages.Close()
			return nil, fmt.Errorf("column %d: seek to row %d: %w", fc.Column(), c.lo, err)
		}
	}
	return pages, nil
}

// readTxns decodes the transaction columns of rows: nil when no row is
// transactional (the common case keeps nothing).
func readTxns(chunks []parquet.ColumnChunk, cols *fileColumns, rows rowRange) ([]record.Txn, error) {
	pids, err := readOptional(chunks[cols.producerID], rows, func(v parquet.Value) int64 { return v.Int64() })
	if err != nil {
		return nil, err
	}
	epochs, err := readOptional(chunks[cols.producerEpoch], rows, func(v parquet.Value) int64 { return int64(v.Int32()) })
	if err != nil {
		return nil, err
	}
	ctls, err := readOptional(chunks[cols.control], rows, func(v parquet.Value) int64 { return int64(btoi(v.Boolean())) })
	if err != nil {
		return nil, err
	}
	n := rows.n
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

// eachValue calls fn with the values of a non-repeated column chunk, one
// a row, for the rows of c. The values are valid only during the call.
func eachValue(cc parquet.ColumnChunk, c rowRange, fn func(v parquet.Value)) error {
	pages, err := c.pages(cc)
	if err != nil {
		return err
	}
	defer pages.Close()
	vals := c.values(c.n)
	for done := 0; done < c.n; {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("column %d: %w", cc.Column(), err)
		}
		vr := p.Values()
		for done < c.n {
			n, err := vr.ReadValues(vals[:min(len(vals), c.n-done)])
			for _, v := range vals[:n] {
				fn(v)
			}
			done += n
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return fmt.Errorf("column %d: %w", cc.Column(), err)
			}
		}
		parquet.Release(p)
	}
	return nil
}

// readOptional decodes an optional primitive column chunk, null as -1.
func readOptional(cc parquet.ColumnChunk, rows rowRange, conv func(parquet.Value) int64) ([]int64, error) {
	out := make([]int64, 0, rows.n)
	err := eachValue(cc, rows, func(v parquet.Value) {
		if v.IsNull() {
			out = append(out, -1)
		} else {
			out = append(out, conv(v))
		}
	})
	return out, err
}

// readInt64s decodes a required int64 column chunk.
func readInt64s(cc parquet.ColumnChunk, rows rowRange) ([]int64, error) {
	pages, err := rows.pages(cc)
	if err != nil {
		return nil, err
	}
	defer pages.Close()
	out := make([]int64, 0, rows.n)
	buf := make([]int64, min(4096, rows.n))
	for len(out) < rows.n {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", cc.Column(), err)
		}
		vr, ok := p.Values().(parquet.Int64Reader)
		if !ok {
			parquet.Release(p)
			return nil, fmt.Errorf("column %d is not int64", cc.Column())
		}
		for len(out) < rows.n {
			n, err := vr.ReadInt64s(buf[:min(len(buf), rows.n-len(out))])
			out = append(out, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return nil, fmt.Errorf("column %d: %w", cc.Column(), err)
			}
		}
		parquet.Release(p)
	}
	return out, nil
}

// readBytes decodes an optional byte array column chunk: nil for null,
// non-nil (maybe empty) otherwise; bytes are copied to arena.
func readBytes(cc parquet.ColumnChunk, rows rowRange, arena *[]byte) ([][]byte, error) {
	spans := make([][2]int, 0, rows.n) // arena positions, resolved once the arena stops growing
	err := eachValue(cc, rows, func(v parquet.Value) {
		if v.IsNull() {
			spans = append(spans, [2]int{-1, -1})
		} else {
			b := v.ByteArray()
			spans = append(spans, [2]int{len(*arena), len(*arena) + len(b)})
			*arena = append(*arena, b...)
		}
	})
	if err != nil {
		return nil, err
	}
	a := *arena
	out := make([][]byte, 0, len(spans))
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
func readHeaders(keyCol, valCol parquet.ColumnChunk, rows rowRange, arena *[]byte) ([][]record.Header, error) {
	type hv struct {
		row      int
		present  bool // the row has this header (not an empty list)
		val      [2]int
		nullable bool
	}
	read := func(cc parquet.ColumnChunk, fn func(v parquet.Value, row int)) error {
		pages, err := rows.pages(cc)
		if err != nil {
			return err
		}
		defer pages.Close()
		vals := rows.values(2 * rows.n)
		row := -1
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("column %d: %w", cc.Column(), err)
			}
			vr := p.Values()
			for {
				n, err := vr.ReadValues(vals)
				for _, v := range vals[:n] {
					if v.RepetitionLevel() == 0 {
						if row+1 == rows.n {
							// The first value of a row past the ones asked for.
							parquet.Release(p)
							return nil
						}
						row++
					}
					fn(v, row)
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					parquet.Release(p)
					return fmt.Errorf("column %d: %w", cc.Column(), err)
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
	ks, vs := make([]hv, 0, rows.n), make([]hv, 0, rows.n) // at least one value a row
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
	// One array holds every row's headers, in row order.
	n := 0
	for i := range ks {
		if ks[i].present {
			n++
		}
	}
	all := make([]record.Header, 0, n)
	out := make([][]record.Header, 0, rows.n)
	last, first := -1, 0 // the row being built, and where its headers start in all
	for i := range ks {
		k, v := ks[i], vs[i]
		if k.row != v.row {
			return nil, errors.New("header key and value columns disagree")
		}
		for last < k.row {
			out = append(out, nil)
			last++
			first = len(all)
		}
		if !k.present {
			continue
		}
		h := record.Header{Key: a[k.val[0]:k.val[1]:k.val[1]]}
		if !v.nullable {
			h.Value = a[v.val[0]:v.val[1]:v.val[1]]
		}
		all = append(all, h)
		out[len(out)-1] = all[first:len(all):len(all)]
	}
	return out, nil
}

// groupCache keeps recently decoded row groups, bounded by the memory
// their records hold; a row group larger than the whole bound is not kept.
type groupCache struct {
	mem *lru.Cache[rgKey, rowGroupData]
}

// rgKey names a decoded row group, or with hi > 0 the window of its rows
// [lo, hi) that a point read decoded.
type rgKey struct {
	uri    string
	rg     int
	size   int64
	lo, hi int64
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
