package duckdbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/schema"
)

// evolving is a value subject with two versions (ids 1 and 2): an order
// record; version 2 widens id to long and adds channel at the root and zip
// in the nested ship record.
type evolving struct {
	shapes map[int32]*schema.Field
}

func newEvolving(t *testing.T) *evolving {
	t.Helper()
	return &evolving{shapes: map[int32]*schema.Field{1: orderShape(false), 2: orderShape(true)}}
}

func orderShape(v2 bool) *schema.Field {
	f := func(name string, k schema.Kind) *schema.Field { return &schema.Field{Name: name, Kind: k} }
	id := schema.KindInt32
	if v2 {
		id = schema.KindInt64
	}
	ship := &schema.Field{Name: "ship", Kind: schema.KindStruct, Fields: []*schema.Field{f("city", schema.KindString)}}
	line := &schema.Field{Name: "element", Kind: schema.KindStruct, Fields: []*schema.Field{f("sku", schema.KindString), f("qty", schema.KindInt32)}}
	root := &schema.Field{Kind: schema.KindStruct, Fields: []*schema.Field{
		f("id", id), f("customer", schema.KindString), f("total", schema.KindFloat64), f("paid", schema.KindBool),
		f("placed", schema.KindTimestamp), f("day", schema.KindDate), f("note", schema.KindString),
		{Name: "lines", Kind: schema.KindList, Elem: line},
		{Name: "attrs", Kind: schema.KindMap, Elem: f("value", schema.KindInt64)},
		ship,
	}}
	if v2 {
		ship.Fields = append(ship.Fields, f("zip", schema.KindString))
		root.Fields = append(root.Fields, f("channel", schema.KindString))
	}
	return root
}

// typed is the subject's Typed once versions 1..n are registered.
func (e *evolving) typed(n int) *schema.Typed {
	ids := []int32{1}
	if n > 1 {
		ids = append(ids, 2)
	}
	return &schema.Typed{
		Subject: "orders-value", IDs: ids, Shape: e.shapes[int32(n)],
		Decode: func(value []byte) (any, bool) {
			id, payload, ok := schema.SplitFrame(value)
			if !ok || int(id) > n {
				return nil, false
			}
			d := json.NewDecoder(bytes.NewReader(payload))
			d.UseNumber()
			var x any
			if d.Decode(&x) != nil {
				return nil, false
			}
			return layout(x, e.shapes[id]), true
		},
	}
}

// value is the order produced at offset off with version v: nulls and
// empty collections at several levels, depending on off.
func (e *evolving) value(v int, off int64) map[string]any {
	placed := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(off) * time.Millisecond).Add(123 * time.Microsecond)
	m := map[string]any{
		"id": int32(off), "customer": fmt.Sprintf("c%d", off%5), "total": float64(off) * 1.25, "paid": off%2 == 0,
		"placed": placed, "day": time.Date(2026, 1, 1+int(off%300), 0, 0, 0, 0, time.UTC),
		"note": nil, "lines": []any{}, "attrs": map[string]any{}, "ship": nil,
	}
	if off%3 == 0 {
		m["note"] = "rush"
	}
	for i := range off % 4 {
		m["lines"] = append(m["lines"].([]any), map[string]any{"sku": fmt.Sprintf("s%d", i), "qty": int32(i + 1)})
	}
	if off%5 != 0 {
		m["attrs"] = map[string]any{"a": off, "b": -off}
	}
	if off%2 == 1 {
		m["ship"] = map[string]any{"city": "Graz"}
	}
	if v == 2 {
		m["id"] = int64(off) << 33
		m["channel"] = nil
		if off%4 == 1 {
			m["channel"] = "web"
			m["ship"] = map[string]any{"city": "Linz", "zip": fmt.Sprint(4000 + off)}
		}
	}
	return m
}

// encode frames value with version v's id.
func (e *evolving) encode(t *testing.T, v int, value map[string]any) []byte {
	t.Helper()
	j := map[string]any{}
	for k, x := range value {
		switch x := x.(type) {
		case time.Time:
			if k == "day" {
				j[k] = x.Unix() / 86400
			} else {
				j[k] = x.UnixMicro()
			}
		default:
			j[k] = x
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return append(schema.AppendFrame(nil, int32(v)), b...)
}

// layout turns decoded JSON into the Go types of f's kinds.
func layout(x any, f *schema.Field) any {
	if x == nil {
		return nil
	}
	n, _ := x.(json.Number)
	switch f.Kind {
	case schema.KindStruct:
		m, _ := x.(map[string]any)
		out := map[string]any{}
		for _, c := range f.Fields {
			if v, ok := m[c.Name]; ok {
				out[c.Name] = layout(v, c)
			}
		}
		return out
	case schema.KindList:
		xs, _ := x.([]any)
		out := make([]any, len(xs))
		for i, e := range xs {
			out[i] = layout(e, f.Elem)
		}
		return out
	case schema.KindMap:
		m, _ := x.(map[string]any)
		out := map[string]any{}
		for k, e := range m {
			out[k] = layout(e, f.Elem)
		}
		return out
	case schema.KindInt32, schema.KindDate:
		i, _ := n.Int64()
		return int32(i)
	case schema.KindInt64, schema.KindTimestamp:
		i, _ := n.Int64()
		return i
	case schema.KindFloat64:
		v, _ := n.Float64()
		return v
	}
	return x
}
