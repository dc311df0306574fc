package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoNode is one field's value compiled for typed decoding, parallel to
// its Field.
type protoNode struct {
	f      *Field
	fd     protoreflect.FieldDescriptor // nil for the root message
	kind   protoreflect.Kind            // of the value (a map's: of its values)
	enum   protoreflect.EnumDescriptor
	fields []*protoNode // KindStruct: the message's fields
	elem   *protoNode   // KindList, KindMap: one element or value
	wkt    string       // google.protobuf.Timestamp or a wrapper: decoded specially
}

type protoCompiled struct {
	md   protoreflect.MessageDescriptor // message [0]; nil if the file has none
	root *protoNode
}

// The well-known wrappers, as the scalar column they are.
var protoWrappers = map[protoreflect.FullName]Kind{
	"google.protobuf.DoubleValue": KindFloat64,
	"google.protobuf.FloatValue":  KindFloat32,
	"google.protobuf.Int64Value":  KindInt64,
	"google.protobuf.UInt64Value": KindInt64,
	"google.protobuf.Int32Value":  KindInt32,
	"google.protobuf.UInt32Value": KindInt64,
	"google.protobuf.BoolValue":   KindBool,
	"google.protobuf.StringValue": KindString,
	"google.protobuf.BytesValue":  KindBinary,
}

const protoTimestamp = "google.protobuf.Timestamp"

func (s *protoSchema) compiled() *protoCompiled {
	s.once.Do(func() {
		s.comp = &protoCompiled{}
		if s.file == nil || s.file.Messages().Len() == 0 {
			return
		}
		s.comp.md = s.file.Messages().Get(0)
		s.comp.root = compileProtoMessage(s.comp.md, string(s.comp.md.Name()), "", map[protoreflect.FullName]bool{}, 0)
	})
	return s.comp
}

func protoDoc(d protoreflect.Descriptor) string {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	return strings.TrimSpace(loc.LeadingComments)
}

func compileProtoMessage(md protoreflect.MessageDescriptor, name, doc string, visiting map[protoreflect.FullName]bool, depth int) *protoNode {
	n := &protoNode{kind: protoreflect.MessageKind, f: &Field{Name: name, Doc: doc}}
	fn := md.FullName()
	switch {
	case fn == protoTimestamp:
		n.f.Kind, n.wkt = KindTimestamp, protoTimestamp
		return n
	case protoWrappers[fn] != 0:
		n.f.Kind, n.wkt = protoWrappers[fn], string(fn)
		n.elem = compileProtoField(md.Fields().ByNumber(1), visiting, depth+1)
		return n
	case strings.HasPrefix(string(fn), "google.protobuf.") && (fn.Name() == "Struct" || fn.Name() == "Value" || fn.Name() == "ListValue" || fn.Name() == "Any"):
		n.f.Kind = KindJSON // free-form: protojson says it best
		return n
	case visiting[fn] || depth > maxShapeDepth:
		n.f.Kind = KindJSON
		return n
	}
	visiting[fn] = true
	defer delete(visiting, fn)
	n.f.Kind = KindStruct
	fds := md.Fields()
	for i := range fds.Len() {
		c := compileProtoField(fds.Get(i), visiting, depth+1)
		n.fields = append(n.fields, c)
		n.f.Fields = append(n.f.Fields, c.f)
	}
	return n
}

func compileProtoField(fd protoreflect.FieldDescriptor, visiting map[protoreflect.FullName]bool, depth int) *protoNode {
	name, doc := string(fd.Name()), protoDoc(fd)
	var n *protoNode
	switch {
	case fd.IsMap():
		n = &protoNode{f: &Field{Name: name, Doc: doc, Kind: KindMap}}
		n.elem = compileProtoValue(fd.MapValue(), "value", "", visiting, depth+1)
		n.f.Elem = n.elem.f
	case fd.IsList():
		n = &protoNode{f: &Field{Name: name, Doc: doc, Kind: KindList}}
		n.elem = compileProtoValue(fd, "element", "", visiting, depth+1)
		n.f.Elem = n.elem.f
	default:
		n = compileProtoValue(fd, name, doc, visiting, depth)
	}
	n.fd = fd
	return n
}

// compileProtoValue compiles one value of fd's kind (an element, for a
// repeated field).
func compileProtoValue(fd protoreflect.FieldDescriptor, name, doc string, visiting map[protoreflect.FullName]bool, depth int) *protoNode {
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		n := compileProtoMessage(fd.Message(), name, doc, visiting, depth)
		n.fd = fd
		return n
	}
	n := &protoNode{fd: fd, kind: fd.Kind(), enum: fd.Enum(), f: &Field{Name: name, Doc: doc}}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		n.f.Kind = KindBool
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n.f.Kind = KindInt32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
		// Iceberg has no unsigned types: a uint64 above the largest
		// int64 decodes to null (never to a wrong, negative number).
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n.f.Kind = KindInt64
	case protoreflect.FloatKind:
		n.f.Kind = KindFloat32
	case protoreflect.DoubleKind:
		n.f.Kind = KindFloat64
	case protoreflect.StringKind, protoreflect.EnumKind:
		n.f.Kind = KindString
	case protoreflect.BytesKind:
		n.f.Kind = KindBinary
	default:
		n.f.Kind = KindJSON
	}
	return n
}

// Shape is message [0]'s columns; nil when the file declares no message.
// The tree is shared: callers must not modify it.
func (s *protoSchema) Shape() *Field {
	if c := s.compiled(); c.root != nil {
		return c.root.f
	}
	return nil
}

// maxMessageIndexes bounds the message-index list of a payload (a
// message nested that deep is no real schema).
const maxMessageIndexes = 64

// messageIndexes reads Confluent's message-index list off a Protobuf
// payload: a zigzag varint count, then that many zigzag varints; a count
// of 0 means [0].
func messageIndexes(p []byte) ([]int, []byte, error) {
	n, w := binary.Varint(p)
	if w <= 0 {
		return nil, nil, errors.New("protobuf: truncated message-index count")
	}
	p = p[w:]
	if n == 0 {
		return []int{0}, p, nil
	}
	if n < 0 || n > maxMessageIndexes || n > int64(len(p)) {
		return nil, nil, fmt.Errorf("protobuf: message-index count %d (at most %d)", n, maxMessageIndexes)
	}
	idx := make([]int, n)
	for i := range idx {
		v, w := binary.Varint(p)
		if w <= 0 || v < 0 || v > math.MaxInt32 {
			return nil, nil, fmt.Errorf("protobuf: bad message index %d", i)
		}
		idx[i], p = int(v), p[w:]
	}
	return idx, p, nil
}

// message finds the message a payload's indexes name and unmarshals it.
func (s *protoSchema) message(payload []byte) (protoreflect.Message, []int, error) {
	if len(payload) > maxDecodeBytes {
		return nil, nil, fmt.Errorf("protobuf: %w", errTooLarge)
	}
	idx, body, err := messageIndexes(payload)
	if err != nil {
		return nil, nil, err
	}
	if s.file == nil {
		return nil, nil, errors.New("protobuf: no schema file")
	}
	msgs := s.file.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range idx {
		if i >= msgs.Len() {
			return nil, nil, fmt.Errorf("protobuf: message index %v names no message (level %d has %d)", idx, depth, msgs.Len())
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: maxValueDepth}).Unmarshal(body, m); err != nil {
		return nil, nil, fmt.Errorf("protobuf: decode %s: %w", md.FullName(), err)
	}
	return m, idx, nil
}

// Decode decodes a payload of message [0] into the types of Shape.
// Fields without presence (proto3 scalars) decode to their value, zero
// when absent; fields with presence and messages decode to nil when
// absent.
func (s *protoSchema) Decode(payload []byte) (any, error) {
	c := s.compiled()
	if c.root == nil {
		return nil, errors.New("protobuf: the schema declares no message")
	}
	m, idx, err := s.message(payload)
	if err != nil {
		return nil, err
	}
	if len(idx) != 1 || idx[0] != 0 {
		return nil, fmt.Errorf("protobuf: a value of message %v, typed columns are of message [0]", idx)
	}
	return protoStruct(m, c.root), nil
}

// JSON renders a payload of any of the file's messages with protojson
// (field names in lowerCamelCase, unset fields left out).
func (s *protoSchema) JSON(payload []byte) ([]byte, error) {
	m, _, err := s.message(payload)
	if err != nil {
		return nil, err
	}
	b, err := protojson.MarshalOptions{}.Marshal(m.Interface())
	if err != nil {
		return nil, fmt.Errorf("protobuf: render JSON: %w", err)
	}
	return b, nil
}

func protoStruct(m protoreflect.Message, n *protoNode) map[string]any {
	out := make(map[string]any, len(n.fields))
	for _, c := range n.fields {
		fd := c.fd
		switch {
		case fd.IsList():
			l := m.Get(fd).List()
			vs := make([]any, l.Len())
			for i := range vs {
				vs[i] = protoValue(l.Get(i), c.elem)
			}
			out[c.f.Name] = vs
		case fd.IsMap():
			mp := m.Get(fd).Map()
			vs := make(map[string]any, mp.Len())
			mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				vs[k.String()] = protoValue(v, c.elem)
				return true
			})
			out[c.f.Name] = vs
		case fd.HasPresence() && !m.Has(fd):
			out[c.f.Name] = nil
		default:
			out[c.f.Name] = protoValue(m.Get(fd), c)
		}
	}
	return out
}

// protoValue converts one value (not a list or map) to n's kind.
func protoValue(v protoreflect.Value, n *protoNode) any {
	if n.kind == protoreflect.MessageKind || n.kind == protoreflect.GroupKind {
		m := v.Message()
		switch {
		case n.wkt == protoTimestamp:
			fs := m.Descriptor().Fields()
			sec, nanos := m.Get(fs.ByNumber(1)).Int(), m.Get(fs.ByNumber(2)).Int()
			if sec > math.MaxInt64/1_000_000-1 || sec < math.MinInt64/1_000_000+1 {
				return nil
			}
			return sec*1_000_000 + nanos/1_000
		case n.wkt != "":
			return protoValue(m.Get(m.Descriptor().Fields().ByNumber(1)), n.elem)
		case n.f.Kind == KindJSON:
			b, err := protojson.Marshal(m.Interface())
			if err != nil {
				return nil
			}
			return string(b)
		}
		return protoStruct(m, n)
	}
	switch n.kind {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return int32(v.Int())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if u := v.Uint(); u <= math.MaxInt64 {
			return int64(u)
		}
		return nil
	case protoreflect.FloatKind:
		return float32(v.Float())
	case protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return append([]byte{}, v.Bytes()...)
	case protoreflect.EnumKind:
		if ev := n.enum.Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum())) // an open enum's unknown number
	}
	return nil
}
