package cold

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/cold/icemeta"
	"github.com/korvet/korvet/engine/schema"
)

// Typed value columns.
//
// A topic whose value subject holds a record-shaped schema gets one more
// optional column, value_fields: a struct of the value's fields, derived
// from the merged shape of the subject's versions (schema.Typed). The raw
// value column stays the source of truth; value_fields is for query
// engines, and korvet's own reads ignore it.
//
// Kinds map to Iceberg types as Struct->struct, List->list, Map->map
// (string keys), Bool->boolean, Int32->int, Int64->long, Float32->float,
// Float64->double, String->string, Binary->binary, Date->date, JSON->string
// and Timestamp->timestamptz: the schema formats' timestamps (Avro
// timestamp-millis/micros, Protobuf Timestamp) are instants, so they are
// stored as microseconds adjusted to UTC, which engines show as TIMESTAMP
// WITH TIME ZONE rather than as a wall clock of no zone. Every field, list
// element and map value is optional.
//
// Column names come from field names by typedName, made unique among their
// siblings (case-insensitively, as DuckDB and Spark compare names) with a
// suffix _2, _3, ... in the order the shape lists the fields, which is
// the order of first appearance across versions, so a name once given
// stays.

// valueFieldsName is the typed column of a topic table.
const valueFieldsName = "value_fields"

// TypedFunc returns the typed shape and decoder of a topic's values, or
// nil when the topic has none.
type TypedFunc func(ctx context.Context, topic string) (*schema.Typed, error)

// SetTyped sets where Archive learns a topic's value shape; nil (the
// default) archives no typed columns. Set it before archiving starts.
func (s *Store) SetTyped(fn TypedFunc) {
	s.typedMu.Lock()
	defer s.typedMu.Unlock()
	s.typedFn = fn
}

// typedWarnEvery bounds the warnings about one topic's typed columns: a
// problem with the registry would otherwise log once per segment.
const typedWarnEvery = time.Minute

// warnTyped logs a problem with a topic's typed columns at most once per
// typedWarnEvery.
func (s *Store) warnTyped(topic, msg string, err error) {
	s.typedMu.Lock()
	last, seen := s.typedWarned[topic]
	now := time.Now()
	if seen && now.Sub(last) < typedWarnEvery {
		s.typedMu.Unlock()
		return
	}
	if s.typedWarned == nil {
		s.typedWarned = make(map[string]time.Time)
	}
	s.typedWarned[topic] = now
	s.typedMu.Unlock()
	s.log.Warn("cold: "+msg+"; archiving without typed columns", "topic", topic, "err", err)
}

// typedFor asks the hook for a topic's typed shape; nil when there is no
// hook, no shape, or an error (logged).
func (s *Store) typedFor(ctx context.Context, topic string) *schema.Typed {
	s.typedMu.Lock()
	fn := s.typedFn
	s.typedMu.Unlock()
	if fn == nil {
		return nil
	}
	t, err := fn(ctx, topic)
	switch {
	case err != nil:
		s.warnTyped(topic, "value schema unavailable", err)
		return nil
	case t == nil || t.Shape == nil || t.Decode == nil:
		return nil // no value schema, or values that are not records
	case t.Shape.Kind != schema.KindStruct || len(t.Shape.Fields) == 0:
		return nil
	}
	return t
}

// typedName turns a schema field name into a column name that every
// engine takes unquoted: ASCII letters, digits and '_' stay, any other
// character c becomes "_x" and c's code point in upper-case hex (the rule
// Iceberg's Avro conversion uses), a leading digit gets a '_' in front,
// and the empty name becomes "_".
func typedName(name string) string {
	if name == "" {
		return "_"
	}
	var b strings.Builder
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
			b.WriteRune(c)
		case c >= '0' && c <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(c)
		default:
			b.WriteString("_x")
			b.WriteString(strings.ToUpper(strconv.FormatInt(int64(c), 16)))
		}
	}
	return b.String()
}

// namedField is a shape field with its column name.
type namedField struct {
	col string
	f   *schema.Field
}

// typedNames gives a struct's fields their column names (see typedName),
// suffixing names taken already by an earlier sibling.
func typedNames(fields []*schema.Field) []namedField {
	out := make([]namedField, 0, len(fields))
	taken := make(map[string]bool, len(fields))
	for _, f := range fields {
		if f == nil {
			continue
		}
		base := typedName(f.Name)
		name := base
		for n := 2; taken[strings.ToLower(name)]; n++ {
			name = base + "_" + strconv.Itoa(n)
		}
		taken[strings.ToLower(name)] = true
		out = append(out, namedField{name, f})
	}
	return out
}

// maxTypedDepth bounds the nesting of typed columns; a shape nested
// deeper (no schema needs that) gets no typed columns.
const maxTypedDepth = 32

// icebergTypeOf is the Iceberg type of a shape field. Ids are
// placeholders, unique within the type; Iceberg assigns the real ones when
// the column is added.
func icebergTypeOf(f *schema.Field, nextID func() int, depth int) (iceberg.Type, error) {
	if depth > maxTypedDepth {
		return nil, fmt.Errorf("field %q nested deeper than %d levels", f.Name, maxTypedDepth)
	}
	switch f.Kind {
	case schema.KindStruct:
		st := &iceberg.StructType{}
		for _, nf := range typedNames(f.Fields) {
			t, err := icebergTypeOf(nf.f, nextID, depth+1)
			if err != nil {
				return nil, err
			}
			st.FieldList = append(st.FieldList, iceberg.NestedField{ID: nextID(), Name: nf.col, Type: t, Doc: nf.f.Doc})
		}
		if len(st.FieldList) == 0 {
			// Iceberg and Parquet have no empty structs: an empty record
			// gets a string column that stays null.
			return iceberg.PrimitiveTypes.String, nil
		}
		return st, nil
	case schema.KindList, schema.KindMap:
		if f.Elem == nil {
			return nil, fmt.Errorf("field %q: %s without an element", f.Name, kindName(f.Kind))
		}
		et, err := icebergTypeOf(f.Elem, nextID, depth+1)
		if err != nil {
			return nil, err
		}
		if f.Kind == schema.KindList {
			return &iceberg.ListType{ElementID: nextID(), Element: et}, nil
		}
		return &iceberg.MapType{KeyID: nextID(), KeyType: iceberg.PrimitiveTypes.String, ValueID: nextID(), ValueType: et}, nil
	}
	if t := primitiveOf(f.Kind); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("field %q has unknown kind %d", f.Name, f.Kind)
}

func primitiveOf(k schema.Kind) iceberg.Type {
	switch k {
	case schema.KindBool:
		return iceberg.PrimitiveTypes.Bool
	case schema.KindInt32:
		return iceberg.PrimitiveTypes.Int32
	case schema.KindInt64:
		return iceberg.PrimitiveTypes.Int64
	case schema.KindFloat32:
		return iceberg.PrimitiveTypes.Float32
	case schema.KindFloat64:
		return iceberg.PrimitiveTypes.Float64
	case schema.KindString, schema.KindJSON:
		return iceberg.PrimitiveTypes.String
	case schema.KindBinary:
		return iceberg.PrimitiveTypes.Binary
	case schema.KindTimestamp:
		return iceberg.PrimitiveTypes.TimestampTz
	case schema.KindDate:
		return iceberg.PrimitiveTypes.Date
	}
	return nil
}

func kindName(k schema.Kind) string {
	switch k {
	case schema.KindList:
		return "list"
	case schema.KindMap:
		return "map"
	}
	return "kind " + strconv.Itoa(int(k))
}

// errTypedChange: the table's typed columns and the topic's shape differ
// in a way schema evolution must not follow (a narrowed or changed type).
var errTypedChange = errors.New("typed columns cannot follow the value schema")

// schemaChange is one step of evolving value_fields towards a shape.
type schemaChange struct {
	path []string
	add  iceberg.Type // add the column with this type, or
	to   iceberg.Type // promote the column to this type
	doc  string
}

// typedChanges lists what value_fields (have; nil when the table lacks
// it) needs to hold the shape: added fields, anywhere in the tree, and
// int->long, float->double promotions. Fields of the table that the shape
// lacks stay (they read as null). Any other difference is errTypedChange.
func typedChanges(have iceberg.Type, shape *schema.Field) ([]schemaChange, error) {
	id := 0
	next := func() int { id++; return id }
	if have == nil {
		t, err := icebergTypeOf(shape, next, 0)
		if err != nil {
			return nil, err
		}
		if _, ok := t.(*iceberg.StructType); !ok {
			return nil, fmt.Errorf("%w: the value schema has no fields", errTypedChange)
		}
		return []schemaChange{{path: []string{valueFieldsName}, add: t, doc: "the value's fields, decoded with the topic's value schema; null when the value is not framed with one of its versions"}}, nil
	}
	var out []schemaChange
	var walk func(path []string, have iceberg.Type, f *schema.Field, depth int) error
	walk = func(path []string, have iceberg.Type, f *schema.Field, depth int) error {
		if depth > maxTypedDepth {
			return fmt.Errorf("%w: nested deeper than %d levels", errTypedChange, maxTypedDepth)
		}
		name := strings.Join(path, ".")
		switch h := have.(type) {
		case *iceberg.StructType:
			if f.Kind != schema.KindStruct {
				return fmt.Errorf("%w: %s is a struct in the table, kind %d in the schema", errTypedChange, name, f.Kind)
			}
			for _, nf := range typedNames(f.Fields) {
				fp := append(path[:len(path):len(path)], nf.col)
				i := fieldIndex(h, nf.col)
				if i < 0 {
					t, err := icebergTypeOf(nf.f, next, depth+1)
					if err != nil {
						return err
					}
					out = append(out, schemaChange{path: fp, add: t, doc: nf.f.Doc})
					continue
				}
				if err := walk(fp, h.FieldList[i].Type, nf.f, depth+1); err != nil {
					return err
				}
			}
			return nil
		case *iceberg.ListType:
			if f.Kind != schema.KindList || f.Elem == nil {
				return fmt.Errorf("%w: %s is a list in the table, not in the schema", errTypedChange, name)
			}
			return walk(append(path[:len(path):len(path)], "element"), h.Element, f.Elem, depth+1)
		case *iceberg.MapType:
			if f.Kind != schema.KindMap || f.Elem == nil || !h.KeyType.Equals(iceberg.PrimitiveTypes.String) {
				return fmt.Errorf("%w: %s is a map with %s keys in the table, kind %d in the schema", errTypedChange, name, h.KeyType, f.Kind)
			}
			return walk(append(path[:len(path):len(path)], "value"), h.ValueType, f.Elem, depth+1)
		}
		want := primitiveOf(f.Kind)
		if f.Kind == schema.KindStruct && len(f.Fields) == 0 {
			want = iceberg.PrimitiveTypes.String // see icebergTypeOf
		}
		switch {
		case want == nil:
			return fmt.Errorf("%w: %s is %s in the table, kind %d in the schema", errTypedChange, name, have, f.Kind)
		case want.Equals(have):
		case have.Equals(iceberg.PrimitiveTypes.Int32) && want.Equals(iceberg.PrimitiveTypes.Int64),
			have.Equals(iceberg.PrimitiveTypes.Float32) && want.Equals(iceberg.PrimitiveTypes.Float64):
			out = append(out, schemaChange{path: path, to: want})
		case have.Equals(iceberg.PrimitiveTypes.Int64) && want.Equals(iceberg.PrimitiveTypes.Int32),
			have.Equals(iceberg.PrimitiveTypes.Float64) && want.Equals(iceberg.PrimitiveTypes.Float32):
			// Promoted already (a later version widened it); the
			// writer widens the narrower values.
		default:
			return fmt.Errorf("%w: %s is %s in the table, %s in the schema", errTypedChange, name, have, want)
		}
		return nil
	}
	if err := walk([]string{valueFieldsName}, have, shape, 0); err != nil {
		return nil, err
	}
	return out, nil
}

func fieldIndex(st *iceberg.StructType, name string) int {
	for i := range st.FieldList {
		if st.FieldList[i].Name == name {
			return i
		}
	}
	return -1
}

// parquetNodeOf is the Parquet node of an Iceberg type, with the field ids
// of its nested fields; every nested field is optional, map keys required.
func parquetNodeOf(t iceberg.Type) (parquet.Node, error) {
	switch t := t.(type) {
	case *iceberg.StructType:
		g := parquet.Group{}
		for _, f := range t.FieldList {
			n, err := parquetNodeOf(f.Type)
			if err != nil {
				return nil, err
			}
			g[f.Name] = parquet.FieldID(parquet.Optional(n), f.ID)
		}
		return g, nil
	case *iceberg.ListType:
		n, err := parquetNodeOf(t.Element)
		if err != nil {
			return nil, err
		}
		return parquet.List(parquet.FieldID(parquet.Optional(n), t.ElementID)), nil
	case *iceberg.MapType:
		n, err := parquetNodeOf(t.ValueType)
		if err != nil {
			return nil, err
		}
		return parquet.Map(parquet.FieldID(parquet.String(), t.KeyID), parquet.FieldID(parquet.Optional(n), t.ValueID)), nil
	}
	switch {
	case t.Equals(iceberg.PrimitiveTypes.Bool):
		return parquet.Leaf(parquet.BooleanType), nil
	case t.Equals(iceberg.PrimitiveTypes.Int32):
		return parquet.Int(32), nil
	case t.Equals(iceberg.PrimitiveTypes.Int64):
		return parquet.Int(64), nil
	case t.Equals(iceberg.PrimitiveTypes.Float32):
		return parquet.Leaf(parquet.FloatType), nil
	case t.Equals(iceberg.PrimitiveTypes.Float64):
		return parquet.Leaf(parquet.DoubleType), nil
	case t.Equals(iceberg.PrimitiveTypes.String):
		return parquet.String(), nil
	case t.Equals(iceberg.PrimitiveTypes.Binary):
		return parquet.Leaf(parquet.ByteArrayType), nil
	case t.Equals(iceberg.PrimitiveTypes.TimestampTz):
		return parquet.Timestamp(parquet.Microsecond), nil
	case t.Equals(iceberg.PrimitiveTypes.Date):
		return parquet.Date(), nil
	}
	return nil, fmt.Errorf("typed columns: no Parquet type for %s", t)
}

// planTyped decides the typed columns of a segment file of a topic with
// a value shape: the table's value_fields after the evolution the commit
// will make. nil (with a warning) when the table cannot take the shape:
// the segment is archived without typed columns, as the raw value is what
// matters.
func (s *Store) planTyped(meta *icemeta.Metadata, topic string, typed *schema.Typed) *typedPlan {
	if !s.cols.hasTxn() {
		return nil // a Store writing the old file layout (tests)
	}
	// A dry run of the commit's schema update, for the ids it assigns.
	_, _, f, err := s.evolveSchema(meta, typed)
	if err != nil {
		s.warnTyped(topic, "typed columns refused", err)
		return nil
	}
	plan, err := newTypedPlan(typed, f)
	if err != nil {
		s.warnTyped(topic, "typed columns refused", err)
		return nil
	}
	return plan
}
