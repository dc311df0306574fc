// Package iceberg is the part of Apache Iceberg's table model that korvet
// writes and reads itself: schemas and their JSON form, partition specs,
// name mappings, and the manifests and manifest lists (Avro object
// container files) of a snapshot, as the Iceberg table spec (format
// version 2) defines them.
//
// Why not iceberg-go: its root package, the one these types come from,
// links part of arrow-go, goccy/go-json, a second Avro library and their
// tables, about 3 MB of machine code and 6 MB of korvet's stripped binary
// for the few hundred lines of spec-defined encoding korvet needs (issue
// 20, footprint). The names follow iceberg-go's, so that code reads the
// same, and the tests keep iceberg-go to prove that its own reader and
// scan read what this package writes, and that this package reads what
// iceberg-go wrote for earlier korvet versions.
package iceberg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Type is an Iceberg type: a primitive, *StructType, *ListType or *MapType.
type Type interface {
	// String is the type as in Iceberg's JSON, e.g. "long", or
	// "list<int>" for nested types.
	String() string
	Equals(Type) bool
}

// The primitive types korvet writes. Other primitives in a table written
// by someone else (decimal(P,S), fixed[L], timestamp_ns, ...) read as
// OtherType and are written back unchanged.
type (
	BooleanType     struct{}
	Int32Type       struct{}
	Int64Type       struct{}
	Float32Type     struct{}
	Float64Type     struct{}
	DateType        struct{}
	TimeType        struct{}
	TimestampType   struct{}
	TimestampTzType struct{}
	StringType      struct{}
	UUIDType        struct{}
	BinaryType      struct{}
	// OtherType is a primitive this package does not model, by its name.
	OtherType struct{ Name string }
)

func (BooleanType) String() string     { return "boolean" }
func (Int32Type) String() string       { return "int" }
func (Int64Type) String() string       { return "long" }
func (Float32Type) String() string     { return "float" }
func (Float64Type) String() string     { return "double" }
func (DateType) String() string        { return "date" }
func (TimeType) String() string        { return "time" }
func (TimestampType) String() string   { return "timestamp" }
func (TimestampTzType) String() string { return "timestamptz" }
func (StringType) String() string      { return "string" }
func (UUIDType) String() string        { return "uuid" }
func (BinaryType) String() string      { return "binary" }
func (t OtherType) String() string     { return t.Name }

func (t BooleanType) Equals(o Type) bool     { return samePrimitive(t, o) }
func (t Int32Type) Equals(o Type) bool       { return samePrimitive(t, o) }
func (t Int64Type) Equals(o Type) bool       { return samePrimitive(t, o) }
func (t Float32Type) Equals(o Type) bool     { return samePrimitive(t, o) }
func (t Float64Type) Equals(o Type) bool     { return samePrimitive(t, o) }
func (t DateType) Equals(o Type) bool        { return samePrimitive(t, o) }
func (t TimeType) Equals(o Type) bool        { return samePrimitive(t, o) }
func (t TimestampType) Equals(o Type) bool   { return samePrimitive(t, o) }
func (t TimestampTzType) Equals(o Type) bool { return samePrimitive(t, o) }
func (t StringType) Equals(o Type) bool      { return samePrimitive(t, o) }
func (t UUIDType) Equals(o Type) bool        { return samePrimitive(t, o) }
func (t BinaryType) Equals(o Type) bool      { return samePrimitive(t, o) }
func (t OtherType) Equals(o Type) bool       { return samePrimitive(t, o) }

func samePrimitive(t, o Type) bool {
	if o == nil || isNested(o) {
		return false
	}
	return t.String() == o.String()
}

func isNested(t Type) bool {
	switch t.(type) {
	case *StructType, *ListType, *MapType:
		return true
	}
	return false
}

// PrimitiveTypes are the primitive type values, as in iceberg-go.
var PrimitiveTypes = struct {
	Bool, Int32, Int64, Float32, Float64, Date, Time, Timestamp, TimestampTz, String, UUID, Binary Type
}{
	BooleanType{}, Int32Type{}, Int64Type{}, Float32Type{}, Float64Type{}, DateType{}, TimeType{},
	TimestampType{}, TimestampTzType{}, StringType{}, UUIDType{}, BinaryType{},
}

var primitiveByName = map[string]Type{}

func init() {
	for _, t := range []Type{BooleanType{}, Int32Type{}, Int64Type{}, Float32Type{}, Float64Type{}, DateType{},
		TimeType{}, TimestampType{}, TimestampTzType{}, StringType{}, UUIDType{}, BinaryType{}} {
		primitiveByName[t.String()] = t
	}
}

// NestedField is a field of a struct (or a schema's column).
type NestedField struct {
	ID       int
	Name     string
	Type     Type
	Required bool
	Doc      string
	// InitialDefault and WriteDefault are kept as their JSON (format
	// version 3 defaults; korvet sets none).
	InitialDefault json.RawMessage
	WriteDefault   json.RawMessage
}

type fieldJSON struct {
	ID             *int            `json:"id"`
	Name           string          `json:"name"`
	Required       *bool           `json:"required"`
	Type           json.RawMessage `json:"type"`
	Doc            string          `json:"doc,omitempty"`
	InitialDefault json.RawMessage `json:"initial-default,omitempty"`
	WriteDefault   json.RawMessage `json:"write-default,omitempty"`
}

func (f NestedField) MarshalJSON() ([]byte, error) {
	t, err := marshalType(f.Type)
	if err != nil {
		return nil, fmt.Errorf("field %s: %w", f.Name, err)
	}
	return json.Marshal(fieldJSON{ID: &f.ID, Name: f.Name, Required: &f.Required, Type: t, Doc: f.Doc,
		InitialDefault: f.InitialDefault, WriteDefault: f.WriteDefault})
}

func (f *NestedField) UnmarshalJSON(b []byte) error {
	var j fieldJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.ID == nil || j.Name == "" || j.Required == nil || len(j.Type) == 0 {
		return fmt.Errorf("schema field %q: id, name, required and type are required", j.Name)
	}
	t, err := unmarshalType(j.Type)
	if err != nil {
		return fmt.Errorf("schema field %s: %w", j.Name, err)
	}
	*f = NestedField{ID: *j.ID, Name: j.Name, Type: t, Required: *j.Required, Doc: j.Doc,
		InitialDefault: j.InitialDefault, WriteDefault: j.WriteDefault}
	return nil
}

// Equals compares everything but the defaults' JSON spelling.
func (f *NestedField) Equals(o NestedField) bool {
	return f.ID == o.ID && f.Name == o.Name && f.Required == o.Required && f.Doc == o.Doc &&
		bytes.Equal(f.InitialDefault, o.InitialDefault) && bytes.Equal(f.WriteDefault, o.WriteDefault) &&
		f.Type.Equals(o.Type)
}

func (f NestedField) String() string {
	req := "optional"
	if f.Required {
		req = "required"
	}
	return fmt.Sprintf("%d: %s: %s %s", f.ID, f.Name, req, f.Type)
}

// StructType is a struct of fields.
type StructType struct {
	FieldList []NestedField
}

func (s *StructType) String() string {
	parts := make([]string, len(s.FieldList))
	for i, f := range s.FieldList {
		parts[i] = f.Name + ": " + f.Type.String()
	}
	return "struct<" + strings.Join(parts, ", ") + ">"
}

func (s *StructType) Equals(o Type) bool {
	x, ok := o.(*StructType)
	if !ok || len(x.FieldList) != len(s.FieldList) {
		return false
	}
	for i, f := range s.FieldList {
		g := x.FieldList[i]
		if f.ID != g.ID || f.Name != g.Name || f.Required != g.Required || !f.Type.Equals(g.Type) {
			return false
		}
	}
	return true
}

// ListType is a list of Element, whose field id is ElementID.
type ListType struct {
	ElementID       int
	Element         Type
	ElementRequired bool
}

// ElementField is the element as a field named "element".
func (l *ListType) ElementField() NestedField {
	return NestedField{ID: l.ElementID, Name: "element", Type: l.Element, Required: l.ElementRequired}
}

func (l *ListType) String() string { return "list<" + l.Element.String() + ">" }

func (l *ListType) Equals(o Type) bool {
	x, ok := o.(*ListType)
	return ok && x.ElementID == l.ElementID && x.ElementRequired == l.ElementRequired && l.Element.Equals(x.Element)
}

// MapType is a map; its keys are always required.
type MapType struct {
	KeyID         int
	KeyType       Type
	ValueID       int
	ValueType     Type
	ValueRequired bool
}

// KeyField and ValueField are the key and value as fields named "key"
// and "value".
func (m *MapType) KeyField() NestedField {
	return NestedField{ID: m.KeyID, Name: "key", Type: m.KeyType, Required: true}
}

func (m *MapType) ValueField() NestedField {
	return NestedField{ID: m.ValueID, Name: "value", Type: m.ValueType, Required: m.ValueRequired}
}

func (m *MapType) String() string {
	return "map<" + m.KeyType.String() + ", " + m.ValueType.String() + ">"
}

func (m *MapType) Equals(o Type) bool {
	x, ok := o.(*MapType)
	return ok && x.KeyID == m.KeyID && x.ValueID == m.ValueID && x.ValueRequired == m.ValueRequired &&
		m.KeyType.Equals(x.KeyType) && m.ValueType.Equals(x.ValueType)
}

type structJSON struct {
	Type   string        `json:"type"`
	Fields []NestedField `json:"fields"`
}

type listJSON struct {
	Type            string          `json:"type"`
	ElementID       int             `json:"element-id"`
	Element         json.RawMessage `json:"element"`
	ElementRequired bool            `json:"element-required"`
}

type mapJSON struct {
	Type          string          `json:"type"`
	KeyID         int             `json:"key-id"`
	Key           json.RawMessage `json:"key"`
	ValueID       int             `json:"value-id"`
	Value         json.RawMessage `json:"value"`
	ValueRequired bool            `json:"value-required"`
}

// marshalType is a type's JSON: a string for a primitive, an object for
// a nested type (Iceberg spec, appendix C).
func marshalType(t Type) (json.RawMessage, error) {
	switch x := t.(type) {
	case nil:
		return nil, errors.New("no type")
	case *StructType:
		fs := x.FieldList
		if fs == nil {
			fs = []NestedField{}
		}
		return json.Marshal(structJSON{Type: "struct", Fields: fs})
	case *ListType:
		e, err := marshalType(x.Element)
		if err != nil {
			return nil, err
		}
		return json.Marshal(listJSON{Type: "list", ElementID: x.ElementID, Element: e, ElementRequired: x.ElementRequired})
	case *MapType:
		k, err := marshalType(x.KeyType)
		if err != nil {
			return nil, err
		}
		v, err := marshalType(x.ValueType)
		if err != nil {
			return nil, err
		}
		return json.Marshal(mapJSON{Type: "map", KeyID: x.KeyID, Key: k, ValueID: x.ValueID, Value: v, ValueRequired: x.ValueRequired})
	}
	return json.Marshal(t.String())
}

func unmarshalType(b json.RawMessage) (Type, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return nil, err
		}
		if t, ok := primitiveByName[name]; ok {
			return t, nil
		}
		return OtherType{Name: name}, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("type: %w", err)
	}
	switch head.Type {
	case "struct":
		var s structJSON
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
		return &StructType{FieldList: s.Fields}, nil
	case "list":
		var l listJSON
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, err
		}
		e, err := unmarshalType(l.Element)
		if err != nil {
			return nil, fmt.Errorf("list element: %w", err)
		}
		return &ListType{ElementID: l.ElementID, Element: e, ElementRequired: l.ElementRequired}, nil
	case "map":
		var m mapJSON
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		k, err := unmarshalType(m.Key)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		v, err := unmarshalType(m.Value)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return &MapType{KeyID: m.KeyID, KeyType: k, ValueID: m.ValueID, ValueType: v, ValueRequired: m.ValueRequired}, nil
	}
	return nil, fmt.Errorf("unknown type %s", b)
}
