package schema

import (
	"strings"
	"testing"
)

// compatCase is an old and a new schema; back says whether the new one
// reads the old one's data (BACKWARD), fwd whether the old one reads the
// new one's (FORWARD); want is in a reason when one is false.
type compatCase struct {
	name      string
	old, new  string
	back, fwd bool
	want      string
}

func runCompat(t *testing.T, format Format, cases []compatCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := mustParse(t, Source{Format: format, Text: tc.old}, nil)
			next := mustParse(t, Source{Format: format, Text: tc.new}, nil)
			for _, lv := range []struct {
				level Level
				ok    bool
			}{
				{Backward, tc.back}, {Forward, tc.fwd}, {Full, tc.back && tc.fwd}, {None, true},
			} {
				why := Check(lv.level, next, []Schema{old})
				if (len(why) == 0) != lv.ok {
					t.Errorf("%s: compatible = %v, want %v (%q)", lv.level, len(why) == 0, lv.ok, why)
				}
				// want is worded for the first direction that fails.
				first := Backward
				if tc.back {
					first = Forward
				}
				if lv.level == first && len(why) > 0 && tc.want != "" && !strings.Contains(strings.Join(why, "; "), tc.want) {
					t.Errorf("%s: reasons %q do not mention %q", lv.level, why, tc.want)
				}
			}
		})
	}
}

func rec(fields string) string {
	return `{"type":"record","name":"sensor","namespace":"acme","fields":[` + fields + `]}`
}

func TestAvroCompat(t *testing.T) {
	runCompat(t, Avro, []compatCase{
		{"same", rec(`{"name":"temp","type":"long"}`), rec(`{"name":"temp","type":"long"}`), true, true, ""},
		{"field added with default", rec(`{"name":"a","type":"int"}`), rec(`{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}`), true, true, ""},
		{"field added without default", rec(`{"name":"a","type":"int"}`), rec(`{"name":"a","type":"int"},{"name":"b","type":"string"}`), false, true,
			`field "b" of record "acme.sensor": missing in the writer's schema and has no default`},
		{"field removed without default", rec(`{"name":"a","type":"int"},{"name":"b","type":"string"}`), rec(`{"name":"a","type":"int"}`), true, false, `field "b"`},
		{"type changed", rec(`{"name":"temp","type":"long"}`), rec(`{"name":"temp","type":"string"}`), false, false,
			`field "temp" of record "acme.sensor": type long written cannot be read as string`},
		{"int promoted to long", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"long"}`), true, false, `field "n"`},
		{"string and bytes", rec(`{"name":"s","type":"string"}`), rec(`{"name":"s","type":"bytes"}`), true, true, ""},
		{"enum symbol added", rec(`{"name":"k","type":{"type":"enum","name":"K","symbols":["A"]}}`), rec(`{"name":"k","type":{"type":"enum","name":"K","symbols":["A","B"]}}`), true, false, `lacks symbol "B"`},
		{"made nullable", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":["null","int"]}`), true, false, `field "n"`},
		{"nested record field changed", rec(`{"name":"in","type":{"type":"record","name":"inner","fields":[{"name":"x","type":"int"}]}}`),
			rec(`{"name":"in","type":{"type":"record","name":"inner","fields":[{"name":"x","type":"boolean"}]}}`), false, false,
			`field "in" of record "acme.sensor": field "x" of record "acme.inner"`},
		{"array items changed", rec(`{"name":"l","type":{"type":"array","items":"int"}}`), rec(`{"name":"l","type":{"type":"array","items":"string"}}`), false, false, `field "l" of record "acme.sensor": items`},
		{"record renamed", `{"type":"record","name":"a","fields":[]}`, `{"type":"record","name":"b","fields":[]}`, false, false, "names differ"},
		{"field renamed with alias", rec(`{"name":"a","type":"int"}`), rec(`{"name":"b","aliases":["a"],"type":"int"}`), true, false, ""},
		{"fixed size", `{"type":"fixed","name":"f","size":4}`, `{"type":"fixed","name":"f","size":8}`, false, false, ""},
	})
}

func TestJSONCompat(t *testing.T) {
	obj := func(props, extra string) string {
		s := `{"type":"object","properties":{` + props + `}`
		if extra != "" {
			s += "," + extra
		}
		return s + "}"
	}
	runCompat(t, JSON, []compatCase{
		{"same", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, ""), true, true, ""},
		{"annotations only", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string","description":"the a","title":"A"}`, `"$comment":"x"`), true, true, ""},
		{"type narrowed", `{"type":["string","null"]}`, `{"type":"string"}`, false, true, `"null" no longer allowed`},
		{"integer to number", `{"type":"integer"}`, `{"type":"number"}`, true, false, `"number" no longer allowed`},
		{"type added to untyped", `{}`, `{"type":"string"}`, false, true, "type narrowed from any type"},
		{"property type changed", obj(`"temp":{"type":"number"}`, ""), obj(`"temp":{"type":"string"}`, ""), false, false, `#/properties/temp: type narrowed`},
		{"open model: property added", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, ""), false, true, `property "b" added to an open content model`},
		{"open model: empty property added", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"},"b":{}`, ""), true, true, ""},
		{"closed model: property added", obj(`"a":{"type":"string"}`, `"additionalProperties":false`), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, `"additionalProperties":false`),
			true, false, `property "b" removed from a closed content model`},
		{"closed model: property removed", obj(`"a":{"type":"string"},"b":{"type":"integer"}`, `"additionalProperties":false`), obj(`"a":{"type":"string"}`, `"additionalProperties":false`),
			false, true, `property "b" removed from a closed content model`},
		{"open model: property removed", obj(`"a":{"type":"string"},"b":{"type":"integer"}`, ""), obj(`"a":{"type":"string"}`, ""), true, false, `property "b" added`},
		{"model closed", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, `"additionalProperties":false`), false, true, "content model closed"},
		{"additionalProperties schema: property added", obj(``, `"additionalProperties":{"type":"string"}`), obj(`"b":{"type":"string","maxLength":3}`, `"additionalProperties":{"type":"string"}`),
			false, true, "maxLength 3 added"},
		{"required added", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, `"required":["a"]`), false, true, `property "a" is required now`},
		{"enum writer typed by its values", `{"enum":["a","b"]}`, `{"type":"string"}`, true, false, "values restricted"},
		{"enum value removed", `{"enum":["a","b"]}`, `{"enum":["a"]}`, false, true, `enum value "b" removed`},
		{"enum to const", `{"enum":["a","b"]}`, `{"const":"a"}`, false, true, `enum value "b" removed`},
		{"maxLength decreased", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true, "maxLength changed from 10 to 5"},
		{"minLength increased", `{"type":"string","minLength":1}`, `{"type":"string","minLength":2}`, false, true, "minLength changed from 1 to 2"},
		{"maximum decreased", `{"type":"number","maximum":10.5}`, `{"type":"number","maximum":10}`, false, true, "maximum changed"},
		{"minimum added", `{"type":"number"}`, `{"type":"number","minimum":0}`, false, true, "minimum 0 added"},
		{"maxItems decreased", `{"type":"array","maxItems":3}`, `{"type":"array","maxItems":2}`, false, true, "maxItems"},
		{"string bound on an integer is moot", `{"type":"integer"}`, `{"type":"integer","maxLength":3}`, true, true, ""},
		{"items type changed", `{"type":"array","items":{"type":"integer"}}`, `{"type":"array","items":{"type":"string"}}`, false, false, "#/items"},
		{"local ref followed", `{"definitions":{"t":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/t"}}}`,
			`{"$defs":{"t":{"type":"integer","maximum":5}},"properties":{"a":{"$ref":"#/$defs/t"}}}`, false, true, "#/properties/a: maximum 5 added"},
		{"$ref with a sibling assertion", `{"definitions":{"t":{"type":"string"}},"$ref":"#/definitions/t","maxLength":5}`,
			`{"definitions":{"t":{"type":"string"}},"$ref":"#/definitions/t","maxLength":3}`, false, false, "cannot be followed changed"},
		{"oneOf changed", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"}]}`, false, false, `"oneOf" changed`},
		{"oneOf removed", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{}`, true, false, `"oneOf" changed`},
		{"pattern added", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, false, true, `"pattern" changed`},
		{"patternProperties removed", `{"patternProperties":{"^x":{"type":"string"}},"additionalProperties":false}`, `{"additionalProperties":false}`, false, false, `"patternProperties"`},
		{"schema true to false", `true`, `false`, false, true, "accepts nothing"},
		{"multipleOf", `{"type":"number","multipleOf":2}`, `{"type":"number","multipleOf":4}`, false, true, "multipleOf 4"},
		{"uniqueItems", `{"type":"array"}`, `{"type":"array","uniqueItems":true}`, false, true, "uniqueItems"},
	})
}

func proto3(body string) string { return `syntax = "proto3"; package acme; ` + body }

func TestProtobufCompat(t *testing.T) {
	runCompat(t, Protobuf, []compatCase{
		{"same", proto3(`message A { string a = 1; }`), proto3(`message A { string a = 1; }`), true, true, ""},
		{"field added", proto3(`message A { string a = 1; }`), proto3(`message A { string a = 1; int64 b = 2; }`), true, true, ""},
		{"field removed", proto3(`message A { string a = 1; int64 b = 2; }`), proto3(`message A { string a = 1; }`), true, true, ""},
		{"field renamed", proto3(`message A { string a = 1; }`), proto3(`message A { string b = 1; }`), true, true, ""},
		{"package changed", proto3(`message A {}`), `syntax = "proto3"; package other; message A {}`, false, false, `package changed from "acme" to "other"`},
		{"message removed", proto3(`message A {} message B {}`), proto3(`message A {}`), false, true, `message "B" removed`},
		{"nested message removed", proto3(`message A { message N { int32 x = 1; } N n = 1; }`), proto3(`message A {}`), false, true, `message "A.N" removed`},
		{"kind changed", proto3(`message A { int64 temp = 1; }`), proto3(`message A { string temp = 1; }`), false, false,
			`field "temp" (1) of message "A": writer's int64 cannot be read as string`},
		{"int32 to int64", proto3(`message A { int32 n = 1; }`), proto3(`message A { int64 n = 1; }`), true, true, ""},
		{"uint64 to bool", proto3(`message A { uint64 n = 1; }`), proto3(`message A { bool n = 1; }`), true, true, ""},
		{"sint32 to sint64", proto3(`message A { sint32 n = 1; }`), proto3(`message A { sint64 n = 1; }`), true, true, ""},
		{"fixed32 to sfixed32", proto3(`message A { fixed32 n = 1; }`), proto3(`message A { sfixed32 n = 1; }`), true, true, ""},
		{"fixed64 to sfixed64", proto3(`message A { fixed64 n = 1; }`), proto3(`message A { sfixed64 n = 1; }`), true, true, ""},
		{"string to bytes", proto3(`message A { string n = 1; }`), proto3(`message A { bytes n = 1; }`), true, true, ""},
		{"int32 to sint32", proto3(`message A { int32 n = 1; }`), proto3(`message A { sint32 n = 1; }`), false, false, "writer's int32 cannot be read as sint32"},
		{"fixed32 to fixed64", proto3(`message A { fixed32 n = 1; }`), proto3(`message A { fixed64 n = 1; }`), false, false, ""},
		{"message type changed", proto3(`message A { B b = 1; } message B {} message C {}`), proto3(`message A { C b = 1; } message B {} message C {}`), false, false, "message B cannot be read as message C"},
		{"moved into oneof", proto3(`message A { int32 a = 1; int32 b = 2; }`), proto3(`message A { oneof o { int32 a = 1; int32 b = 2; } }`), false, false, `moved into oneof "o"`},
		{"proto3 optional is no oneof", proto3(`message A { int32 a = 1; }`), proto3(`message A { optional int32 a = 1; }`), true, true, ""},
		{"enum value removed", proto3(`enum E { X = 0; Y = 1; } message A { E e = 1; }`), proto3(`enum E { X = 0; } message A { E e = 1; }`), false, true, `value Y (1) of enum "E" removed`},
		{"enum value added", proto3(`enum E { X = 0; } message A { E e = 1; }`), proto3(`enum E { X = 0; Y = 1; } message A { E e = 1; }`), true, false, ""},
		{"map value changed", proto3(`message A { map<string, int32> m = 1; }`), proto3(`message A { map<string, string> m = 1; }`), false, false, "(map value)"},
		{"map to scalar", proto3(`message A { map<string, int32> m = 1; }`), proto3(`message A { string m = 1; }`), false, false, "writer's map"},
		{"singular to repeated string", proto3(`message A { string s = 1; }`), proto3(`message A { repeated string s = 1; }`), false, false, "repeated and singular"},
		{"required added", `syntax = "proto2"; message A { optional int32 a = 1; }`, `syntax = "proto2"; message A { optional int32 a = 1; required int32 b = 2; }`, false, false, "required field added"},
		{"required removed", `syntax = "proto2"; message A { required int32 a = 1; required int32 b = 2; }`, `syntax = "proto2"; message A { required int32 a = 1; }`, false, false, "required field removed"},
	})
}

// TestCheckLevels runs a chain v1 -> v2 -> v3 through all seven levels:
// v3 is compatible with v2 both ways but not with v1 (v2 was registered
// under NONE, or after a compatible step the rules do not chain).
func TestCheckLevels(t *testing.T) {
	chains := map[Format][3]string{
		// v2 adds b with a default, v3 drops the default: v3 cannot read
		// v1's data, though v1 reads v3's (an extra field is skipped).
		Avro: {
			rec(`{"name":"a","type":"int"}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"int","default":0}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"int"}`),
		},
		// a changes type under NONE; v3 only documents it.
		JSON: {
			`{"type":"object","properties":{"a":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"integer"}}}`,
			`{"type":"object","properties":{"a":{"type":"integer","description":"count"}}}`,
		},
		// v2 adds a required b under NONE; v3 adds an optional c.
		Protobuf: {
			`syntax = "proto2"; message A { optional int32 a = 1; }`,
			`syntax = "proto2"; message A { optional int32 a = 1; required int32 b = 2; }`,
			`syntax = "proto2"; message A { optional int32 a = 1; required int32 b = 2; optional string c = 3; }`,
		},
	}
	for format, chain := range chains {
		t.Run(string(format), func(t *testing.T) {
			var v [3]Schema
			for i, text := range chain {
				v[i] = mustParse(t, Source{Format: format, Text: text}, nil)
			}
			prior := []Schema{v[0], v[1]}
			want := map[Level]bool{
				None:               true,
				Backward:           true,
				BackwardTransitive: false,
				Forward:            true,
				ForwardTransitive:  format == Avro,
				Full:               true,
				FullTransitive:     false,
			}
			for level, ok := range want {
				why := Check(level, v[2], prior)
				if (len(why) == 0) != ok {
					t.Errorf("%s: compatible = %v, want %v (%q)", level, len(why) == 0, ok, why)
				}
			}
			if why := Check(Backward, v[2], nil); why != nil {
				t.Errorf("no prior versions: %q", why)
			}
		})
	}
	// Another format than the one before is incompatible at any level but NONE.
	a := mustParse(t, avroSrc(`"string"`), nil)
	j := mustParse(t, jsonSrc(`{"type":"string"}`), nil)
	if why := Check(Forward, j, []Schema{a}); len(why) != 1 || !strings.Contains(why[0], "schema type JSON differs from AVRO") {
		t.Errorf("format change: %q", why)
	}
	if why := Check(None, j, []Schema{a}); why != nil {
		t.Errorf("format change at NONE: %q", why)
	}
}
