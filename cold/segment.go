package cold

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/korvet/korvet/engine/record"
)

// Iceberg field ids of a topic table. They are what iceberg.NewMetadata
// assigns to tableSchema (top-level fields first, then nested ones), and
// the Parquet writer puts the same ids on its columns; openTable checks
// that a table's schema still has them.
const (
	idPartition   = 1
	idOffset      = 2
	idTimestamp   = 3
	idKey         = 4
	idValue       = 5
	idHeaders     = 6
	idHeader      = 7
	idHeaderKey   = 8
	idHeaderValue = 9
)

// tableSchema is a topic table's Iceberg schema. timestamp is the Kafka
// timestamp in epoch milliseconds as a long: Iceberg timestamps are
// microseconds, and a Kafka timestamp can be any int64, so a long keeps
// every value exact (query engines: to_timestamp_millis / epoch_ms).
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

// Leaf column indexes of segmentSchema. parquet.Group orders fields by
// name, so the file's columns are alphabetical; readers go by field id.
const (
	colHeaderKey = iota
	colHeaderValue
	colKey
	colOffset
	colPartition
	colTimestamp
	colValue
	numColumns
)

// segmentSchema is the Parquet schema of one archived segment, with the
// Iceberg field ids of tableSchema.
func segmentSchema() *parquet.Schema {
	delta := func(n parquet.Node) parquet.Node { return parquet.Encoded(n, &parquet.DeltaBinaryPacked) }
	return parquet.NewSchema("kafka_record", parquet.Group{
		"partition": parquet.FieldID(parquet.Int(32), idPartition),
		"offset":    parquet.FieldID(delta(parquet.Int(64)), idOffset),
		"timestamp": parquet.FieldID(delta(parquet.Int(64)), idTimestamp),
		"key":       parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idKey),
		"value":     parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idValue),
		"headers": parquet.FieldID(parquet.List(parquet.FieldID(parquet.Group{
			"key":   parquet.FieldID(parquet.Encoded(parquet.String(), &parquet.RLEDictionary), idHeaderKey),
			"value": parquet.FieldID(parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), idHeaderValue),
		}, idHeader)), idHeaders),
	})
}

// segmentWriter streams records into one Parquet file, cutting a row group
// whenever about rowGroupBytes of record data has accumulated, and keeps
// the statistics the Iceberg manifest needs.
type segmentWriter struct {
	w             *parquet.GenericWriter[any]
	rowGroupBytes int
	pending       int // record bytes in the open row group
	rows          []parquet.Row
	vals          []parquet.Value

	partition int32
	count     int64
	minOff    int64
	maxOff    int64
	minTs     int64
	maxTs     int64
	nullKeys  int64
	nullVals  int64
	lastOff   int64
}

func newSegmentWriter(out io.Writer, schema *parquet.Schema, codec *zstd.Codec, ref SegmentRef, rowGroupBytes int) *segmentWriter {
	w := parquet.NewGenericWriter[any](out, schema,
		parquet.Compression(codec),
		parquet.PageBufferSize(256<<10),
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
	return &segmentWriter{
		w: w, rowGroupBytes: rowGroupBytes, partition: ref.Partition,
		minOff: math.MaxInt64, maxOff: math.MinInt64, minTs: math.MaxInt64, maxTs: math.MinInt64,
		lastOff: -1,
	}
}

var errOffsetOrder = errors.New("records out of offset order")

// write appends records, which must come in increasing offset order.
func (s *segmentWriter) write(recs []record.Record) error {
	for len(recs) > 0 {
		// Take what fits in the open row group (at least one record).
		n, size := 0, 0
		for n < len(recs) && (n == 0 || s.pending+size < s.rowGroupBytes) {
			size += recs[n].Size()
			n++
		}
		if err := s.writeRows(recs[:n]); err != nil {
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

func (s *segmentWriter) writeRows(recs []record.Record) error {
	s.vals = s.vals[:0]
	// One backing array holds the values of the whole batch; the rows
	// slice into it once it has stopped growing.
	for i := range recs {
		r := &recs[i]
		if r.Offset <= s.lastOff {
			return fmt.Errorf("%w: offset %d after %d", errOffsetOrder, r.Offset, s.lastOff)
		}
		s.lastOff = r.Offset
		if len(r.Headers) == 0 {
			s.vals = append(s.vals,
				parquet.NullValue().Level(0, 0, colHeaderKey),
				parquet.NullValue().Level(0, 0, colHeaderValue))
		} else {
			for j := range r.Headers {
				s.vals = append(s.vals, parquet.ByteArrayValue(r.Headers[j].Key).Level(min(j, 1), 1, colHeaderKey))
			}
			for j := range r.Headers {
				v := r.Headers[j].Value
				s.vals = append(s.vals, optBytes(v).Level(min(j, 1), defOf(v, 2), colHeaderValue))
			}
		}
		s.vals = append(s.vals,
			optBytes(r.Key).Level(0, defOf(r.Key, 1), colKey),
			parquet.Int64Value(r.Offset).Level(0, 0, colOffset),
			parquet.Int32Value(s.partition).Level(0, 0, colPartition),
			parquet.Int64Value(r.Timestamp).Level(0, 0, colTimestamp),
			optBytes(r.Value).Level(0, defOf(r.Value, 1), colValue),
		)
		s.count++
		s.minOff, s.maxOff = min(s.minOff, r.Offset), max(s.maxOff, r.Offset)
		s.minTs, s.maxTs = min(s.minTs, r.Timestamp), max(s.maxTs, r.Timestamp)
		if r.Key == nil {
			s.nullKeys++
		}
		if r.Value == nil {
			s.nullVals++
		}
	}
	s.rows = s.rows[:0]
	for i, off := 0, 0; i < len(recs); i++ {
		n := 5 + 2*max(len(recs[i].Headers), 1)
		s.rows = append(s.rows, parquet.Row(s.vals[off:off+n:off+n]))
		off += n
	}
	if _, err := s.w.WriteRows(s.rows); err != nil {
		return fmt.Errorf("parquet: %w", err)
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
