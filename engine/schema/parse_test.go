package schema

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// subjects is a Resolver over an in-memory set of registered schemas,
// keyed "subject/version".
type subjects map[string]Source

func (s subjects) resolve(r Reference) (Source, error) {
	src, ok := s[fmt.Sprintf("%s/%d", r.Subject, r.Version)]
	if !ok {
		return Source{}, fmt.Errorf("subject %q version %d not found", r.Subject, r.Version)
	}
	return src, nil
}

func mustParse(t *testing.T, src Source, resolve Resolver) Schema {
	t.Helper()
	s, err := Parse(src, resolve)
	if err != nil {
		t.Fatalf("Parse(%s %.80q): %v", src.Format, src.Text, err)
	}
	return s
}

func avroSrc(text string) Source  { return Source{Format: Avro, Text: text} }
func jsonSrc(text string) Source  { return Source{Format: JSON, Text: text} }
func protoSrc(text string) Source { return Source{Format: Protobuf, Text: text} }

// within fails the test when f has not returned by the deadline: hostile
// input must not make Parse or Check hang.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %v", what, d)
	}
}

func TestParseValid(t *testing.T) {
	for _, src := range []Source{
		avroSrc(`"string"`),
		avroSrc(`{"type":"record","name":"sensor","fields":[{"name":"temp","type":"double"}]}`),
		{Text: `{"type":"enum","name":"E","symbols":["A","B"]}`}, // no format: AVRO
		jsonSrc(`true`),
		jsonSrc(`{"type":"object","properties":{"a":{"type":"string"}},"definitions":{"x":{"type":"integer"}}}`),
		jsonSrc(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"x":{"type":"integer"}},"$ref":"#/$defs/x"}`),
		protoSrc(`syntax = "proto3"; package acme; message A { string a = 1; }`),
		protoSrc(`syntax = "proto3"; import "google/protobuf/timestamp.proto"; message A { google.protobuf.Timestamp at = 1; }`),
		protoSrc(`syntax = "proto2"; message A { required int32 a = 1; optional group G = 2 { optional int32 x = 3; } }`),
	} {
		s := mustParse(t, src, nil)
		want := src.Format
		if want == "" {
			want = Avro
		}
		if s.Format() != want || s.Canonical() == "" {
			t.Errorf("%.60q: format %s canonical %q", src.Text, s.Format(), s.Canonical())
		}
		if s.Source().Text != src.Text {
			t.Errorf("%.60q: Source() = %q", src.Text, s.Source().Text)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		src  Source
		want string // in the error
	}{
		{avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"nosuch"}]}`), "nosuch"},
		{avroSrc(`{"type":"record","name":"r"`), "line 1:"},
		{avroSrc(`{"type":"record","name":"r","fields":[]} trailing`), "after the JSON document"},
		{avroSrc(`{"type":"enum","name":"E","symbols":["A","A"]}`), ""},
		{avroSrc(`{"type":"fixed","name":"F"}`), ""},
		{avroSrc(``), ""},
		{jsonSrc(`{"type":`), "line 1:"},
		{jsonSrc("{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": 5}}\n}"), ""},
		{jsonSrc(`[1,2]`), "an array"},
		{jsonSrc(`{"pattern":"("}`), ""},
		{jsonSrc(`{"$ref":"https://example.com/elsewhere.json"}`), "not one of the schema's references"},
		{jsonSrc(`{"$ref":"/etc/passwd"}`), "not one of the schema's references"},
		{protoSrc("syntax = \"proto3\";\nmessage A {\n  strin a = 1;\n}"), "schema.proto:3:"},
		{protoSrc("syntax = \"proto3\";\nmessage A { string a = 1 }"), "schema.proto:2:"},
		{protoSrc(`syntax = "proto3"; import "acme/missing.proto"; message A {}`), "acme/missing.proto"},
		{protoSrc(`syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }`), ""},
		{Source{Format: "XML", Text: "<a/>"}, "unknown schema type"},
	} {
		_, err := Parse(tc.src, nil)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s %q) = %v, want an error wrapping ErrInvalid", tc.src.Format, tc.src.Text, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s %q) = %v, want it to mention %q", tc.src.Format, tc.src.Text, err, tc.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Source
		same bool
	}{
		{"avro whitespace and key order",
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":1}]}`),
			avroSrc("{\n  \"name\": \"r\",\n  \"type\": \"record\",\n  \"fields\": [ {\"default\": 1, \"type\": \"int\", \"name\": \"a\"} ]\n}"),
			true},
		{"avro changed default",
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":1}]}`),
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":2}]}`),
			false},
		{"avro logical type",
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}`),
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"long","logicalType":"timestamp-millis"}}]}`),
			false},
		{"avro field order",
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":"int"}]}`),
			avroSrc(`{"type":"record","name":"r","fields":[{"name":"b","type":"int"},{"name":"a","type":"int"}]}`),
			false},
		{"json whitespace and key order",
			jsonSrc(`{"type":"object","properties":{"a":{"type":"string","maxLength":5}}}`),
			jsonSrc("{ \"properties\" : { \"a\" : { \"maxLength\" : 5, \"type\" : \"string\" } },\n \"type\" : \"object\" }"),
			true},
		{"json changed bound",
			jsonSrc(`{"type":"string","maxLength":5}`),
			jsonSrc(`{"type":"string","maxLength":6}`),
			false},
		{"proto comments and whitespace",
			protoSrc(`syntax = "proto3"; package acme; message A { string a = 1; int64 b = 2; }`),
			protoSrc("// the A\nsyntax = \"proto3\";\n\npackage acme;\n\n/* doc */\nmessage A {\n  string a = 1; // first\n  int64  b = 2;\n}\n"),
			true},
		{"proto renamed field",
			protoSrc(`syntax = "proto3"; message A { string a = 1; }`),
			protoSrc(`syntax = "proto3"; message A { string b = 1; }`),
			false},
	} {
		a, b := mustParse(t, tc.a, nil), mustParse(t, tc.b, nil)
		if same := a.Canonical() == b.Canonical(); same != tc.same {
			t.Errorf("%s: same canonical form = %v, want %v:\n%s\n%s", tc.name, same, tc.same, a.Canonical(), b.Canonical())
		}
	}
}

func TestReferences(t *testing.T) {
	reg := subjects{
		"address/1": avroSrc(`{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"street","type":"string"},{"name":"geo","type":"com.acme.Geo"}]}`),
		"geo/1":     avroSrc(`{"type":"record","name":"Geo","namespace":"com.acme","fields":[{"name":"lat","type":"double"}]}`),
		"jaddr/1":   jsonSrc(`{"type":"object","properties":{"street":{"type":"string"},"geo":{"$ref":"geo.json"}},"required":["street"]}`),
		"jgeo/1":    jsonSrc(`{"type":"object","properties":{"lat":{"type":"number"}}}`),
		"paddr/1":   protoSrc(`syntax = "proto3"; package acme; import "acme/geo.proto"; message Address { string street = 1; Geo geo = 2; }`),
		"pgeo/1":    protoSrc(`syntax = "proto3"; package acme; message Geo { double lat = 1; }`),
	}
	reg["address/1"] = Source{Format: Avro, Text: reg["address/1"].Text, References: []Reference{{Name: "com.acme.Geo", Subject: "geo", Version: 1}}}
	reg["jaddr/1"] = Source{Format: JSON, Text: reg["jaddr/1"].Text, References: []Reference{{Name: "geo.json", Subject: "jgeo", Version: 1}}}
	reg["paddr/1"] = Source{Format: Protobuf, Text: reg["paddr/1"].Text, References: []Reference{{Name: "acme/geo.proto", Subject: "pgeo", Version: 1}}}

	avroOrder := Source{Format: Avro,
		Text:       `{"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"to","type":"com.acme.Address"}]}`,
		References: []Reference{{Name: "com.acme.Address", Subject: "address", Version: 1}}}
	jsonOrder := Source{Format: JSON,
		Text:       `{"type":"object","properties":{"to":{"$ref":"address.json"}}}`,
		References: []Reference{{Name: "address.json", Subject: "jaddr", Version: 1}}}
	protoOrder := Source{Format: Protobuf,
		Text:       `syntax = "proto3"; package acme; import "acme/address.proto"; message Order { Address to = 1; }`,
		References: []Reference{{Name: "acme/address.proto", Subject: "paddr", Version: 1}}}

	a := mustParse(t, avroOrder, reg.resolve).(*avroSchema)
	if !strings.Contains(a.s.String(), "com.acme.Geo") {
		t.Errorf("Avro reference of a reference not resolved: %s", a.s.String())
	}
	j := mustParse(t, jsonOrder, reg.resolve).(*jsonSchema)
	if len(j.refs) != 2 || j.refs["geo.json"] == nil || j.refs["address.json"] == nil {
		t.Errorf("JSON refs = %v, want address.json and geo.json", j.refs)
	}
	if err := j.compiled.Validate(map[string]any{"to": map[string]any{"geo": map[string]any{"lat": 1.5}}}); err == nil {
		t.Error("JSON: a value without the referenced schema's required street validated")
	}
	if err := j.compiled.Validate(map[string]any{"to": map[string]any{"street": "x", "geo": map[string]any{"lat": "north"}}}); err == nil {
		t.Error("JSON: a string lat validated against the reference of a reference")
	}
	if err := j.compiled.Validate(map[string]any{"to": map[string]any{"street": "x", "geo": map[string]any{"lat": 1.5}}}); err != nil {
		t.Errorf("JSON: a valid value: %v", err)
	}
	p := mustParse(t, protoOrder, reg.resolve).(*protoSchema)
	to := p.file.Messages().ByName("Order").Fields().ByName("to")
	if to == nil || to.Message().Fields().ByName("geo").Message().FullName() != "acme.Geo" {
		t.Errorf("proto import of an import not linked")
	}

	// Compatibility follows references: a changed referenced type.
	reg["geo/2"] = avroSrc(`{"type":"record","name":"Geo","namespace":"com.acme","fields":[{"name":"lat","type":"string"}]}`)
	addr2 := reg["address/1"]
	addr2.References = []Reference{{Name: "com.acme.Geo", Subject: "geo", Version: 2}}
	reg["address/2"] = addr2
	order2 := avroOrder
	order2.References = []Reference{{Name: "com.acme.Address", Subject: "address", Version: 2}}
	why := Check(Backward, mustParse(t, order2, reg.resolve), []Schema{a})
	if len(why) == 0 || !strings.Contains(strings.Join(why, "; "), `field "lat" of record "com.acme.Geo"`) {
		t.Errorf("changed referenced Avro type: %q", why)
	}
	reg["jgeo/2"] = jsonSrc(`{"type":"object","properties":{"lat":{"type":"integer"}}}`)
	jaddr2 := reg["jaddr/1"]
	jaddr2.References = []Reference{{Name: "geo.json", Subject: "jgeo", Version: 2}}
	reg["jaddr/2"] = jaddr2
	jorder2 := jsonOrder
	jorder2.References = []Reference{{Name: "address.json", Subject: "jaddr", Version: 2}}
	why = Check(Backward, mustParse(t, jorder2, reg.resolve), []Schema{j})
	if len(why) == 0 || !strings.Contains(strings.Join(why, "; "), "#/properties/to/properties/geo/properties/lat") {
		t.Errorf("changed referenced JSON schema: %q", why)
	}

	// Refusals: missing, cyclic, of another format, a type no reference defines.
	reg["cyc-a/1"] = Source{Format: Avro, Text: `"int"`, References: []Reference{{Name: "B", Subject: "cyc-b", Version: 1}}}
	reg["cyc-b/1"] = Source{Format: Avro, Text: `"int"`, References: []Reference{{Name: "A", Subject: "cyc-a", Version: 1}}}
	for _, tc := range []struct {
		src  Source
		want string
	}{
		{Source{Format: Avro, Text: `"com.acme.Nope"`, References: []Reference{{Name: "com.acme.Nope", Subject: "nope", Version: 1}}}, "not found"},
		{Source{Format: Avro, Text: `"int"`, References: []Reference{{Name: "A", Subject: "cyc-a", Version: 1}}}, "cycle"},
		{Source{Format: JSON, Text: `{"$ref":"geo.json"}`, References: []Reference{{Name: "geo.json", Subject: "geo", Version: 1}}}, "is AVRO, not JSON"},
		{Source{Format: Avro, Text: `"com.acme.Other"`, References: []Reference{{Name: "com.acme.Other", Subject: "geo", Version: 1}}}, "com.acme.Other"},
	} {
		_, err := Parse(tc.src, reg.resolve)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q refs %v) = %v, want ErrInvalid mentioning %q", tc.src.Text, tc.src.References, err, tc.want)
		}
	}
	if _, err := Parse(avroOrder, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("references without a resolver: %v", err)
	}
}

func TestHostileInput(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, 5000) + `"int"` + strings.Repeat("}", 5000)
	deepJSON := strings.Repeat(`{"items":`, 5000) + `true` + strings.Repeat("}", 5000)
	deepProto := "syntax = \"proto3\";\n" + strings.Repeat("message M {\n", 3000) + strings.Repeat("}\n", 3000)
	huge := `{"type":"record","name":"r","doc":"` + strings.Repeat("x", MaxTextLen) + `","fields":[]}`
	// A chain of 150 references, each the next's.
	chain := subjects{}
	for i := 1; i <= 150; i++ {
		src := Source{Format: JSON, Text: `true`}
		if i < 150 {
			src.References = []Reference{{Name: fmt.Sprintf("s%d.json", i+1), Subject: fmt.Sprintf("s%d", i+1), Version: 1}}
		}
		chain[fmt.Sprintf("s%d/1", i)] = src
	}
	self := subjects{"me/1": {Format: Protobuf, Text: `syntax = "proto3"; import "me.proto";`, References: []Reference{{Name: "me.proto", Subject: "me", Version: 1}}}}
	for _, tc := range []struct {
		name    string
		src     Source
		resolve Resolver
		want    string
	}{
		{"deep avro", avroSrc(deep), nil, "nested deeper"},
		{"deep json", jsonSrc(deepJSON), nil, "nested deeper"},
		{"deep brackets in a string are fine but the rest is not JSON", jsonSrc(`"` + strings.Repeat("[", 10000) + `"`), nil, "a string"},
		{"huge", avroSrc(huge), nil, "over the limit"},
		{"huge exponents", jsonSrc(`{"properties":{` + strings.Repeat(`"p":{"maximum":1e999999},`, 200) + `"q":{}}}`), nil, "exponent out of range"},
		{"long numbers", jsonSrc(`{"maximum":1` + strings.Repeat("0", 100000) + `}`), nil, "longer than 100 characters"},
		{"avro default", avroSrc(`{"type":"record","name":"r","fields":[{"name":"a","type":"double","default":1e-999999}]}`), nil, "exponent out of range"},
		{"reference chain", Source{Format: JSON, Text: `true`, References: []Reference{{Name: "s1.json", Subject: "s1", Version: 1}}}, chain.resolve, "more than 100 references"},
		{"import itself", Source{Format: Protobuf, Text: `syntax = "proto3";`, References: []Reference{{Name: "me.proto", Subject: "me", Version: 1}}}, self.resolve, "cycle"},
	} {
		within(t, 20*time.Second, tc.name, func() {
			_, err := Parse(tc.src, tc.resolve)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %.200v, want ErrInvalid mentioning %q", tc.name, err, tc.want)
			}
		})
	}
	within(t, 20*time.Second, "deep proto", func() {
		if _, err := Parse(protoSrc(deepProto), nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "schema.proto:202:11: nested deeper") {
			t.Errorf("deep proto: %v", err)
		}
		deepOption := "syntax = \"proto2\";\nimport \"google/protobuf/descriptor.proto\";\nextend google.protobuf.MessageOptions { optional M m = 5000; }\nmessage M { optional M m = 1; }\nmessage A { option (m) = " +
			strings.Repeat("{ m: ", 100000) + strings.Repeat("}", 100000) + "; }"
		if _, err := Parse(protoSrc(deepOption), nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nested deeper") {
			t.Errorf("deep option value: %.200v", err)
		}
		// Braces in strings and comments do not count.
		ok := "syntax = \"proto3\";\n// " + strings.Repeat("{", 1000) + "\n/* " + strings.Repeat("(", 1000) + " */\nmessage A { string s = 1 [json_name = \"" + strings.Repeat("[", 1000) + "\"]; }"
		if _, err := Parse(protoSrc(ok), nil); err != nil {
			t.Errorf("brackets in comments and strings: %v", err)
		}
	})
	// A recursive JSON Schema and a recursive Avro record compare in time.
	recJSON := mustParse(t, jsonSrc(`{"definitions":{"n":{"type":"object","properties":{"next":{"$ref":"#/definitions/n"},"v":{"type":"integer"}}}},"$ref":"#/definitions/n"}`), nil)
	recJSON2 := mustParse(t, jsonSrc(`{"definitions":{"n":{"type":"object","properties":{"next":{"$ref":"#/definitions/n"},"v":{"type":"string"}}}},"$ref":"#/definitions/n"}`), nil)
	loop := mustParse(t, jsonSrc(`{"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"$ref":"#/definitions/a"}},"properties":{"x":{"$ref":"#/definitions/a"}}}`), nil)
	recAvro := mustParse(t, avroSrc(`{"type":"record","name":"n","fields":[{"name":"next","type":["null","n"]},{"name":"v","type":"int"}]}`), nil)
	recAvro2 := mustParse(t, avroSrc(`{"type":"record","name":"n","fields":[{"name":"next","type":["null","n"]},{"name":"v","type":"string"}]}`), nil)
	// Two $ref cycles of coprime lengths make the walk the product of
	// their sizes, deep and wide: the comparison gives up with a reason,
	// in time.
	cycle := func(n int) Schema {
		var b strings.Builder
		b.WriteString(`{"$ref":"#/definitions/d0","definitions":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{"next":{"$ref":"#/definitions/d%d"},"v":{"type":"integer","maximum":%d}}}`, i, (i+1)%n, i)
		}
		b.WriteString("}}")
		return mustParse(t, jsonSrc(b.String()), nil)
	}
	big1, big2 := cycle(1000), cycle(1001)
	// wide: every node refers to the next ones from 5 properties.
	wide := func(n int, extra string) Schema {
		var b strings.Builder
		b.WriteString(`{"$ref":"#/definitions/d0","definitions":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"d%d":{"type":"object",%s"properties":{`, i, extra)
			for j := range 5 {
				if j > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"p%d":{"$ref":"#/definitions/d%d"}`, j, (i*7+1+j*13)%n)
			}
			b.WriteString("}}")
		}
		b.WriteString("}}")
		return mustParse(t, jsonSrc(b.String()), nil)
	}
	wide1, wide2 := wide(331, ""), wide(337, "")
	// heavy: and every node has a large enum and allOf to compare.
	var values []string
	for i := range 1000 {
		values = append(values, fmt.Sprint(i))
	}
	enum := `"enum":[` + strings.Join(values, ",") + `],"allOf":[{"enum":[` + strings.Join(values, ",") + `]}],`
	heavy1, heavy2 := wide(31, enum), wide(37, enum)
	within(t, 20*time.Second, "product of $ref cycles", func() {
		why := Check(Backward, big2, []Schema{big1})
		if len(why) == 0 || !strings.Contains(why[len(why)-1], "nested too deeply to compare") {
			t.Errorf("product of $ref cycles: %d reasons, last %.300q", len(why), why[len(why)-1:])
		}
		why = Check(Backward, heavy2, []Schema{heavy1})
		if len(why) == 0 || !strings.Contains(strings.Join(why, "\n"), "too large to compare") {
			t.Errorf("heavy product of $ref cycles: %d reasons, last %.300q", len(why), why[len(why)-1:])
		}
		why = Check(Backward, wide2, []Schema{wide1})
		if len(why) == 0 || !strings.Contains(strings.Join(why, "\n"), "too large to compare") {
			t.Errorf("wide product of $ref cycles: %d reasons, last %.300q", len(why), why[len(why)-1:])
		}
	})
	within(t, 20*time.Second, "recursive schemas", func() {
		if why := Check(FullTransitive, recJSON2, []Schema{recJSON}); len(why) == 0 {
			t.Error("recursive JSON: integer to string passed")
		}
		Check(Full, loop, []Schema{recJSON})
		Check(Full, recJSON, []Schema{loop})
		if why := Check(Full, recAvro2, []Schema{recAvro}); len(why) == 0 {
			t.Error("recursive Avro: int to string passed")
		}
	})
}

// FuzzParse feeds Parse arbitrary texts of each format and checks that it
// returns a schema or an ErrInvalid, never panics, and that a schema it
// returns compares with itself as compatible at every level.
func FuzzParse(f *testing.F) {
	for _, s := range []struct {
		format string
		text   string
	}{
		{"AVRO", `{"type":"record","name":"sensor","namespace":"acme","fields":[{"name":"temp","type":"double","default":0},{"name":"tags","type":{"type":"array","items":"string"}},{"name":"kind","type":{"type":"enum","name":"K","symbols":["A","B"]}},{"name":"opt","type":["null","long"]}]}`},
		{"AVRO", `{"type":"map","values":{"type":"fixed","name":"f","size":4}}`},
		{"AVRO", `"string"`},
		{"JSON", `{"type":"object","properties":{"a":{"type":"string","maxLength":5},"b":{"enum":[1,2]},"c":{"type":"array","items":{"$ref":"#/definitions/x"}}},"required":["a"],"additionalProperties":false,"definitions":{"x":{"type":"integer","minimum":0}}}`},
		{"JSON", `true`},
		{"PROTOBUF", `syntax = "proto3"; package acme; message A { string a = 1; oneof o { int32 b = 2; bytes c = 3; } map<string, A> m = 4; enum E { X = 0; Y = 1; } E e = 5; }`},
		{"PROTOBUF", `syntax = "proto2"; message B { required sint64 x = 1; repeated fixed32 y = 2; }`},
	} {
		f.Add(s.format, s.text)
	}
	f.Fuzz(func(t *testing.T, format, text string) {
		if len(text) > 1<<16 {
			return
		}
		ft, err := ParseFormat(format)
		if err != nil {
			return
		}
		s, err := Parse(Source{Format: ft, Text: text}, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if why := Check(FullTransitive, s, []Schema{s}); len(why) != 0 {
			t.Fatalf("a schema is incompatible with itself: %q", why)
		}
	})
}

// TestProtobufSerialized parses a schema and a reference given as
// base64-encoded FileDescriptorProtos, as confluent-kafka-python registers
// them: they link like .proto texts and have the same canonical form.
func TestProtobufSerialized(t *testing.T) {
	serialize := func(text, name string, resolve Resolver, refs ...Reference) string {
		t.Helper()
		p := mustParse(t, Source{Format: Protobuf, Text: text, References: refs}, resolve).(*protoSchema)
		fdp := protodesc.ToFileDescriptorProto(p.file)
		fdp.Name = proto.String(name)
		b, err := proto.Marshal(fdp)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	geoText := `syntax = "proto3"; package acme; message Geo { double lat = 1; }`
	orderText := `syntax = "proto3"; package acme; import "acme/geo.proto"; message Order { Geo at = 1; string id = 2; }`
	ref := Reference{Name: "acme/geo.proto", Subject: "geo", Version: 1}
	text := subjects{"geo/1": protoSrc(geoText)}
	textOrder := mustParse(t, Source{Format: Protobuf, Text: orderText, References: []Reference{ref}}, text.resolve)

	b64 := subjects{"geo/1": protoSrc(serialize(geoText, "acme/geo.proto", nil))}
	orderB64 := serialize(orderText, "whatever.proto", text.resolve, ref)
	for name, reg := range map[string]subjects{"base64 reference": b64, "text reference": text} {
		got := mustParse(t, Source{Format: Protobuf, Text: orderB64, References: []Reference{ref}}, reg.resolve).(*protoSchema)
		if got.Canonical() != textOrder.Canonical() {
			t.Errorf("%s: the base64 form's canonical form differs from the text's", name)
		}
		if f := got.file.Messages().ByName("Order").Fields().ByName("at"); f == nil || f.Message().FullName() != "acme.Geo" {
			t.Errorf("%s: Order.at not linked to acme.Geo", name)
		}
		if why := Check(Full, got, []Schema{textOrder}); why != nil {
			t.Errorf("%s: %q", name, why)
		}
	}
	// A base64 descriptor that does not link is invalid like a bad text.
	bad := serialize(`syntax = "proto3"; message A { string a = 1; }`, "x.proto", nil)
	p := mustParse(t, protoSrc(bad), nil).(*protoSchema)
	fdp := protodesc.ToFileDescriptorProto(p.file)
	fdp.MessageType[0].Field[0].TypeName = proto.String(".acme.Nope")
	fdp.MessageType[0].Field[0].Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	b, _ := proto.Marshal(fdp)
	if _, err := Parse(protoSrc(base64.StdEncoding.EncodeToString(b)), nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "acme.Nope") {
		t.Errorf("unlinkable descriptor: %v", err)
	}
}

// TestJSONRefNames resolves $refs to references the ways clients name
// them: relative, relative to the schema's own $id, and absolute.
func TestJSONRefNames(t *testing.T) {
	reg := subjects{"addr/1": jsonSrc(`{"type":"object","properties":{"street":{"type":"string"}},"required":["street"]}`)}
	addr := `{"type":"object","properties":{"street":{"type":"string"}},"required":["street"]}`
	for _, tc := range []struct{ text, name, inline string }{
		{`{"properties":{"to":{"$ref":"address.json"}}}`, "address.json", addr},
		{`{"$id":"https://acme.com/schemas/order.json","properties":{"to":{"$ref":"address.json"}}}`, "address.json", addr},
		{`{"properties":{"to":{"$ref":"https://acme.com/schemas/address.json"}}}`, "https://acme.com/schemas/address.json", addr},
		{`{"properties":{"to":{"$ref":"address.json#/properties/street"}}}`, "address.json", `{"type":"string"}`},
	} {
		s, err := Parse(Source{Format: JSON, Text: tc.text, References: []Reference{{Name: tc.name, Subject: "addr", Version: 1}}}, reg.resolve)
		if err != nil {
			t.Errorf("%s: %v", tc.text, err)
			continue
		}
		if err := s.(*jsonSchema).compiled.Validate(map[string]any{"to": map[string]any{"street": 5}}); err == nil {
			t.Errorf("%s: the referenced schema was not applied", tc.text)
		}
		// The compatibility walk follows the same $ref: the schema with
		// the reference is the schema with it written inline.
		inline := mustParse(t, jsonSrc(`{"properties":{"to":`+tc.inline+`}}`), nil)
		if why := Check(Full, s, []Schema{inline}); why != nil {
			t.Errorf("%s: not the same as inline: %q", tc.text, why)
		}
	}
}
