package schema

import (
	"reflect"
	"strings"
	"testing"
)

const jsonAll = `{
 "$schema": "http://json-schema.org/draft-07/schema#",
 "type": "object",
 "properties": {
  "zeta": {"type": "string", "description": "last letter, first field"},
  "count": {"type": "integer"},
  "ratio": {"type": ["null", "number"]},
  "ok": {"type": "boolean"},
  "when": {"type": "string", "format": "date-time"},
  "tags": {"type": "array", "items": {"type": "string"}},
  "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
  "addr": {"$ref": "#/definitions/Address"},
  "home": {"$ref": "#/$defs/Home"},
  "other": {"$ref": "other.json"},
  "tree": {"$ref": "#/definitions/Tree"},
  "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
  "free": {},
  "multi": {"type": ["string", "integer"]}
 },
 "definitions": {
  "Address": {"type": "object", "properties": {"street": {"type": "string"}, "no": {"type": "integer"}}},
  "Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/Tree"}}}}
 },
 "$defs": {"Home": {"properties": {"rooms": {"type": "integer"}}}}
}`

var jsonRefs = map[string]string{"other.json": `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}}`}

func TestJSONSchemaShape(t *testing.T) {
	s := jsonOf(t, jsonAll, jsonRefs)
	want := ":struct{zeta:string count:int64 ratio:float64 ok:bool when:string tags:list[element:string] attrs:map[value:int64] " +
		"addr:struct{street:string no:int64} home:struct{rooms:int64} other:struct{a:float64 b:string} " +
		"tree:struct{kids:list[element:json]} either:json free:json multi:json}"
	if got := shapeString(s.Shape()); got != want {
		t.Fatalf("shape\n got %s\nwant %s", got, want)
	}
	if d := s.Shape().Fields[0].Doc; d != "last letter, first field" {
		t.Errorf("doc %q", d)
	}
	for _, text := range []string{`{"type":"string"}`, `{"type":"array","items":{"type":"object","properties":{}}}`, `true`} {
		if sh := jsonOf(t, text, nil).Shape(); sh != nil {
			t.Errorf("%s: shape %s, want nil", text, shapeString(sh))
		}
	}
}

func TestJSONSchemaDecode(t *testing.T) {
	s := jsonOf(t, jsonAll, jsonRefs)
	payload := `{"zeta":"z","count":12345678901,"ratio":0.5,"ok":true,"when":"2024-01-02T03:04:05.123456789+01:00",
		"tags":["a","b"],"attrs":{"x":1,"y":2.0},"addr":{"street":"Main","no":"not a number"},"home":{"rooms":3},
		"other":{"a":1e3,"b":"B"},"tree":{"kids":[{"kids":[]}]},"either":7,"free":{"q":[1,true]},"multi":"m","extra":1}`
	got, err := s.Decode([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"zeta": "z", "count": int64(12345678901), "ratio": 0.5, "ok": true, "when": "2024-01-02T03:04:05.123456789+01:00",
		"tags": []any{"a", "b"}, "attrs": map[string]any{"x": int64(1), "y": int64(2)},
		"addr": map[string]any{"street": "Main", "no": nil}, "home": map[string]any{"rooms": int64(3)},
		"other": map[string]any{"a": 1000.0, "b": "B"}, "tree": map[string]any{"kids": []any{`{"kids":[]}`}},
		"either": "7", "free": `{"q":[1,true]}`, "multi": `"m"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode\n got %#v\nwant %#v", got, want)
	}
	if js, err := s.JSON([]byte(payload)); err != nil || string(js) != payload {
		t.Errorf("JSON: %q, %v", js, err)
	}
	for name, p := range map[string]string{
		"not json": `{"zeta":`, "not an object": `[1]`, "two values": `{} {}`,
		"int overflow": `{"count":99999999999999999999}`, "deep overflow": `{"attrs":{"x":-99999999999999999999}}`,
	} {
		if _, err := s.Decode([]byte(p)); err == nil {
			t.Errorf("%s: Decode: no error", name)
		}
	}
	if _, err := s.JSON([]byte(`{"a":`)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("JSON of junk: %v", err)
	}
}
