package iceberg

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
)

// Manifests and manifest lists are Avro object container files (deflate)
// with the schemas of the Iceberg table spec, "Manifests" and "Manifest
// Lists", format version 2: every field carries its field-id, maps of
// int keys are arrays of key/value records with logicalType "map", and
// the files carry the spec's key-value metadata (schema, partition spec,
// format version, content; snapshot id, parent and sequence number).
// The schemas are written as iceberg-go writes them, so both make the
// same headers.

// Manifest and entry contents and entry statuses (spec values).
const (
	ManifestContentData    = 0
	ManifestContentDeletes = 1
	EntryContentData       = 0
	EntryStatusEXISTING    = 0
	EntryStatusADDED       = 1
	EntryStatusDELETED     = 2
	ParquetFile            = "PARQUET"
)

// ManifestFile is a manifest list entry: one manifest and its totals.
type ManifestFile struct {
	Path               string         `avro:"manifest_path"`
	Length             int64          `avro:"manifest_length"`
	SpecID             int32          `avro:"partition_spec_id"`
	Content            int32          `avro:"content"`
	SequenceNumber     int64          `avro:"sequence_number"` // -1 until a manifest list assigns it
	MinSequenceNumber  int64          `avro:"min_sequence_number"`
	AddedSnapshotID    int64          `avro:"added_snapshot_id"`
	AddedFilesCount    int32          `avro:"added_files_count"`
	ExistingFilesCount int32          `avro:"existing_files_count"`
	DeletedFilesCount  int32          `avro:"deleted_files_count"`
	Partitions         []FieldSummary `avro:"partitions"`
	AddedRowsCount     int64          `avro:"added_rows_count"`
	ExistingRowsCount  int64          `avro:"existing_rows_count"`
	DeletedRowsCount   int64          `avro:"deleted_rows_count"`
	KeyMetadata        []byte         `avro:"key_metadata"`
}

// FieldSummary summarises one partition field over a manifest's files.
type FieldSummary struct {
	ContainsNull bool   `avro:"contains_null"`
	ContainsNaN  *bool  `avro:"contains_nan"`
	LowerBound   []byte `avro:"lower_bound"`
	UpperBound   []byte `avro:"upper_bound"`
}

// ManifestEntry is one data file of a manifest with its status. The
// snapshot id and sequence numbers are nil when they are inherited from
// the manifest (ADDED entries of a new manifest); ReadManifest fills them.
type ManifestEntry struct {
	Status             int32    `avro:"status"`
	SnapshotID         *int64   `avro:"snapshot_id"`
	SequenceNumber     *int64   `avro:"sequence_number"`
	FileSequenceNumber *int64   `avro:"file_sequence_number"`
	DataFile           DataFile `avro:"data_file"`
}

// DataFile is a manifest's data_file struct. The column maps are the
// spec's int-keyed maps, in their Avro form.
type DataFile struct {
	Content         int32          `avro:"content"`
	FilePath        string         `avro:"file_path"`
	FileFormat      string         `avro:"file_format"`
	Partition       map[string]any `avro:"partition"` // by partition field name
	RecordCount     int64          `avro:"record_count"`
	FileSizeInBytes int64          `avro:"file_size_in_bytes"`
	ColumnSizes     []IntLong      `avro:"column_sizes"`
	ValueCounts     []IntLong      `avro:"value_counts"`
	NullValueCounts []IntLong      `avro:"null_value_counts"`
	NaNValueCounts  []IntLong      `avro:"nan_value_counts"`
	LowerBounds     []IntBytes     `avro:"lower_bounds"`
	UpperBounds     []IntBytes     `avro:"upper_bounds"`
	KeyMetadata     []byte         `avro:"key_metadata"`
	SplitOffsets    []int64        `avro:"split_offsets"`
	EqualityIDs     []int32        `avro:"equality_ids"`
	SortOrderID     *int32         `avro:"sort_order_id"`
}

// IntLong is an entry of a map<int, long> (counts by field id).
type IntLong struct {
	Key   int32 `avro:"key"`
	Value int64 `avro:"value"`
}

// IntBytes is an entry of a map<int, binary> (bounds by field id).
type IntBytes struct {
	Key   int32  `avro:"key"`
	Value []byte `avro:"value"`
}

// LowerBound is the serialized lower bound of field id, or nil.
func (d *DataFile) LowerBound(id int) []byte { return boundOf(d.LowerBounds, id) }

// UpperBound is the serialized upper bound of field id, or nil.
func (d *DataFile) UpperBound(id int) []byte { return boundOf(d.UpperBounds, id) }

func boundOf(bs []IntBytes, id int) []byte {
	for _, b := range bs {
		if int(b.Key) == id {
			return b.Value
		}
	}
	return nil
}

// IntLongs is a map of counts by field id in its Avro form, by id.
func IntLongs(m map[int]int64) []IntLong {
	out := make([]IntLong, 0, len(m))
	for k, v := range m {
		out = append(out, IntLong{Key: int32(k), Value: v})
	}
	slices.SortFunc(out, func(a, b IntLong) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// IntBytesOf is a map of bounds by field id in its Avro form, by id.
func IntBytesOf(m map[int][]byte) []IntBytes {
	out := make([]IntBytes, 0, len(m))
	for k, v := range m {
		out = append(out, IntBytes{Key: int32(k), Value: v})
	}
	slices.SortFunc(out, func(a, b IntBytes) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// field is one field of an Avro record schema with its Iceberg field id.
func field(name string, id int, typ, doc string) string {
	s := `{"field-id":` + strconv.Itoa(id) + `,"name":"` + name + `","type":` + typ
	if doc != "" {
		s += `,"doc":"` + doc + `"`
	}
	return s + "}"
}

func nullable(typ string) string { return `["null",` + typ + `]` }

func intMap(name string, keyID, valueID int, valueType string) string {
	return `{"type":"array","logicalType":"map","items":{"type":"record","name":"` + name + `","fields":[` +
		field("key", keyID, `"int"`, "") + "," + field("value", valueID, valueType, "") + `]}}`
}

// manifestListSchema is the v2 manifest_file schema.
var manifestListSchema = `{"type":"record","name":"manifest_file","fields":[` + strings.Join([]string{
	field("manifest_path", 500, `"string"`, "Location URI with FS scheme"),
	field("manifest_length", 501, `"long"`, "Total file size in bytes"),
	field("partition_spec_id", 502, `"int"`, "Spec ID used to write"),
	`{"field-id":517,"name":"content","type":"int","doc":"Content type","default":0}`,
	`{"field-id":515,"name":"sequence_number","type":"long","doc":"Sequence number","default":0}`,
	`{"field-id":516,"name":"min_sequence_number","type":"long","doc":"Minimum sequence number","default":0}`,
	field("added_snapshot_id", 503, `"long"`, "Snapshot ID that added the manifest"),
	field("added_files_count", 504, `"int"`, "Added entry count"),
	field("existing_files_count", 505, `"int"`, "Existing entry count"),
	field("deleted_files_count", 506, `"int"`, "Deleted entry count"),
	field("partitions", 507, nullable(`{"type":"array","element-id":508,"items":{"type":"record","name":"r508","fields":[`+strings.Join([]string{
		field("contains_null", 509, `"boolean"`, "true if the field contains null values"),
		field("contains_nan", 518, nullable(`"boolean"`), "true if the field contains NaN values"),
		field("lower_bound", 510, nullable(`"bytes"`), "serialized lower bound"),
		field("upper_bound", 511, nullable(`"bytes"`), "serialized upper bound"),
	}, ",")+`]}}`), "Partition field summaries"),
	field("added_rows_count", 512, `"long"`, "Added row count"),
	field("existing_rows_count", 513, `"long"`, "Existing row count"),
	field("deleted_rows_count", 514, `"long"`, "Deleted row count"),
	field("key_metadata", 519, nullable(`"bytes"`), "Key metadata"),
}, ",") + `]}`

// manifestEntrySchema is the v2 manifest_entry schema with the partition
// struct part (the fields of the r102 record).
func manifestEntrySchema(partition string) string {
	return `{"type":"record","name":"manifest_entry","fields":[` + strings.Join([]string{
		field("status", 0, `"int"`, ""),
		field("snapshot_id", 1, nullable(`"long"`), ""),
		field("sequence_number", 3, nullable(`"long"`), ""),
		field("file_sequence_number", 4, nullable(`"long"`), ""),
		field("data_file", 2, `{"type":"record","name":"r2","fields":[`+strings.Join([]string{
			`{"field-id":134,"name":"content","type":"int","doc":"Content type","default":0}`,
			field("file_path", 100, `"string"`, "Location URI with FS scheme"),
			field("file_format", 101, `"string"`, "File format name: avro, orc, parquet"),
			field("partition", 102, `{"type":"record","name":"r102","fields":[`+partition+`]}`, "Partition data tuple, schema based on the partition spec"),
			field("record_count", 103, `"long"`, "Number of records in the file"),
			field("file_size_in_bytes", 104, `"long"`, "Size of the file in bytes"),
			field("column_sizes", 108, nullable(intMap("k117_v118", 117, 118, `"long"`)), "map of column id to total size on disk"),
			field("value_counts", 109, nullable(intMap("k119_v120", 119, 120, `"long"`)), "map of value to count"),
			field("null_value_counts", 110, nullable(intMap("k121_v122", 121, 122, `"long"`)), "map of value to count"),
			field("nan_value_counts", 137, nullable(intMap("k138_v139", 138, 139, `"long"`)), "map of value to count"),
			field("lower_bounds", 125, nullable(intMap("k126_v127", 126, 127, `"bytes"`)), "map of column id to lower bound"),
			field("upper_bounds", 128, nullable(intMap("k129_v130", 129, 130, `"bytes"`)), "map of column id to upper bound"),
			field("key_metadata", 131, nullable(`"bytes"`), "Encryption Key Metadata Blob"),
			field("split_offsets", 132, nullable(`{"type":"array","element-id":133,"items":"long"}`), "splitable offsets"),
			field("equality_ids", 135, nullable(`{"type":"array","element-id":136,"items":"int"}`), "field ids used to determine row equality in equality delete files"),
			field("sort_order_id", 140, nullable(`"int"`), "Sort order ID"),
		}, ",")+`]}`, ""),
	}, ",") + `]}`
}

// avroPrimitive is the Avro type of an Iceberg primitive (spec, "Avro":
// type mapping), for the partition types written here: those without an
// Avro logical type (korvet partitions by an int).
func avroPrimitive(t Type) (string, error) {
	switch t.(type) {
	case BooleanType:
		return `"boolean"`, nil
	case Int32Type:
		return `"int"`, nil
	case Int64Type:
		return `"long"`, nil
	case Float32Type:
		return `"float"`, nil
	case Float64Type:
		return `"double"`, nil
	case StringType:
		return `"string"`, nil
	case BinaryType:
		return `"bytes"`, nil
	}
	return "", fmt.Errorf("partition type %s not supported", t)
}

// encode writes one container file of records.
func encode[T any](out io.Writer, schema string, meta map[string][]byte, records []T) error {
	enc, err := ocf.NewEncoder(schema, out,
		ocf.WithCodec(ocf.Deflate),
		ocf.WithMetadata(meta),
		ocf.WithEncoderSchemaCache(&avro.SchemaCache{}),
		// The schema as given: the default marshaler writes the
		// canonical form, which drops the field ids.
		ocf.WithSchemaMarshaler(func(avro.Schema) ([]byte, error) { return []byte(schema), nil }))
	if err != nil {
		return fmt.Errorf("avro writer: %w", err)
	}
	for i := range records {
		if err := enc.Encode(&records[i]); err != nil {
			return fmt.Errorf("avro record: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("avro writer: %w", err)
	}
	return nil
}

// decode reads every record of a container file, in the schema the file
// was written with (fields this package does not model are skipped).
func decode[T any](data []byte) ([]T, map[string][]byte, error) {
	dec, err := ocf.NewDecoder(bytes.NewReader(data), ocf.WithDecoderSchemaCache(&avro.SchemaCache{}))
	if err != nil {
		return nil, nil, fmt.Errorf("avro reader: %w", err)
	}
	var out []T
	for dec.HasNext() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("avro record: %w", err)
		}
		out = append(out, v)
	}
	if err := dec.Error(); err != nil {
		return nil, nil, fmt.Errorf("avro reader: %w", err)
	}
	return out, dec.Metadata(), nil
}

func checkVersion(meta map[string][]byte) error {
	if v, ok := meta["format-version"]; ok && string(v) != "2" {
		return fmt.Errorf("format version %s, want 2", v)
	}
	return nil
}

// ReadManifestList reads a manifest list.
func ReadManifestList(data []byte) ([]ManifestFile, error) {
	mans, meta, err := decode[ManifestFile](data)
	if err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	if err := checkVersion(meta); err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	return mans, nil
}

// WriteManifestList writes the manifest list of snapshot id (parent its
// parent, seq its sequence number) and returns the manifests as written:
// those the snapshot added get seq as their sequence number (and as their
// minimum one when they had none).
func WriteManifestList(out io.Writer, id int64, parent *int64, seq int64, mans []ManifestFile) ([]ManifestFile, error) {
	written := make([]ManifestFile, len(mans))
	for i, m := range mans {
		if m.SequenceNumber == -1 || m.MinSequenceNumber == -1 {
			if m.AddedSnapshotID != id {
				return nil, fmt.Errorf("manifest list: manifest %s of snapshot %d has no sequence number", m.Path, m.AddedSnapshotID)
			}
			if m.SequenceNumber == -1 {
				m.SequenceNumber = seq
			}
			if m.MinSequenceNumber == -1 {
				m.MinSequenceNumber = seq
			}
		}
		if m.Partitions == nil {
			m.Partitions = []FieldSummary{}
		}
		written[i] = m
	}
	parentStr := "null"
	if parent != nil {
		parentStr = strconv.FormatInt(*parent, 10)
	}
	meta := map[string][]byte{
		"format-version":     []byte("2"),
		"snapshot-id":        []byte(strconv.FormatInt(id, 10)),
		"parent-snapshot-id": []byte(parentStr),
		"sequence-number":    []byte(strconv.FormatInt(seq, 10)),
	}
	if err := encode(out, manifestListSchema, meta, written); err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	return written, nil
}

// ReadManifest reads the entries of manifest m (its bytes data), with the
// snapshot id and sequence numbers they inherit from m filled in. With
// discardDeleted, DELETED entries are left out.
func ReadManifest(m ManifestFile, data []byte, discardDeleted bool) ([]ManifestEntry, error) {
	entries, meta, err := decode[ManifestEntry](data)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", m.Path, err)
	}
	if err := checkVersion(meta); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", m.Path, err)
	}
	out := entries[:0]
	for _, e := range entries {
		if discardDeleted && e.Status == EntryStatusDELETED {
			continue
		}
		// Inheritance (spec, "Sequence Number Inheritance"): a null
		// snapshot id is the manifest's; null sequence numbers of ADDED
		// entries are the manifest's.
		if e.SnapshotID == nil {
			id := m.AddedSnapshotID
			e.SnapshotID = &id
		}
		if seq := m.SequenceNumber; seq >= 0 && (e.Status == EntryStatusADDED || seq == 0) {
			if e.SequenceNumber == nil {
				e.SequenceNumber = &seq
			}
			if e.FileSequenceNumber == nil {
				e.FileSequenceNumber = &seq
			}
		}
		for k, v := range e.DataFile.Partition {
			if n, ok := v.(int); ok { // an Avro int
				e.DataFile.Partition[k] = int32(n)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// partitionValue is v as the Go type of t's Avro type (int32 for int,
// int64 for long), so that the encoder picks the right union branch.
func partitionValue(t Type, v any) (any, error) {
	var n int64
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	default:
		return v, nil
	}
	switch t.(type) {
	case Int32Type:
		if n != int64(int32(n)) {
			return nil, fmt.Errorf("value %d out of range for %s", n, t)
		}
		return int32(n), nil
	case Int64Type:
		return n, nil
	}
	return nil, fmt.Errorf("integer value %d for type %s", n, t)
}

// WriteManifest writes a data manifest of snapshot id with entries (spec
// and schema those of the table) and returns its manifest list entry,
// without path and length, with sequence numbers for the manifest list
// to assign. ADDED entries get id as their snapshot id and no sequence
// numbers; EXISTING ones must have theirs (ReadManifest fills in the
// inherited ones).
func WriteManifest(out io.Writer, spec PartitionSpec, sc *Schema, id int64, entries []ManifestEntry) (ManifestFile, error) {
	if len(entries) == 0 {
		return ManifestFile{}, errors.New("manifest: no entries")
	}
	ptype, err := spec.PartitionType(sc)
	if err != nil {
		return ManifestFile{}, fmt.Errorf("manifest: %w", err)
	}
	var parts []string
	for _, f := range ptype {
		t, err := avroPrimitive(f.Type)
		if err != nil {
			return ManifestFile{}, fmt.Errorf("manifest: %w", err)
		}
		parts = append(parts, field(f.Name, f.ID, nullable(t), ""))
	}
	mf := ManifestFile{
		SpecID: int32(spec.ID), Content: ManifestContentData, SequenceNumber: -1, MinSequenceNumber: -1,
		AddedSnapshotID: id,
	}
	stats := make([]partitionStats, len(ptype))
	written := make([]ManifestEntry, len(entries))
	for i, e := range entries {
		switch e.Status {
		case EntryStatusADDED:
			snap := id
			e.SnapshotID, e.SequenceNumber, e.FileSequenceNumber = &snap, nil, nil
			mf.AddedFilesCount++
			mf.AddedRowsCount += e.DataFile.RecordCount
		case EntryStatusEXISTING:
			if e.SnapshotID == nil || e.SequenceNumber == nil || e.FileSequenceNumber == nil {
				return ManifestFile{}, fmt.Errorf("manifest: existing file %s without snapshot id or sequence numbers", e.DataFile.FilePath)
			}
			mf.ExistingFilesCount++
			mf.ExistingRowsCount += e.DataFile.RecordCount
		default:
			return ManifestFile{}, fmt.Errorf("manifest: entry status %d not written", e.Status)
		}
		if e.DataFile.Content != EntryContentData {
			return ManifestFile{}, fmt.Errorf("manifest: %s is not a data file", e.DataFile.FilePath)
		}
		if seq := e.SequenceNumber; seq != nil && (mf.MinSequenceNumber < 0 || *seq < mf.MinSequenceNumber) {
			mf.MinSequenceNumber = *seq
		}
		part := make(map[string]any, len(ptype))
		for j, f := range ptype {
			v, err := partitionValue(f.Type, e.DataFile.Partition[f.Name])
			if err == nil {
				err = stats[j].add(f.Type, v)
			}
			if err != nil {
				return ManifestFile{}, fmt.Errorf("manifest: %s: partition field %s: %w", e.DataFile.FilePath, f.Name, err)
			}
			part[f.Name] = v
		}
		e.DataFile.Partition = part
		written[i] = e
	}
	for j, f := range ptype {
		mf.Partitions = append(mf.Partitions, stats[j].summary(f.Type))
	}
	sj, err := json.Marshal(sc)
	if err != nil {
		return ManifestFile{}, fmt.Errorf("manifest: schema: %w", err)
	}
	pfs := spec.Fields
	if pfs == nil {
		pfs = []PartitionField{}
	}
	pj, err := json.Marshal(pfs)
	if err != nil {
		return ManifestFile{}, fmt.Errorf("manifest: partition spec: %w", err)
	}
	meta := map[string][]byte{
		"schema":            sj,
		"schema-id":         []byte(strconv.Itoa(sc.ID)),
		"partition-spec":    pj,
		"partition-spec-id": []byte(strconv.Itoa(spec.ID)),
		"format-version":    []byte("2"),
		"content":           []byte("data"),
	}
	if err := encode(out, manifestEntrySchema(strings.Join(parts, ",")), meta, written); err != nil {
		return ManifestFile{}, fmt.Errorf("manifest: %w", err)
	}
	return mf, nil
}

// partitionStats collects a partition field's summary: whether a file
// has a null, and the bounds where the type has an order here (other
// types get none, which only keeps readers from pruning by them).
type partitionStats struct {
	null     bool
	lo, hi   any
	noBounds bool
}

func (p *partitionStats) add(t Type, v any) error {
	if v == nil {
		p.null = true
		return nil
	}
	k, err := partitionKey(t, v)
	if err != nil {
		return err
	}
	if k == nil {
		p.noBounds = true
		return nil
	}
	if p.lo == nil || compareKeys(k, p.lo) < 0 {
		p.lo = k
	}
	if p.hi == nil || compareKeys(k, p.hi) > 0 {
		p.hi = k
	}
	return nil
}

func (p *partitionStats) summary(t Type) FieldSummary {
	s := FieldSummary{ContainsNull: p.null}
	switch t.(type) {
	case Float32Type, Float64Type:
		// NaN is not tracked here: unknown.
	default:
		f := false
		s.ContainsNaN = &f
	}
	if p.lo != nil && !p.noBounds {
		s.LowerBound, s.UpperBound = serialize(p.lo, t), serialize(p.hi, t)
	}
	return s
}

// partitionKey is a partition value as int64, string or []byte for
// ordering, or nil for types without bounds here.
func partitionKey(t Type, v any) (any, error) {
	switch t.(type) {
	case Int32Type, Int64Type:
		switch n := v.(type) {
		case int32:
			return int64(n), nil
		case int64:
			return n, nil
		}
	case StringType:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case BinaryType:
		if b, ok := v.([]byte); ok {
			return string(b), nil
		}
	default:
		return nil, nil
	}
	return nil, fmt.Errorf("value %v (%T) is not of type %s", v, v, t)
}

func compareKeys(a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case string:
		return cmp.Compare(x, b.(string))
	}
	return 0
}

// serialize is the spec's single-value binary form (Appendix D).
func serialize(k any, t Type) []byte {
	switch x := k.(type) {
	case int64:
		if _, ok := t.(Int32Type); ok {
			return binary.LittleEndian.AppendUint32(nil, uint32(int32(x)))
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(x))
	case string:
		return []byte(x)
	}
	return nil
}
