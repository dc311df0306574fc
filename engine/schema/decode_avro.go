package schema

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/hamba/avro/v2"
)

// Avro values are decoded by walking the schema hamba/avro parsed with a
// small binary reader of our own rather than hamba's generic decoder: it
// decodes straight into the Go types Shape promises (no second pass over
// map[string]any), and it bounds every length and count by the bytes
// left in the payload before allocating, and the elements of all arrays
// and maps by the payload's size (an array of nulls costs no bytes, so a
// count alone would let a few bytes spin for hours).

// avroNode is one schema node compiled for typed decoding, parallel to
// its Field; a KindJSON node decodes to its natural JSON text.
type avroNode struct {
	f      *Field
	s      avro.Schema // the Ref resolved
	typ    avro.Type
	logic  avro.LogicalType
	scale  int
	fields []*avroNode // record, in schema order
	elem   *avroNode   // array items, map values, the non-null branch of a nullable union
	null   int         // nullable union: the null branch's index
	syms   []string    // enum
}

// avroCompiled is the Shape and decoder of an Avro schema, built once.
type avroCompiled struct {
	root *avroNode // nil: not a record
}

func (s *avroSchema) compiled() *avroCompiled {
	s.once.Do(func() {
		s.comp = &avroCompiled{}
		if root := resolveAvro(s.s); root != nil && root.Type() == avro.Record {
			s.comp.root = compileAvro(root, root.(*avro.RecordSchema).Name(), root.(*avro.RecordSchema).Doc(), map[string]bool{}, 0)
		}
	})
	return s.comp
}

func resolveAvro(s avro.Schema) avro.Schema {
	for i := 0; s != nil && i < 8; i++ {
		r, ok := s.(*avro.RefSchema)
		if !ok {
			return s
		}
		s = r.Schema()
	}
	return s
}

func avroLogical(s avro.Schema) (avro.LogicalType, int) {
	var ls avro.LogicalSchema
	switch t := s.(type) {
	case *avro.PrimitiveSchema:
		ls = t.Logical()
	case *avro.FixedSchema:
		ls = t.Logical()
	}
	if ls == nil {
		return "", 0
	}
	if d, ok := ls.(*avro.DecimalLogicalSchema); ok {
		return avro.Decimal, d.Scale()
	}
	return ls.Type(), 0
}

// compileAvro builds the node and Field of s. visiting holds the named
// records on the path from the root: meeting one again is recursion,
// which becomes KindJSON below its first level.
func compileAvro(s avro.Schema, name, doc string, visiting map[string]bool, depth int) *avroNode {
	s = resolveAvro(s)
	n := &avroNode{s: s, typ: s.Type()}
	n.logic, n.scale = avroLogical(s)
	n.f = &Field{Name: name, Doc: doc}
	if depth > maxShapeDepth {
		n.f.Kind = KindJSON
		return n
	}
	switch t := s.(type) {
	case *avro.RecordSchema:
		if visiting[t.FullName()] {
			n.f.Kind = KindJSON
			return n
		}
		visiting[t.FullName()] = true
		defer delete(visiting, t.FullName())
		n.f.Kind = KindStruct
		for _, fd := range t.Fields() {
			c := compileAvro(fd.Type(), fd.Name(), fd.Doc(), visiting, depth+1)
			n.fields = append(n.fields, c)
			n.f.Fields = append(n.f.Fields, c.f)
		}
	case *avro.ArraySchema:
		n.f.Kind = KindList
		n.elem = compileAvro(t.Items(), "element", "", visiting, depth+1)
		n.f.Elem = n.elem.f
	case *avro.MapSchema:
		n.f.Kind = KindMap
		n.elem = compileAvro(t.Values(), "value", "", visiting, depth+1)
		n.f.Elem = n.elem.f
	case *avro.UnionSchema:
		types := t.Types()
		other := -1
		n.null = -1
		for i, b := range types {
			if b.Type() == avro.Null && n.null < 0 {
				n.null = i
			} else if other < 0 {
				other = i
			} else {
				other = -2
			}
		}
		if other < 0 || len(types) > 2 {
			n.f.Kind = KindJSON // several types, or only null
			return n
		}
		n.elem = compileAvro(types[other], name, doc, visiting, depth)
		n.f = n.elem.f
	case *avro.EnumSchema:
		n.f.Kind = KindString
		n.syms = t.Symbols()
	case *avro.FixedSchema:
		n.f.Kind = KindBinary
		if n.logic == avro.Decimal {
			n.f.Kind = KindString
		}
	default:
		n.f.Kind = avroScalarKind(n.typ, n.logic)
	}
	return n
}

func avroScalarKind(t avro.Type, l avro.LogicalType) Kind {
	switch t {
	case avro.Boolean:
		return KindBool
	case avro.Int:
		if l == avro.Date {
			return KindDate
		}
		return KindInt32 // time-millis too
	case avro.Long:
		switch l {
		case avro.TimestampMillis, avro.TimestampMicros, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
			return KindTimestamp
		}
		return KindInt64 // time-micros too
	case avro.Float:
		return KindFloat32
	case avro.Double:
		return KindFloat64
	case avro.String:
		return KindString // uuid too
	case avro.Bytes:
		// A decimal is its exact decimal text: its precision may pass
		// what an Iceberg decimal column holds (38 digits), and a float
		// would round it.
		if l == avro.Decimal {
			return KindString
		}
		return KindBinary
	}
	return KindJSON // null
}

// Shape returns the record's columns; nil for a non-record schema. The
// tree is shared: callers must not modify it.
func (s *avroSchema) Shape() *Field {
	if c := s.compiled(); c.root != nil {
		return c.root.f
	}
	return nil
}

// Decode decodes an Avro binary payload into the types of Shape.
func (s *avroSchema) Decode(payload []byte) (any, error) {
	c := s.compiled()
	if c.root == nil {
		return nil, errors.New("avro: the schema is not a record: no typed value")
	}
	d := newAvroReader(payload)
	if d.err != nil {
		return nil, d.err
	}
	v := d.typed(c.root, 0)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return v, nil
}

// JSON renders an Avro binary payload as natural JSON: unions unwrapped
// to their value, record fields in schema order, logical types as their
// underlying number (decimals as their exact decimal text), bytes and
// fixed as standard base64 strings (as protojson renders bytes, so that
// every format reads alike; Avro's own JSON encoding maps bytes to code
// points, which few tools decode), NaN and infinities as strings.
func (s *avroSchema) JSON(payload []byte) ([]byte, error) {
	d := newAvroReader(payload)
	if d.err != nil {
		return nil, d.err
	}
	out := d.appendJSON(make([]byte, 0, 2*len(payload)+16), s.s, 0)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// avroReader reads Avro's binary encoding from a payload; the first
// error sticks and every later read returns zero values.
type avroReader struct {
	b   []byte
	i   int
	err error
	// items counts array and map elements left to decode in the whole
	// value: the payload's bytes (every element of non-zero width takes
	// one at least) plus a little for zero-width elements.
	items int64
}

func newAvroReader(p []byte) *avroReader {
	d := &avroReader{b: p, items: int64(len(p)) + 1<<16}
	if len(p) > maxDecodeBytes {
		d.err = fmt.Errorf("avro: %w", errTooLarge)
	}
	return d
}

func (d *avroReader) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("avro: "+format+" (at byte %d)", append(a, d.i)...)
	}
}

func (d *avroReader) finish() error {
	if d.err == nil && d.i != len(d.b) {
		d.fail("%d bytes after the value", len(d.b)-d.i)
	}
	return d.err
}

func (d *avroReader) long() int64 {
	if d.err != nil {
		return 0
	}
	u, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.fail("truncated or overlong varint")
		return 0
	}
	d.i += n
	return int64(u>>1) ^ -int64(u&1)
}

func (d *avroReader) int() int32 {
	v := d.long()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int %d out of range", v)
		return 0
	}
	return int32(v)
}

func (d *avroReader) take(n int64) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(d.b)-d.i) {
		d.fail("length %d with %d bytes left", n, len(d.b)-d.i)
		return nil
	}
	p := d.b[d.i : d.i+int(n)]
	d.i += int(n)
	return p
}

func (d *avroReader) bytes() []byte { return d.take(d.long()) }

func (d *avroReader) bool() bool {
	p := d.take(1)
	if p == nil {
		return false
	}
	if p[0] > 1 {
		d.fail("boolean byte %d", p[0])
	}
	return p[0] == 1
}

func (d *avroReader) float() float32 {
	if p := d.take(4); p != nil {
		return math.Float32frombits(binary.LittleEndian.Uint32(p))
	}
	return 0
}

func (d *avroReader) double() float64 {
	if p := d.take(8); p != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(p))
	}
	return 0
}

// block reads an array or map block header: its element count, 0 at the
// end.
func (d *avroReader) block() int64 {
	n := d.long()
	if n < 0 {
		if n == math.MinInt64 {
			d.fail("bad block count")
			return 0
		}
		n = -n
		if size := d.long(); size < 0 {
			d.fail("negative block size %d", size)
		}
	}
	if d.err != nil {
		return 0
	}
	if d.items -= n; d.items < 0 {
		d.fail("more array or map elements than the payload can hold")
		return 0
	}
	return n
}

func (d *avroReader) fixedSize(s avro.Schema) int64 {
	return int64(s.(*avro.FixedSchema).Size())
}

// typed decodes one value of n into the Go type of n.f.Kind.
func (d *avroReader) typed(n *avroNode, depth int) any {
	if d.err != nil {
		return nil
	}
	if depth > maxValueDepth {
		d.fail("value nested deeper than %d levels", maxValueDepth)
		return nil
	}
	if n.f.Kind == KindJSON {
		return string(d.appendJSON(nil, n.s, depth))
	}
	switch n.typ {
	case avro.Union:
		i := d.long()
		switch {
		case d.err != nil:
			return nil
		case i == int64(n.null):
			return nil
		case i < 0 || i >= int64(len(n.s.(*avro.UnionSchema).Types())):
			d.fail("union branch %d of %d", i, len(n.s.(*avro.UnionSchema).Types()))
			return nil
		}
		return d.typed(n.elem, depth+1)
	case avro.Record:
		m := make(map[string]any, len(n.fields))
		for _, c := range n.fields {
			m[c.f.Name] = d.typed(c, depth+1)
		}
		return m
	case avro.Array:
		l := []any{}
		for c := d.block(); c > 0; c = d.block() {
			for ; c > 0 && d.err == nil; c-- {
				l = append(l, d.typed(n.elem, depth+1))
			}
		}
		return l
	case avro.Map:
		m := map[string]any{}
		for c := d.block(); c > 0; c = d.block() {
			for ; c > 0 && d.err == nil; c-- {
				k := string(d.bytes())
				m[k] = d.typed(n.elem, depth+1)
			}
		}
		return m
	case avro.Enum:
		i := d.int()
		if d.err == nil && (i < 0 || int(i) >= len(n.syms)) {
			d.fail("enum symbol %d of %d", i, len(n.syms))
		}
		if d.err != nil {
			return nil
		}
		return n.syms[i]
	case avro.Fixed:
		p := d.take(d.fixedSize(n.s))
		if n.logic == avro.Decimal {
			return d.decimal(p, n.scale)
		}
		return nilOr(d, append([]byte{}, p...))
	case avro.Boolean:
		return nilOr(d, d.bool())
	case avro.Int:
		return nilOr(d, d.int())
	case avro.Long:
		v := d.long()
		if n.logic == avro.TimestampMillis || n.logic == avro.LocalTimestampMillis {
			if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
				d.fail("timestamp-millis %d out of range", v)
			}
			v *= 1000
		}
		return nilOr(d, v)
	case avro.Float:
		return nilOr(d, d.float())
	case avro.Double:
		return nilOr(d, d.double())
	case avro.String:
		return nilOr(d, string(d.bytes()))
	case avro.Bytes:
		p := d.bytes()
		if n.logic == avro.Decimal {
			return d.decimal(p, n.scale)
		}
		return nilOr(d, append([]byte{}, p...))
	}
	d.fail("unexpected %s", n.typ)
	return nil
}

// nilOr is v, or nil when decoding failed.
func nilOr[T any](d *avroReader, v T) any {
	if d.err != nil {
		return nil
	}
	return v
}

// maxDecimalBytes bounds a decimal's two's complement bytes (a 16 MiB
// one would take seconds to print); 64 bytes hold 150 digits.
const maxDecimalBytes = 64

// decimal renders a decimal's unscaled big-endian two's complement bytes
// with scale as exact decimal text.
func (d *avroReader) decimal(p []byte, scale int) any {
	if d.err != nil {
		return nil
	}
	if len(p) > maxDecimalBytes {
		d.fail("decimal of %d bytes, at most %d", len(p), maxDecimalBytes)
		return nil
	}
	return decimalText(p, scale)
}

func decimalText(p []byte, scale int) string {
	v := new(big.Int).SetBytes(p)
	if len(p) > 0 && p[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(p))))
	}
	neg := v.Sign() < 0
	digits := v.Abs(v).String()
	if scale > 0 {
		if len(digits) <= scale {
			digits = string(make0s(scale-len(digits)+1)) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

func make0s(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return b
}

// appendJSON appends the natural JSON of one value of s.
func (d *avroReader) appendJSON(dst []byte, s avro.Schema, depth int) []byte {
	if d.err != nil {
		return dst
	}
	if depth > maxValueDepth {
		d.fail("value nested deeper than %d levels", maxValueDepth)
		return dst
	}
	s = resolveAvro(s)
	logic, scale := avroLogical(s)
	switch t := s.(type) {
	case *avro.RecordSchema:
		dst = append(dst, '{')
		for i, f := range t.Fields() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, f.Name())
			dst = append(dst, ':')
			dst = d.appendJSON(dst, f.Type(), depth+1)
		}
		return append(dst, '}')
	case *avro.UnionSchema:
		i := d.long()
		types := t.Types()
		if d.err == nil && (i < 0 || i >= int64(len(types))) {
			d.fail("union branch %d of %d", i, len(types))
		}
		if d.err != nil {
			return dst
		}
		return d.appendJSON(dst, types[i], depth+1)
	case *avro.ArraySchema:
		dst = append(dst, '[')
		first := true
		for c := d.block(); c > 0; c = d.block() {
			for ; c > 0 && d.err == nil; c-- {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = d.appendJSON(dst, t.Items(), depth+1)
			}
		}
		return append(dst, ']')
	case *avro.MapSchema:
		dst = append(dst, '{')
		first := true
		for c := d.block(); c > 0; c = d.block() {
			for ; c > 0 && d.err == nil; c-- {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = appendJSONString(dst, string(d.bytes()))
				dst = append(dst, ':')
				dst = d.appendJSON(dst, t.Values(), depth+1)
			}
		}
		return append(dst, '}')
	case *avro.EnumSchema:
		i := d.int()
		if d.err == nil && (i < 0 || int(i) >= len(t.Symbols())) {
			d.fail("enum symbol %d of %d", i, len(t.Symbols()))
		}
		if d.err != nil {
			return dst
		}
		return appendJSONString(dst, t.Symbols()[i])
	case *avro.FixedSchema:
		return d.appendBytesJSON(dst, d.take(int64(t.Size())), logic, scale)
	}
	switch s.Type() {
	case avro.Null:
		return append(dst, "null"...)
	case avro.Boolean:
		if d.bool() {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case avro.Int:
		return fmt.Appendf(dst, "%d", d.int())
	case avro.Long:
		return fmt.Appendf(dst, "%d", d.long())
	case avro.Float:
		return appendJSONFloat(dst, float64(d.float()), 32)
	case avro.Double:
		return appendJSONFloat(dst, d.double(), 64)
	case avro.String:
		return appendJSONString(dst, string(d.bytes()))
	case avro.Bytes:
		return d.appendBytesJSON(dst, d.bytes(), logic, scale)
	}
	d.fail("unexpected %s", s.Type())
	return dst
}

func (d *avroReader) appendBytesJSON(dst, p []byte, logic avro.LogicalType, scale int) []byte {
	if d.err != nil {
		return dst
	}
	if logic == avro.Decimal {
		if v, ok := d.decimal(p, scale).(string); ok {
			return appendJSONString(dst, v)
		}
		return dst
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, p)
	return append(dst, '"')
}
