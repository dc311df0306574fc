package cold

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/korvet/korvet/cold/iceberg"
	"github.com/korvet/korvet/engine/schema"
)

// typedPlan is how one segment file gets its typed columns.
type typedPlan struct {
	typed  *schema.Typed
	field  iceberg.NestedField // value_fields, with the table's ids
	schema *parquet.Schema     // segmentSchema plus value_fields
	cols   fileColumns
	writer *typedWriter
}

func newTypedPlan(typed *schema.Typed, field iceberg.NestedField) (*typedPlan, error) {
	n, err := parquetNodeOf(field.Type)
	if err != nil {
		return nil, err
	}
	sc := segmentSchemaWith(parquet.FieldID(parquet.Optional(n), field.ID))
	cols, err := columnsOf(sc)
	if err != nil {
		return nil, fmt.Errorf("typed columns: %w", err)
	}
	p := &typedPlan{typed: typed, field: field, schema: sc, cols: cols}
	if p.writer, err = newTypedWriter(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Node kinds of the shredding tree.
const (
	tnStruct = iota
	tnList
	tnMap
	tnLeaf
)

// tnode is one node of value_fields, compiled for shredding a decoded
// value into leaf columns (Dremel): def is the definition level of a
// present (non-null) value of the node, rep the repetition level of the
// innermost list or map at or above it.
type tnode struct {
	kind     int
	key      string // the shape's field name: key into the decoded map
	absent   bool   // a table field the shape lacks: always null
	def, rep int
	children []*tnode // struct fields
	elem     *tnode   // list element, map value
	keyLeaf  int      // map: leaf ordinal of the key column
	typ      iceberg.Type
	leaf     int   // leaf: ordinal among the typed leaves (column order)
	col      int   // leaf: column index in the file
	leaves   []int // ordinals of the leaves under the node, for nulls
	keys     []string
}

// typedWriter shreds decoded values into the typed leaf columns; values
// of each leaf collect in their own buffer (a list of structs visits its
// leaves interleaved) and are appended in column order.
type typedWriter struct {
	decode func([]byte) (any, bool)
	root   *tnode
	cols   []int // leaf ordinal -> column index
	bufs   [][]parquet.Value
	rows   int64 // rows with typed values
}

func newTypedWriter(p *typedPlan) (*typedWriter, error) {
	w := &typedWriter{decode: p.typed.Decode}
	index := map[string]int{}
	first := -1
	for i, path := range p.schema.Columns() {
		if path[0] == valueFieldsName {
			index[strings.Join(path, ".")] = i
			if first < 0 {
				first = i
			}
		}
	}
	w.cols = make([]int, len(index))
	root, err := w.compile(p.field.Type, p.typed.Shape, []string{valueFieldsName}, 0, 0, index, first)
	if err != nil {
		return nil, err
	}
	if len(w.cols) != len(index) {
		return nil, fmt.Errorf("typed columns: %d leaves for %d columns", len(w.cols), len(index))
	}
	w.root = root
	w.bufs = make([][]parquet.Value, len(w.cols))
	return w, nil
}

// compile builds the node of type t (f: the shape's field for it, nil
// when the shape lacks it) at Parquet path, under a parent whose present
// values have definition level def.
func (w *typedWriter) compile(t iceberg.Type, f *schema.Field, path []string, def, rep int, index map[string]int, first int) (*tnode, error) {
	n := &tnode{def: def + 1, rep: rep, absent: f == nil, typ: t}
	sub := func(name ...string) []string { return append(path[:len(path):len(path)], name...) }
	leafAt := func(p []string) (int, error) {
		col, ok := index[strings.Join(p, ".")]
		if !ok {
			return 0, fmt.Errorf("typed columns: no column %s", strings.Join(p, "."))
		}
		ord := col - first
		if ord < 0 || ord >= len(w.cols) {
			return 0, fmt.Errorf("typed columns: column %s out of place", strings.Join(p, "."))
		}
		w.cols[ord] = col
		return ord, nil
	}
	switch t := t.(type) {
	case *iceberg.StructType:
		n.kind = tnStruct
		byCol := map[string]*schema.Field{}
		if f != nil && f.Kind == schema.KindStruct {
			for _, nf := range typedNames(f.Fields) {
				byCol[nf.col] = nf.f
			}
		}
		for _, tf := range t.FieldList {
			c, err := w.compile(tf.Type, byCol[tf.Name], sub(tf.Name), n.def, rep, index, first)
			if err != nil {
				return nil, err
			}
			if c.absent {
				c.key = ""
			} else {
				c.key = byCol[tf.Name].Name
			}
			n.children = append(n.children, c)
			n.leaves = append(n.leaves, c.leaves...)
		}
	case *iceberg.ListType:
		n.kind = tnList
		var ef *schema.Field
		if f != nil && f.Kind == schema.KindList {
			ef = f.Elem
		}
		// def+1: the repeated group; the element's own level is one more.
		e, err := w.compile(t.Element, ef, sub("list", "element"), n.def+1, rep+1, index, first)
		if err != nil {
			return nil, err
		}
		n.elem, n.leaves = e, e.leaves
	case *iceberg.MapType:
		n.kind = tnMap
		var vf *schema.Field
		if f != nil && f.Kind == schema.KindMap {
			vf = f.Elem
		}
		k, err := leafAt(sub("key_value", "key"))
		if err != nil {
			return nil, err
		}
		v, err := w.compile(t.ValueType, vf, sub("key_value", "value"), n.def+1, rep+1, index, first)
		if err != nil {
			return nil, err
		}
		n.keyLeaf, n.elem = k, v
		n.leaves = append([]int{k}, v.leaves...)
	default:
		n.kind = tnLeaf
		ord, err := leafAt(path)
		if err != nil {
			return nil, err
		}
		n.leaf, n.col, n.leaves = ord, w.cols[ord], []int{ord}
	}
	if f != nil && n.kind != tnLeaf && f.Kind == schema.KindStruct && len(f.Fields) == 0 {
		n.absent = true
	}
	return n, nil
}

// appendRow appends the typed columns of one record value to cols, the
// values of each column of the file (by column index).
func (w *typedWriter) appendRow(cols [][]parquet.Value, value []byte) {
	var v any
	if value != nil {
		if d, ok := w.decode(value); ok {
			v = d
		}
	}
	if v != nil {
		w.rows++
	}
	w.put(w.root, v, 0, 0)
	for i, b := range w.bufs {
		cols[w.cols[i]] = append(cols[w.cols[i]], b...)
		w.bufs[i] = b[:0]
	}
}

// nulls marks a null (or empty list or map) at definition level def for
// every leaf under n.
func (w *typedWriter) nulls(n *tnode, rep, def int) {
	for _, l := range n.leaves {
		w.bufs[l] = append(w.bufs[l], parquet.NullValue().Level(rep, def, w.cols[l]))
	}
}

// put shreds v, the value of node n, whose parent is present at
// definition level def; rep is the repetition level of its first value.
// A value of another Go type than the shape says is null.
func (w *typedWriter) put(n *tnode, v any, rep, def int) {
	if v == nil || n.absent {
		w.nulls(n, rep, def)
		return
	}
	switch n.kind {
	case tnStruct:
		m, ok := v.(map[string]any)
		if !ok {
			w.nulls(n, rep, def)
			return
		}
		for _, c := range n.children {
			var cv any
			if !c.absent {
				cv = m[c.key]
			}
			w.put(c, cv, rep, n.def)
		}
	case tnList:
		xs, ok := v.([]any)
		if !ok {
			w.nulls(n, rep, def)
			return
		}
		if len(xs) == 0 {
			w.nulls(n, rep, n.def)
			return
		}
		for i, x := range xs {
			r := rep
			if i > 0 {
				r = n.elem.rep
			}
			w.put(n.elem, x, r, n.def+1)
		}
	case tnMap:
		m, ok := v.(map[string]any)
		if !ok {
			w.nulls(n, rep, def)
			return
		}
		if len(m) == 0 {
			w.nulls(n, rep, n.def)
			return
		}
		// Sorted keys make the file a function of the records. n.keys is
		// safe to reuse: n never contains itself.
		n.keys = n.keys[:0]
		for k := range m {
			n.keys = append(n.keys, k)
		}
		slices.Sort(n.keys)
		for i, k := range n.keys {
			r := rep
			if i > 0 {
				r = n.elem.rep
			}
			w.bufs[n.keyLeaf] = append(w.bufs[n.keyLeaf], parquet.ByteArrayValue(stringBytes(k)).Level(r, n.def+1, w.cols[n.keyLeaf]))
			w.put(n.elem, m[k], r, n.def+1)
		}
	default:
		pv, ok := leafValue(n.typ, v)
		if !ok {
			w.nulls(n, rep, def)
			return
		}
		w.bufs[n.leaf] = append(w.bufs[n.leaf], pv.Level(rep, n.def, n.col))
	}
}

// leafValue converts a decoded value to its column's type, widening int32
// and float32 for promoted columns.
func leafValue(t iceberg.Type, v any) (parquet.Value, bool) {
	switch t.(type) {
	case iceberg.BooleanType:
		if b, ok := v.(bool); ok {
			return parquet.BooleanValue(b), true
		}
	case iceberg.Int32Type, iceberg.DateType:
		if i, ok := v.(int32); ok {
			return parquet.Int32Value(i), true
		}
	case iceberg.Int64Type, iceberg.TimestampTzType:
		switch i := v.(type) {
		case int64:
			return parquet.Int64Value(i), true
		case int32:
			return parquet.Int64Value(int64(i)), true
		}
	case iceberg.Float32Type:
		if f, ok := v.(float32); ok {
			return parquet.FloatValue(f), true
		}
	case iceberg.Float64Type:
		switch f := v.(type) {
		case float64:
			return parquet.DoubleValue(f), true
		case float32:
			return parquet.DoubleValue(float64(f)), true
		}
	case iceberg.StringType:
		if s, ok := v.(string); ok {
			return parquet.ByteArrayValue(stringBytes(s)), true
		}
	case iceberg.BinaryType:
		if b, ok := v.([]byte); ok {
			return parquet.ByteArrayValue(b), true
		}
	}
	return parquet.Value{}, false
}

// stringBytes is s's bytes without a copy: the writer only reads them
// (into its page buffers) and the string keeps them alive meanwhile.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
