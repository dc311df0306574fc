package duckdbtest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/korvet/korvet/engine/schema"
)

// evolving is an Avro value subject with two versions (ids 1 and 2): an
// order record; version 2 widens id to long and adds channel at the root
// and zip in the nested ship record. Its Typed comes from the registry's
// own code: schema.Parse and schema.NewTyped.
type evolving struct {
	texts    []string
	versions []schema.Schema
	avro     []avro.Schema // for producing values
}

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"int"},
	{"name":"customer","type":"string"},
	{"name":"total","type":"double"},
	{"name":"paid","type":"boolean"},
	{"name":"placed","type":{"type":"long","logicalType":"timestamp-micros"}},
	{"name":"day","type":{"type":"int","logicalType":"date"}},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
	{"name":"attrs","type":{"type":"map","values":"long"}},
	{"name":"ship","type":["null",{"type":"record","name":"Addr","fields":[
		{"name":"city","type":"string"}]}],"default":null}
]}`

const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"total","type":"double"},
	{"name":"paid","type":"boolean"},
	{"name":"placed","type":{"type":"long","logicalType":"timestamp-micros"}},
	{"name":"day","type":{"type":"int","logicalType":"date"}},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
	{"name":"attrs","type":{"type":"map","values":"long"}},
	{"name":"ship","type":["null",{"type":"record","name":"Addr","fields":[
		{"name":"city","type":"string"},{"name":"zip","type":["null","string"],"default":null}]}],"default":null},
	{"name":"channel","type":["null","string"],"default":null}
]}`

func newEvolving(t *testing.T) *evolving {
	t.Helper()
	e := &evolving{texts: []string{orderV1, orderV2}}
	for _, text := range e.texts {
		s, err := schema.Parse(schema.Source{Format: schema.Avro, Text: text}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.versions = append(e.versions, s)
		e.avro = append(e.avro, avro.MustParse(text))
	}
	if why := schema.Check(schema.Backward, e.versions[1], e.versions[:1]); why != nil {
		t.Fatalf("version 2 is not backward compatible: %v", why)
	}
	return e
}

// typed is the subject's Typed once versions 1..n are registered.
func (e *evolving) typed(t *testing.T, n int) *schema.Typed {
	t.Helper()
	ids := []int32{1, 2}[:n]
	ty, err := schema.NewTyped("orders-value", ids, e.versions[:n])
	if err != nil || ty == nil || ty.Shape == nil {
		t.Fatalf("typed: %v, %v", ty, err)
	}
	return ty
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

// encode frames value, Avro-encoded with version v, with v's id.
func (e *evolving) encode(t *testing.T, v int, value map[string]any) []byte {
	t.Helper()
	m := maps.Clone(value)
	if ship, ok := m["ship"].(map[string]any); ok {
		m["ship"] = map[string]any{"shop.Addr": ship} // a union branch, by name
	}
	b, err := avro.Marshal(e.avro[v-1], m)
	if err != nil {
		t.Fatal(err)
	}
	return append(schema.AppendFrame(nil, int32(v)), b...)
}
