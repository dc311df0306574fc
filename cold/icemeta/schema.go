package icemeta

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/korvet/korvet/cold/iceberg"
)

// Change is one schema change: add an optional column at Path (its parent
// a struct, or a list or map of structs, named by "element" / "value"),
// or promote the primitive column at Path to To.
type Change struct {
	Path []string
	Add  iceberg.Type
	To   iceberg.Type
	Doc  string
}

// Evolve returns m's current schema with the changes made, as the next
// schema of the table, and the updates that commit it: add-schema,
// set-current-schema and, if the table has a name mapping, the mapping
// with the added columns. Added columns get fresh ids after the table's
// last column id, their nested fields numbered too, the way Iceberg's
// own schema update assigns them.
func Evolve(m *Metadata, changes []Change) (*iceberg.Schema, []Update, error) {
	cur := m.CurrentSchema()
	root := &iceberg.StructType{FieldList: cloneFields(cur.Fields())}
	last := m.LastColumnID
	next := func() int { last++; return last }
	adds := map[int][]iceberg.NestedField{}
	for _, c := range changes {
		name := strings.Join(c.Path, ".")
		if len(c.Path) == 0 || (c.Add == nil) == (c.To == nil) {
			return nil, nil, fmt.Errorf("schema change of %q: want one of add or promote", name)
		}
		if c.Add != nil {
			parentID, st, err := structAt(root, c.Path[:len(c.Path)-1])
			if err != nil {
				return nil, nil, fmt.Errorf("add column %s: %w", name, err)
			}
			col := c.Path[len(c.Path)-1]
			for _, f := range st.FieldList {
				if f.Name == col {
					return nil, nil, fmt.Errorf("add column %s: it exists", name)
				}
			}
			f := iceberg.AssignFreshSchemaIDs(iceberg.NewSchema(0, iceberg.NestedField{Name: col, Type: c.Add, Doc: c.Doc}), next).Field(0)
			st.FieldList = append(st.FieldList, f)
			adds[parentID] = append(adds[parentID], f)
			continue
		}
		_, st, err := structAt(root, c.Path[:len(c.Path)-1])
		if err != nil {
			return nil, nil, fmt.Errorf("promote column %s: %w", name, err)
		}
		i := fieldIndex(st, c.Path[len(c.Path)-1])
		if i < 0 {
			return nil, nil, fmt.Errorf("promote column %s: no such column", name)
		}
		from := st.FieldList[i].Type
		if !(from.Equals(iceberg.PrimitiveTypes.Int32) && c.To.Equals(iceberg.PrimitiveTypes.Int64) ||
			from.Equals(iceberg.PrimitiveTypes.Float32) && c.To.Equals(iceberg.PrimitiveTypes.Float64)) {
			return nil, nil, fmt.Errorf("promote column %s from %s to %s: not an allowed promotion", name, from, c.To)
		}
		st.FieldList[i].Type = c.To
	}
	nextID := 0
	for _, s := range m.Schemas {
		nextID = max(nextID, s.ID+1)
	}
	sc := iceberg.NewSchemaWithIdentifiers(nextID, cur.IdentifierFieldIDs, root.FieldList...)
	ups := AddSchema(sc, last)
	nm, err := m.NameMapping()
	if err != nil {
		return nil, nil, err
	}
	if nm != nil && len(adds) > 0 {
		b, err := json.Marshal(iceberg.AddToNameMapping(nm, adds))
		if err != nil {
			return nil, nil, fmt.Errorf("encode the name mapping: %w", err)
		}
		ups = append(ups, SetProperties(map[string]string{PropNameMapping: string(b)}))
	}
	return sc, ups, nil
}

// structAt finds the struct at path (a list's element or a map's value
// when the path names a list or map) and its field id (iceberg.RootID at the top).
func structAt(root *iceberg.StructType, path []string) (int, *iceberg.StructType, error) {
	id, t := iceberg.RootID, iceberg.Type(root)
	for i, name := range path {
		switch x := t.(type) {
		case *iceberg.StructType:
			j := fieldIndex(x, name)
			if j < 0 {
				return 0, nil, fmt.Errorf("no column %s", strings.Join(path[:i+1], "."))
			}
			id, t = x.FieldList[j].ID, x.FieldList[j].Type
		case *iceberg.ListType:
			if name != "element" {
				return 0, nil, fmt.Errorf("%s is a list", strings.Join(path[:i], "."))
			}
			id, t = x.ElementID, x.Element
		case *iceberg.MapType:
			if name != "value" {
				return 0, nil, fmt.Errorf("%s is a map", strings.Join(path[:i], "."))
			}
			id, t = x.ValueID, x.ValueType
		default:
			return 0, nil, fmt.Errorf("%s is %s", strings.Join(path[:i], "."), t)
		}
	}
	// A list or map of structs takes fields in its element or value.
	switch x := t.(type) {
	case *iceberg.ListType:
		id, t = x.ElementID, x.Element
	case *iceberg.MapType:
		id, t = x.ValueID, x.ValueType
	}
	st, ok := t.(*iceberg.StructType)
	if !ok {
		return 0, nil, fmt.Errorf("%s is %s, not a struct", strings.Join(path, "."), t)
	}
	return id, st, nil
}

func fieldIndex(st *iceberg.StructType, name string) int {
	for i := range st.FieldList {
		if st.FieldList[i].Name == name {
			return i
		}
	}
	return -1
}

// cloneFields copies fields deeply, so that evolving the copy leaves the
// table's schema as it is.
func cloneFields(fs []iceberg.NestedField) []iceberg.NestedField {
	out := make([]iceberg.NestedField, len(fs))
	for i, f := range fs {
		f.Type = cloneType(f.Type)
		out[i] = f
	}
	return out
}

func cloneType(t iceberg.Type) iceberg.Type {
	switch x := t.(type) {
	case *iceberg.StructType:
		return &iceberg.StructType{FieldList: cloneFields(x.FieldList)}
	case *iceberg.ListType:
		c := *x
		c.Element = cloneType(x.Element)
		return &c
	case *iceberg.MapType:
		c := *x
		c.KeyType, c.ValueType = cloneType(x.KeyType), cloneType(x.ValueType)
		return &c
	}
	return t
}
