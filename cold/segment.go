package cold

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/engine/record"
)

// Iceberg field ids of a topic table. Ids 1-9 are what iceberg-go's
// table.NewMetadata (which made the tables of earlier korvet) assigns to
// tableSchema (top-level fields first, then nested ones); 10-12 are what
// adding txnFields, in order, to such a table assigns. The Parquet
// writer puts the same ids on its columns; checkSchema verifies a table
// still has them.
const (
	idPartition     = 1
	idOffset        = 2
	idTimestamp     = 3
	idKey           = 4
	idValue         = 5
	idHeaders       = 6
	idHeader        = 7
	idHeaderKey     = 8
	idHeaderValue   = 9
	idProducerID    = 10
	idProducerEpoch = 11
	idControl       = 12
)

// tableSchema is the Iceberg schema a topic table is created with (and the
// whole schema of tables written before transactions); the first archive
// into a table adds txnFields, so new and old tables get the same ids.
// timestamp is the Kafka timestamp in epoch milliseconds as a long: Iceberg
// timestamps are microseconds, and a Kafka timestamp can be any int64, so a
// long keeps every value exact (query engines: to_timestamp_millis /
// epoch_ms).
func tableSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: idPartition, Name: "partition", Type: iceberg.PrimitiveTypes.Int32, Required: true, Doc: "Kafka partition"},
		iceberg.NestedField{ID: idOffset, Name: "offset", Type: iceberg.PrimitiveTypes.Int64, Required: true, Doc: "Kafka offset"},
		iceberg.NestedField{ID: idTimestamp, Name: "timestamp", Type: iceberg.PrimitiveTypes.Int64, Required: true, Doc: "record timestamp, milliseconds since the epoch"},
		iceberg.NestedField{ID: idKey, Name: "key", Type: iceberg.PrimitiveTypes.Binary, Doc: "record key; null for a null key"},
		iceberg.NestedField{ID: idValue, Name: "value", Type: iceberg.PrimitiveTypes.Binary, Doc: "record value as produced; null for a tombstone"},
		iceberg.NestedField{ID: idHeaders, Name: "headers", Required: true, Doc: "record headers in order, duplicates kept",
			Type: &iceberg.ListType{
				ElementID:       idHeader,
				ElementRequired: true,
				Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
					{ID: idHeaderKey, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
					{ID: idHeaderValue, Name: "value", Type: iceberg.PrimitiveTypes.Binary},
				}},
			}},
	)
}

// txnFields are the columns transactions added, in the order they are
// added to a table. Iceberg requires added columns to be optional: a row
// of a file written before them reads as null, which means what it meant
// then, a record outside any transaction.
func txnFields() []iceberg.NestedField {
	return []iceberg.NestedField{
		{ID: idProducerID, Name: "producer_id", Type: iceberg.PrimitiveTypes.Int64,
			Doc: "producer id of a record of a transactional batch or of a control record; null otherwise"},
		{ID: idProducerEpoch, Name: "producer_epoch", Type: iceberg.PrimitiveTypes.Int32,
			Doc: "producer epoch (Kafka int16) when producer_id is set; null otherwise"},
		{ID: idControl, Name: "control", Type: iceberg.PrimitiveTypes.Bool,
			Doc: "true for a transaction marker (commit/abort control record), not data"},
	}
}

// segmentSchema is the Parquet schema of one archived segment, with the
// Iceberg field ids of tableSchema and txnFields. parquet.Group orders
// fields by name, so the file's columns are alphabetical; files written
// before the transaction columns have other column indexes, so readers
// locate columns by name (columnsOf).
func segmentSchema() *parquet.Schema { return segmentSchemaWith(nil) }

// segmentSchemaWith is segmentSchema plus, when valueFields is not nil,
// the typed value column value_fields (whose columns sort last).
func segmentSchemaWith(valueFields parquet.Node) *parquet.Schema {
	delta := func(n parquet.Node) parquet.Node { return parquet.Encoded(n, &parquet.DeltaBinaryPacked) }
	g := parquet.Group{
		"producer_id":    parquet.FieldID(parquet.Optional(parquet.Int(64)), idProducerID),
		"producer_epoch": parquet.FieldID(parquet.Optional(parquet.Int(32)), idProducerEpoch),
		"control":        parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.BooleanType)), idControl),
		"partition":      parquet.FieldID(parquet.Int(32), idPartition),
		"offset":         parquet.FieldID(delta(parquet.Int(64)), idOffset),
		"timestamp":      parquet.FieldID(delta(parquet.Int(64)), idTimestamp),
		"key":            parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idKey),
		"value":          parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idValue),
		"headers": parquet.FieldID(parquet.List(parquet.FieldID(parquet.Group{
			"key":   parquet.FieldID(parquet.Encoded(parquet.String(), &parquet.RLEDictionary), idHeaderKey),
			"value": parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idHeaderValue),
		}, idHeader)), idHeaders),
	}
	if valueFields != nil {
		g[valueFieldsName] = valueFields
	}
	return parquet.NewSchema("kafka_record", g)
}

// fileColumns holds the leaf column indexes of one segment file; -1 for a
// column the file lacks (the transaction columns, in files written before
// them).
type fileColumns struct {
	headerKey, headerValue, key, offset, partition, timestamp, value int
	producerID, producerEpoch, control                               int
	typed                                                            int // value_fields leaf columns, which come last
	n                                                                int // leaf columns
}

// hasTxn reports whether the file has the transaction columns.
func (c *fileColumns) hasTxn() bool {
	return c.producerID >= 0 && c.producerEpoch >= 0 && c.control >= 0
}

// columnsOf locates the columns of a segment file's schema, and rejects a
// file that is not a korvet segment. The typed value columns (value_fields,
// in files of topics with a value schema) are counted, not located: reads
// take records from the raw columns only.
func columnsOf(sc *parquet.Schema) (fileColumns, error) {
	c := fileColumns{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0}
	byPath := map[string]*int{
		"headers.list.element.key": &c.headerKey, "headers.list.element.value": &c.headerValue,
		"key": &c.key, "offset": &c.offset, "partition": &c.partition, "timestamp": &c.timestamp, "value": &c.value,
		"producer_id": &c.producerID, "producer_epoch": &c.producerEpoch, "control": &c.control,
	}
	cols := sc.Columns()
	c.n = len(cols)
	for i, path := range cols {
		if p, ok := byPath[strings.Join(path, ".")]; ok {
			*p = i
		}
		if path[0] == valueFieldsName {
			// Rows are written with the typed values last.
			if c.typed == 0 && i != len(cols)-countTyped(cols) {
				return c, errors.New("not a korvet segment file: typed columns out of place")
			}
			c.typed++
		}
	}
	for name, p := range byPath {
		switch {
		case name == "producer_id" || name == "producer_epoch" || name == "control":
		case *p < 0:
			return c, fmt.Errorf("not a korvet segment file: no column %s", name)
		}
	}
	if tx := c.producerID >= 0 || c.producerEpoch >= 0 || c.control >= 0; tx && !c.hasTxn() {
		return c, errors.New("not a korvet segment file: some transaction columns missing")
	}
	if c.typed > 0 && !c.hasTxn() {
		return c, errors.New("not a korvet segment file: typed columns without transaction columns")
	}
	if want := 7 + 3*btoi(c.hasTxn()) + c.typed; c.n != want {
		return c, fmt.Errorf("not a korvet segment file: %d columns", c.n)
	}
	return c, nil
}

func countTyped(cols [][]string) int {
	n := 0
	for _, p := range cols {
		if p[0] == valueFieldsName {
			n++
		}
	}
	return n
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// segmentWriter streams records into one Parquet file, cutting a row group
// whenever about rowGroupBytes of record data has accumulated, and keeps
// the statistics the Iceberg manifest needs. Values go to the file's
// column writers column by column (parquet-go's row path would take each
// row apart again).
type segmentWriter struct {
	w             *parquet.GenericWriter[any]
	rowGroupBytes int
	pageBytes     int
	pending       int               // record bytes in the open row group
	cv            [][]parquet.Value // per column, the values of a chunk of rows
	cols          fileColumns
	typed         *typedWriter // nil: no typed columns
	// Values that are the same in many rows, made once (Value.Level is
	// not inlined).
	noHeaderKey, noHeaderValue, partitionValue parquet.Value
	control, noControl, noEpoch, noProducer    parquet.Value

	count    int64
	minOff   int64
	maxOff   int64
	minTs    int64
	maxTs    int64
	nullKeys int64
	nullVals int64
	txnRows  int64 // rows with a producer id
	lastOff  int64
}

func newSegmentWriter(out io.Writer, schema *parquet.Schema, cols fileColumns, typed *typedWriter, codec *zstd.Codec, ref SegmentRef, rowGroupBytes, pageBytes int) *segmentWriter {
	w := parquet.NewGenericWriter[any](out, schema,
		parquet.Compression(codec),
		// Small pages, found with the offset index (parquet-go writes
		// the page index of every column chunk), let a point read decode
		// little.
		parquet.PageBufferSize(pageBytes),
		parquet.WriteBufferSize(256<<10),
		// Min/max of payloads would copy whole values into the footer and
		// page headers, and nothing filters on them.
		parquet.SkipPageBounds("key"), parquet.SkipPageBounds("value"),
		parquet.SkipPageBounds("headers", "list", "element", "value"),
		parquet.SkipPageStatistics("key"), parquet.SkipPageStatistics("value"),
		parquet.SkipPageStatistics("headers", "list", "element", "value"),
		parquet.KeyValueMetadata("korvet.topic", ref.Topic),
		parquet.KeyValueMetadata("korvet.topic-id", hex.EncodeToString(ref.TopicID[:])),
		parquet.KeyValueMetadata("korvet.partition", strconv.Itoa(int(ref.Partition))),
		parquet.KeyValueMetadata("korvet.segment", strconv.FormatInt(ref.Segment, 10)),
	)
	s := &segmentWriter{
		w: w, cols: cols, typed: typed, rowGroupBytes: rowGroupBytes, pageBytes: pageBytes,
		cv:     make([][]parquet.Value, cols.n),
		minOff: math.MaxInt64, maxOff: math.MinInt64, minTs: math.MaxInt64, maxTs: math.MinInt64,
		lastOff: -1,
	}
	s.noHeaderKey = parquet.NullValue().Level(0, 0, cols.headerKey)
	s.noHeaderValue = parquet.NullValue().Level(0, 0, cols.headerValue)
	s.partitionValue = parquet.Int32Value(ref.Partition).Level(0, 0, cols.partition)
	if cols.hasTxn() {
		s.control = parquet.BooleanValue(true).Level(0, 1, cols.control)
		s.noControl = parquet.BooleanValue(false).Level(0, 1, cols.control)
		s.noEpoch = parquet.NullValue().Level(0, 0, cols.producerEpoch)
		s.noProducer = parquet.NullValue().Level(0, 0, cols.producerID)
	}
	return s
}

var errOffsetOrder = errors.New("records out of offset order")

// write appends records, which must come in increasing offset order.
// txns is empty when no record is transactional, else parallel to recs.
func (s *segmentWriter) write(recs []record.Record, txns []record.Txn) error {
	if len(txns) != 0 && len(txns) != len(recs) {
		return fmt.Errorf("%d transaction entries for %d records", len(txns), len(recs))
	}
	if len(txns) != 0 && !s.cols.hasTxn() {
		return errors.New("transactional records, but the file has no transaction columns")
	}
	for len(recs) > 0 {
		// Take what fits in the open row group (at least one record).
		n, size := 0, 0
		for n < len(recs) && (n == 0 || s.pending+size < s.rowGroupBytes) {
			size += recs[n].Size()
			n++
		}
		var tx []record.Txn
		if len(txns) > 0 {
			tx, txns = txns[:n], txns[n:]
		}
		if err := s.writeRows(recs[:n], tx); err != nil {
			return err
		}
		s.pending += size
		recs = recs[n:]
		if s.pending >= s.rowGroupBytes {
			s.pending = 0
			if err := s.w.Flush(); err != nil {
				return fmt.Errorf("parquet: %w", err)
			}
		}
	}
	return nil
}

// writeRows writes records to the open row group. A column cuts a page
// after a write that filled its buffer: writes of at most 64 rows (what
// parquet-go's row writer takes at a time) from slices of half a page of
// records keep the pages of large records near pageBytes too.
func (s *segmentWriter) writeRows(recs []record.Record, txns []record.Txn) error {
	for i := 0; i < len(recs); {
		j, size := i, 0
		for j < len(recs) && (j == i || size < s.pageBytes/2) {
			size += recs[j].Size()
			j++
		}
		for k := i; k < j; k += maxRowsPerWrite {
			end := min(k+maxRowsPerWrite, j)
			var tx []record.Txn
			if len(txns) > 0 {
				tx = txns[k:end]
			}
			if err := s.writeChunk(recs[k:end], tx); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// maxRowsPerWrite is how many rows go to the column writers at once.
const maxRowsPerWrite = 64

// writeChunk appends the values of recs to each column and writes them.
func (s *segmentWriter) writeChunk(recs []record.Record, txns []record.Txn) error {
	c, cv, n := &s.cols, s.cv, len(recs)
	// The columns of one value per row, filled by index.
	one := func(col int) []parquet.Value { return slices.Grow(cv[col][:0], n)[:n] }
	keys, offs, parts, stamps, vals := one(c.key), one(c.offset), one(c.partition), one(c.timestamp), one(c.value)
	hk, hv := cv[c.headerKey][:0], cv[c.headerValue][:0]
	for i := range recs {
		r := &recs[i]
		if r.Offset <= s.lastOff {
			return fmt.Errorf("%w: offset %d after %d", errOffsetOrder, r.Offset, s.lastOff)
		}
		s.lastOff = r.Offset
		if len(r.Headers) == 0 {
			hk, hv = append(hk, s.noHeaderKey), append(hv, s.noHeaderValue)
		} else {
			for j := range r.Headers {
				h := &r.Headers[j]
				hk = append(hk, parquet.ByteArrayValue(h.Key).Level(min(j, 1), 1, c.headerKey))
				hv = append(hv, optBytes(h.Value).Level(min(j, 1), defOf(h.Value, 2), c.headerValue))
			}
		}
		keys[i] = optBytes(r.Key).Level(0, defOf(r.Key, 1), c.key)
		offs[i] = parquet.Int64Value(r.Offset).Level(0, 0, c.offset)
		parts[i] = s.partitionValue
		stamps[i] = parquet.Int64Value(r.Timestamp).Level(0, 0, c.timestamp)
		vals[i] = optBytes(r.Value).Level(0, defOf(r.Value, 1), c.value)
		s.minOff, s.maxOff = min(s.minOff, r.Offset), max(s.maxOff, r.Offset)
		s.minTs, s.maxTs = min(s.minTs, r.Timestamp), max(s.maxTs, r.Timestamp)
		if r.Key == nil {
			s.nullKeys++
		}
		if r.Value == nil {
			s.nullVals++
		}
	}
	cv[c.key], cv[c.offset], cv[c.partition], cv[c.timestamp], cv[c.value] = keys, offs, parts, stamps, vals
	cv[c.headerKey], cv[c.headerValue] = hk, hv
	if c.hasTxn() {
		ctl, epochs, pids := one(c.control), one(c.producerEpoch), one(c.producerID)
		for i := range recs {
			tx := record.Txn{ProducerID: -1}
			if len(txns) > 0 {
				tx = txns[i]
			}
			ctl[i] = s.noControl
			if tx.Control {
				ctl[i] = s.control
			}
			// A record outside any transaction has null producer columns:
			// what a file without them reads as.
			if tx.ProducerID >= 0 {
				epochs[i] = parquet.Int32Value(int32(tx.Epoch)).Level(0, 1, c.producerEpoch)
				pids[i] = parquet.Int64Value(tx.ProducerID).Level(0, 1, c.producerID)
				s.txnRows++
			} else {
				epochs[i], pids[i] = s.noEpoch, s.noProducer
			}
		}
		cv[c.control], cv[c.producerEpoch], cv[c.producerID] = ctl, epochs, pids
	}
	if s.typed != nil {
		for i := range recs {
			s.typed.appendRow(cv, recs[i].Value)
		}
	}
	s.count += int64(n)
	for i, w := range s.w.ColumnWriters() {
		if _, err := w.WriteRowValues(cv[i]); err != nil {
			return fmt.Errorf("parquet: column %d: %w", i, err)
		}
		cv[i] = cv[i][:0]
	}
	return nil
}

func (s *segmentWriter) close() error {
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

// optBytes is an optional byte array value: nil is null, empty is empty.
func optBytes(b []byte) parquet.Value {
	if b == nil {
		return parquet.NullValue()
	}
	return parquet.ByteArrayValue(b)
}

// defOf is the definition level of an optional value whose maximum is max.
func defOf(b []byte, max int) int {
	if b == nil {
		return max - 1
	}
	return max
}
