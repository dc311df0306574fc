package schema

import (
	"encoding/json"
	"fmt"
)

// NewTyped builds the Typed of a value subject from its versions (ids and
// parsed schemas, oldest first); nil when no version has a Shape.
//
// The merged shape has every field of every version, in order of first
// appearance. A field keeps the kind it first had: Iceberg lets a column
// change type only by widening int to long and float to double, so those
// two widen, and a later version that gives a field any other kind has
// that field decode to null (the raw value keeps it). A KindJSON column
// takes any later kind, as its JSON text. Versions without a Shape (not a
// record) decode to ok == false.
//
// Everything per version is worked out here, once: Decode only decodes
// and, when a version's shape differs from the merged one, converts along
// a precomputed plan.
func NewTyped(subject string, ids []int32, versions []Schema) (*Typed, error) {
	if len(ids) != len(versions) {
		return nil, fmt.Errorf("typed %s: %d ids for %d versions", subject, len(ids), len(versions))
	}
	var merged *Field
	for _, v := range versions {
		if sh := v.Shape(); sh != nil {
			merged = mergeField(merged, sh)
		}
	}
	if merged == nil {
		return nil, nil
	}
	type version struct {
		s    Schema
		plan *convPlan // nil: the version's values are already laid out as merged
	}
	byID := make(map[int32]version, len(ids))
	for i, v := range versions {
		sh := v.Shape()
		if sh == nil {
			continue
		}
		byID[ids[i]] = version{s: v, plan: planConv(sh, merged)}
	}
	t := &Typed{Subject: subject, IDs: append([]int32(nil), ids...), Shape: merged}
	t.Decode = func(value []byte) (any, bool) {
		id, payload, ok := SplitFrame(value)
		if !ok {
			return nil, false
		}
		ver, ok := byID[id]
		if !ok {
			return nil, false
		}
		v, err := ver.s.Decode(payload)
		if err != nil {
			return nil, false
		}
		if ver.plan != nil {
			v = ver.plan.apply(v)
		}
		return v, true
	}
	return t, nil
}

// mergeField merges next into a copy of prior (nil: none yet).
func mergeField(prior, next *Field) *Field {
	if prior == nil {
		return copyField(next)
	}
	out := &Field{Name: prior.Name, Kind: prior.Kind, Doc: prior.Doc}
	if out.Doc == "" {
		out.Doc = next.Doc
	}
	switch {
	case prior.Kind == KindInt32 && next.Kind == KindInt64:
		out.Kind = KindInt64
	case prior.Kind == KindFloat32 && next.Kind == KindFloat64:
		out.Kind = KindFloat64
	case prior.Kind == KindStruct:
		var nextFields []*Field
		if next.Kind == KindStruct {
			nextFields = next.Fields
		}
		for _, p := range prior.Fields {
			if n := fieldNamed(nextFields, p.Name); n != nil {
				out.Fields = append(out.Fields, mergeField(p, n))
			} else {
				out.Fields = append(out.Fields, copyField(p))
			}
		}
		for _, n := range nextFields {
			if fieldNamed(prior.Fields, n.Name) == nil {
				out.Fields = append(out.Fields, copyField(n))
			}
		}
	case prior.Kind == KindList || prior.Kind == KindMap:
		if next.Kind == prior.Kind {
			out.Elem = mergeField(prior.Elem, next.Elem)
		} else {
			out.Elem = copyField(prior.Elem)
		}
	}
	return out
}

func copyField(f *Field) *Field {
	if f == nil {
		return nil
	}
	out := &Field{Name: f.Name, Kind: f.Kind, Doc: f.Doc, Elem: copyField(f.Elem)}
	for _, c := range f.Fields {
		out.Fields = append(out.Fields, copyField(c))
	}
	return out
}

func fieldNamed(fs []*Field, name string) *Field {
	for _, f := range fs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// convPlan converts a value of one shape to another.
type convPlan struct {
	op     convOp
	fields []fieldPlan // opStruct: one per field of the target
	elem   *convPlan   // opList, opMap
}

type fieldPlan struct {
	name string
	plan *convPlan // nil: the source lacks the field (null)
}

type convOp uint8

const (
	opCopy convOp = iota
	opNull
	opInt64   // int32 -> int64
	opFloat64 // float32 -> float64
	opJSON    // any -> its JSON text
	opStruct
	opList
	opMap
)

// planConv plans the conversion of values of from to values of to; nil
// when they are laid out alike.
func planConv(from, to *Field) *convPlan {
	switch {
	case to.Kind == KindJSON && from.Kind == KindJSON:
		return nil
	case to.Kind == KindJSON:
		return &convPlan{op: opJSON}
	case from.Kind == KindInt32 && to.Kind == KindInt64:
		return &convPlan{op: opInt64}
	case from.Kind == KindFloat32 && to.Kind == KindFloat64:
		return &convPlan{op: opFloat64}
	case from.Kind != to.Kind:
		return &convPlan{op: opNull}
	case to.Kind == KindList || to.Kind == KindMap:
		e := planConv(from.Elem, to.Elem)
		if e == nil {
			return nil
		}
		op := opList
		if to.Kind == KindMap {
			op = opMap
		}
		return &convPlan{op: op, elem: e}
	case to.Kind == KindStruct:
		p := &convPlan{op: opStruct}
		same := len(from.Fields) == len(to.Fields)
		for _, tf := range to.Fields {
			fp := fieldPlan{name: tf.Name}
			if ff := fieldNamed(from.Fields, tf.Name); ff != nil {
				if fp.plan = planConv(ff, tf); fp.plan != nil {
					same = false
				} else {
					fp.plan = &convPlan{op: opCopy}
				}
			} else {
				same = false
			}
			p.fields = append(p.fields, fp)
		}
		if same {
			return nil
		}
		return p
	}
	return nil
}

func (p *convPlan) apply(v any) any {
	if v == nil {
		return nil
	}
	switch p.op {
	case opCopy:
		return v
	case opNull:
		return nil
	case opInt64:
		if i, ok := v.(int32); ok {
			return int64(i)
		}
	case opFloat64:
		if f, ok := v.(float32); ok {
			return float64(f)
		}
	case opJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		return string(b)
	case opStruct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		out := make(map[string]any, len(p.fields))
		for _, f := range p.fields {
			if f.plan == nil {
				out[f.name] = nil
			} else {
				out[f.name] = f.plan.apply(m[f.name])
			}
		}
		return out
	case opList:
		l, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, x := range l {
			l[i] = p.elem.apply(x) // the decoded value is ours to change
		}
		return l
	case opMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for k, x := range m {
			m[k] = p.elem.apply(x)
		}
		return m
	}
	return nil
}
