package iceberg

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Schema is a table schema: its id, top-level fields and identifier
// field ids. It is not modified once made.
type Schema struct {
	ID                 int
	IdentifierFieldIDs []int
	fields             []NestedField
	byName             map[string]NestedField
}

// NewSchema is a schema of fields.
func NewSchema(id int, fields ...NestedField) *Schema {
	return NewSchemaWithIdentifiers(id, nil, fields...)
}

// NewSchemaWithIdentifiers is a schema of fields with identifier field ids.
func NewSchemaWithIdentifiers(id int, identifierIDs []int, fields ...NestedField) *Schema {
	s := &Schema{ID: id, IdentifierFieldIDs: identifierIDs, fields: cloneFields(fields)}
	s.index()
	return s
}

// index names every field by its dotted path: a list's element is
// "element", a map's key and value "key" and "value", as in Iceberg's
// name index.
func (s *Schema) index() {
	s.byName = map[string]NestedField{}
	var walk func(prefix string, t Type)
	add := func(prefix string, f NestedField) {
		name := f.Name
		if prefix != "" {
			name = prefix + "." + f.Name
		}
		s.byName[name] = f
		walk(name, f.Type)
	}
	walk = func(prefix string, t Type) {
		switch x := t.(type) {
		case *StructType:
			for _, f := range x.FieldList {
				add(prefix, f)
			}
		case *ListType:
			add(prefix, x.ElementField())
		case *MapType:
			add(prefix, x.KeyField())
			add(prefix, x.ValueField())
		}
	}
	for _, f := range s.fields {
		add("", f)
	}
}

func (s *Schema) String() string {
	var b strings.Builder
	b.WriteString("table {")
	for _, f := range s.fields {
		b.WriteString("\n\t" + f.String())
	}
	b.WriteString("\n}")
	return b.String()
}

// Fields is a copy of the top-level fields.
func (s *Schema) Fields() []NestedField { return cloneFields(s.fields) }

// Field is the i-th top-level field.
func (s *Schema) Field(i int) NestedField { return cloneFields(s.fields[i : i+1])[0] }

// NumFields is the number of top-level fields.
func (s *Schema) NumFields() int { return len(s.fields) }

// FindFieldByName finds a field by its dotted path ("headers.element.key").
func (s *Schema) FindFieldByName(name string) (NestedField, bool) {
	f, ok := s.byName[name]
	return f, ok
}

// HighestFieldID is the largest field id in the schema.
func (s *Schema) HighestFieldID() int {
	n := 0
	for _, f := range s.byName {
		n = max(n, f.ID)
	}
	return n
}

// NameMapping is the name mapping of the schema's fields, as a table's
// schema.name-mapping.default property holds it.
func (s *Schema) NameMapping() NameMapping {
	return mapFields(s.fields)
}

type schemaJSON struct {
	Type               string        `json:"type"`
	ID                 int           `json:"schema-id"`
	IdentifierFieldIDs []int         `json:"identifier-field-ids"`
	Fields             []NestedField `json:"fields"`
}

func (s *Schema) MarshalJSON() ([]byte, error) {
	ids, fields := s.IdentifierFieldIDs, s.fields
	if ids == nil {
		ids = []int{}
	}
	if fields == nil {
		fields = []NestedField{}
	}
	return json.Marshal(schemaJSON{Type: "struct", ID: s.ID, IdentifierFieldIDs: ids, Fields: fields})
}

func (s *Schema) UnmarshalJSON(b []byte) error {
	var j schemaJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if j.Type != "struct" {
		return fmt.Errorf("schema: type %q, want struct", j.Type)
	}
	if j.Fields == nil {
		return errors.New("schema: no fields")
	}
	*s = *NewSchemaWithIdentifiers(j.ID, j.IdentifierFieldIDs, j.Fields...)
	return nil
}

// cloneFields copies fields deeply.
func cloneFields(fs []NestedField) []NestedField {
	if fs == nil {
		return nil
	}
	out := make([]NestedField, len(fs))
	for i, f := range fs {
		f.Type = cloneType(f.Type)
		out[i] = f
	}
	return out
}

func cloneType(t Type) Type {
	switch x := t.(type) {
	case *StructType:
		return &StructType{FieldList: cloneFields(x.FieldList)}
	case *ListType:
		c := *x
		c.Element = cloneType(x.Element)
		return &c
	case *MapType:
		c := *x
		c.KeyType, c.ValueType = cloneType(x.KeyType), cloneType(x.ValueType)
		return &c
	}
	return t
}

// AssignFreshSchemaIDs is sc with every field id replaced by nextID's,
// in iceberg-go's order: a field's id, then the ids inside its type,
// then the next field (a list's element id and a map's key and value ids
// before the types inside them). The schema id is 0, as iceberg-go's.
func AssignFreshSchemaIDs(sc *Schema, nextID func() int) *Schema {
	old := map[int]int{}
	var fresh func(t Type) Type
	freshFields := func(fs []NestedField) []NestedField {
		out := make([]NestedField, len(fs))
		for i, f := range fs {
			id := nextID()
			old[f.ID] = id
			f.ID = id
			f.Type = fresh(f.Type)
			out[i] = f
		}
		return out
	}
	fresh = func(t Type) Type {
		switch x := t.(type) {
		case *StructType:
			return &StructType{FieldList: freshFields(x.FieldList)}
		case *ListType:
			id := nextID()
			old[x.ElementID] = id
			return &ListType{ElementID: id, Element: fresh(x.Element), ElementRequired: x.ElementRequired}
		case *MapType:
			k, v := nextID(), nextID()
			old[x.KeyID], old[x.ValueID] = k, v
			return &MapType{KeyID: k, ValueID: v, KeyType: fresh(x.KeyType), ValueType: fresh(x.ValueType), ValueRequired: x.ValueRequired}
		}
		return t
	}
	fields := freshFields(sc.fields)
	var ids []int
	for _, id := range sc.IdentifierFieldIDs {
		ids = append(ids, old[id])
	}
	return NewSchemaWithIdentifiers(0, ids, fields...)
}

// PartitionSpec is a partition spec: its id and fields.
type PartitionSpec struct {
	ID     int              `json:"spec-id"`
	Fields []PartitionField `json:"fields"`
}

// PartitionField is one field of a partition spec. Transform is the
// transform's name in the spec's JSON ("identity", "bucket[16]", ...).
type PartitionField struct {
	SourceID  int    `json:"source-id"`
	FieldID   int    `json:"field-id"`
	Name      string `json:"name"`
	Transform string `json:"transform"`
}

// PartitionType is the struct of the spec's partition values for sc.
// Only identity transforms are supported: they are what korvet makes.
func (p *PartitionSpec) PartitionType(sc *Schema) ([]NestedField, error) {
	var out []NestedField
	for _, pf := range p.Fields {
		if pf.Transform != "identity" {
			return nil, fmt.Errorf("partition field %s: transform %s not supported", pf.Name, pf.Transform)
		}
		var src *NestedField
		for _, f := range sc.byName {
			if f.ID == pf.SourceID {
				src = &f
				break
			}
		}
		if src == nil {
			return nil, fmt.Errorf("partition field %s: no source column %d", pf.Name, pf.SourceID)
		}
		out = append(out, NestedField{ID: pf.FieldID, Name: pf.Name, Type: src.Type})
	}
	return out, nil
}
