package iceberg

import "slices"

// MappedField maps the names a column had in data files to its field id
// (the spec's "Column Projection": name mapping).
type MappedField struct {
	Names   []string      `json:"names"`
	FieldID *int          `json:"field-id,omitempty"`
	Fields  []MappedField `json:"fields,omitempty"`
}

// NameMapping is a table's schema.name-mapping.default.
type NameMapping []MappedField

func mapFields(fs []NestedField) []MappedField {
	out := make([]MappedField, len(fs))
	for i, f := range fs {
		id := f.ID
		out[i] = MappedField{Names: []string{f.Name}, FieldID: &id, Fields: mapType(f.Type)}
	}
	return out
}

func mapType(t Type) []MappedField {
	switch x := t.(type) {
	case *StructType:
		return mapFields(x.FieldList)
	case *ListType:
		id := x.ElementID
		return []MappedField{{Names: []string{"element"}, FieldID: &id, Fields: mapType(x.Element)}}
	case *MapType:
		k, v := x.KeyID, x.ValueID
		return []MappedField{
			{Names: []string{"key"}, FieldID: &k, Fields: mapType(x.KeyType)},
			{Names: []string{"value"}, FieldID: &v, Fields: mapType(x.ValueType)},
		}
	}
	return nil
}

// RootID is the parent id of top-level columns in AddToNameMapping.
const RootID = -1

// AddToNameMapping is nm with added columns: adds maps a parent's field
// id (RootID for top-level columns; a list's element or a map's value id
// for the fields of a struct inside them) to the fields added under it.
// An added name that an older mapped field still claimed moves to the new
// field, as in Iceberg's MappingUtil.update.
func AddToNameMapping(nm NameMapping, adds map[int][]NestedField) NameMapping {
	var update func(fs []MappedField, parent int) []MappedField
	update = func(fs []MappedField, parent int) []MappedField {
		out := make([]MappedField, 0, len(fs))
		added := adds[parent]
		for _, f := range fs {
			f.Names = slices.DeleteFunc(slices.Clone(f.Names), func(n string) bool {
				return slices.ContainsFunc(added, func(a NestedField) bool { return a.Name == n && (f.FieldID == nil || *f.FieldID != a.ID) })
			})
			if len(f.Names) == 0 {
				continue
			}
			if f.FieldID != nil {
				f.Fields = update(f.Fields, *f.FieldID)
			} else {
				f.Fields = slices.Clone(f.Fields)
			}
			if len(f.Fields) == 0 {
				f.Fields = nil
			}
			out = append(out, f)
		}
		for _, a := range added {
			id := a.ID
			out = append(out, MappedField{Names: []string{a.Name}, FieldID: &id, Fields: mapType(a.Type)})
		}
		return out
	}
	return update(nm, RootID)
}
