package schema

import "context"

// Kind is the type of a typed column.
type Kind uint8

// The kinds of typed columns, and the Go type Decode gives a value of
// each (nil for a null value of any kind).
const (
	KindStruct    Kind = iota + 1 // map[string]any, keyed by field name
	KindList                      // []any of Elem
	KindMap                       // map[string]any of Elem (keys are strings)
	KindBool                      // bool
	KindInt32                     // int32
	KindInt64                     // int64
	KindFloat32                   // float32
	KindFloat64                   // float64
	KindString                    // string
	KindBinary                    // []byte
	KindTimestamp                 // int64: microseconds since the epoch, UTC
	KindDate                      // int32: days since the epoch
	// KindJSON holds what has no column type of its own (an Avro union
	// of several types, a recursive type past its first level, a JSON
	// Schema anyOf): the value's JSON text, as a string.
	KindJSON
)

// Field is one typed column, or the root struct of a schema's values.
// Every field is optional (Iceberg requires columns added by schema
// evolution to be).
type Field struct {
	Name   string
	Kind   Kind
	Fields []*Field // KindStruct, in schema order
	Elem   *Field   // KindList element, KindMap value (Name "element" / "value")
	Doc    string
}

// Lookup finds a registered schema by its global id; the registry
// (engine/registry) implements it, parsing and caching by id.
type Lookup interface {
	SchemaByID(ctx context.Context, id int32) (Schema, error)
}

// Typed is what the cold tier needs to give a topic's archive typed value
// columns: the shape of every version of the topic's value subject merged
// into one (fields in order of first appearance; a field whose type
// changes across versions is widened when Iceberg allows it, int32 to
// int64 and float32 to float64, and becomes KindJSON otherwise), and a
// decoder to that merged shape.
type Typed struct {
	// Subject is the value subject, "{topic}-value".
	Subject string
	// IDs are the schema ids of the subject's versions, oldest first.
	IDs   []int32
	Shape *Field
	// Decode decodes a record value framed with one of IDs into a value
	// laid out as Shape; ok is false for a value that is not framed, is
	// framed with another id, or does not decode (its typed columns are
	// then null; the raw value is archived as always).
	Decode func(value []byte) (v any, ok bool)
}
