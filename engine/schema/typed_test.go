package schema

import (
	"reflect"
	"testing"

	"github.com/hamba/avro/v2"
)

// The 3-version evolution of the hand check: v2 adds email (with a
// default) and promotes id from int to long and score from float to
// double, v3 removes legacy; v4 turns score into a string, which no
// Iceberg column allows (its values decode to null), and adds tags.
var avroEvolution = []string{
	`{"type":"record","name":"U","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"},{"name":"legacy","type":"string"},{"name":"score","type":"float"}]}`,
	`{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"legacy","type":"string"},{"name":"score","type":"double"},{"name":"email","type":"string","default":""}]}`,
	`{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"score","type":"double"},{"name":"email","type":"string","default":""}]}`,
	`{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"score","type":"string"},{"name":"email","type":"string","default":""},{"name":"tags","type":{"type":"array","items":"int"}}]}`,
}

func evolvedTyped(t testing.TB) (*Typed, []*avroSchema) {
	t.Helper()
	var versions []Schema
	var avros []*avroSchema
	for _, text := range avroEvolution {
		s := avroOf(t, text)
		versions = append(versions, s)
		avros = append(avros, s)
	}
	typed, err := NewTyped("users-value", []int32{11, 12, 13, 14}, versions)
	if err != nil {
		t.Fatal(err)
	}
	return typed, avros
}

func frame(t testing.TB, s *avroSchema, id int32, v any) []byte {
	t.Helper()
	p, err := avro.Marshal(s.s, v)
	if err != nil {
		t.Fatal(err)
	}
	return append(AppendFrame(nil, id), p...)
}

func TestNewTypedEvolution(t *testing.T) {
	typed, avros := evolvedTyped(t)
	want := "U:struct{id:int64 name:string legacy:string score:float64 email:string tags:list[element:int32]}"
	if got := shapeString(typed.Shape); got != want {
		t.Fatalf("merged shape\n got %s\nwant %s", got, want)
	}
	cases := []struct {
		id   int32
		in   map[string]any
		want map[string]any
	}{
		{11, map[string]any{"id": 1, "name": "a", "legacy": "L", "score": float32(0.5)},
			map[string]any{"id": int64(1), "name": "a", "legacy": "L", "score": 0.5, "email": nil, "tags": nil}},
		{12, map[string]any{"id": int64(1) << 40, "name": "b", "legacy": "M", "score": 0.25, "email": "b@x"},
			map[string]any{"id": int64(1) << 40, "name": "b", "legacy": "M", "score": 0.25, "email": "b@x", "tags": nil}},
		{13, map[string]any{"id": int64(3), "name": "c", "score": 1.0, "email": "c@x"},
			map[string]any{"id": int64(3), "name": "c", "legacy": nil, "score": 1.0, "email": "c@x", "tags": nil}},
		{14, map[string]any{"id": int64(4), "name": "d", "score": "high", "email": "", "tags": []any{1, 2}},
			map[string]any{"id": int64(4), "name": "d", "legacy": nil, "score": nil, "email": "", "tags": []any{int32(1), int32(2)}}},
	}
	for _, c := range cases {
		got, ok := typed.Decode(frame(t, avros[c.id-11], c.id, c.in))
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("id %d: got %#v (ok %v)\nwant %#v", c.id, got, ok, c.want)
		}
	}
	for name, v := range map[string][]byte{
		"unframed":   []byte("plain"),
		"unknown id": frame(t, avros[0], 99, cases[0].in),
		"bad body":   append(AppendFrame(nil, 11), 0xff),
	} {
		if got, ok := typed.Decode(v); ok || got != nil {
			t.Errorf("%s: got %#v, %v", name, got, ok)
		}
	}
}

// TestNewTypedWidens: float32 then float64 widens to float64, and a JSON
// column takes a later struct as its JSON text.
func TestNewTypedWidens(t *testing.T) {
	v1 := avroOf(t, `{"type":"record","name":"R","fields":[{"name":"x","type":"float"},{"name":"u","type":["null","int","string"]}]}`)
	v2 := avroOf(t, `{"type":"record","name":"R","fields":[{"name":"x","type":"double"},{"name":"u","type":{"type":"record","name":"S","fields":[{"name":"a","type":"int"}]}}]}`)
	typed, err := NewTyped("r-value", []int32{1, 2}, []Schema{v1, v2})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shapeString(typed.Shape), "R:struct{x:float64 u:json}"; got != want {
		t.Fatalf("shape %s, want %s", got, want)
	}
	got, ok := typed.Decode(frame(t, v1, 1, map[string]any{"x": float32(1.5), "u": map[string]any{"int": 3}}))
	if want := map[string]any{"x": 1.5, "u": "3"}; !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("v1: %#v, want %#v", got, want)
	}
	got, ok = typed.Decode(frame(t, v2, 2, map[string]any{"x": 2.5, "u": map[string]any{"a": 4}}))
	if want := map[string]any{"x": 2.5, "u": `{"a":4}`}; !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("v2: %#v, want %#v", got, want)
	}
	// No version with a shape: no Typed.
	if typed, err := NewTyped("s-value", []int32{1}, []Schema{avroOf(t, `"string"`)}); typed != nil || err != nil {
		t.Errorf("non-record subject: %v, %v", typed, err)
	}
	if _, err := NewTyped("s-value", []int32{1, 2}, []Schema{v1}); err == nil {
		t.Error("ids and versions of different lengths: no error")
	}
}

// BenchmarkTypedDecode decodes a record of the merged shape's first
// version (converted) and of its latest (laid out as merged already).
func BenchmarkTypedDecode(b *testing.B) {
	typed, avros := evolvedTyped(b)
	for _, c := range []struct {
		name string
		v    []byte
	}{
		{"oldest", frame(b, avros[0], 11, map[string]any{"id": 1, "name": "alice", "legacy": "L", "score": float32(0.5)})},
		{"latest", frame(b, avros[3], 14, map[string]any{"id": int64(4), "name": "dora", "score": "high", "email": "d@x", "tags": []any{1, 2, 3}})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.v)))
			for b.Loop() {
				if _, ok := typed.Decode(c.v); !ok {
					b.Fatal("no decode")
				}
			}
		})
	}
}
