package schema

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
)

// Until parsing lands (helper A), tests build the concrete schemas the
// way Parse will fill them.

func avroOf(t testing.TB, text string) *avroSchema {
	t.Helper()
	s, err := avro.Parse(text)
	if err != nil {
		t.Fatalf("avro schema: %v", err)
	}
	return &avroSchema{src: Source{Format: Avro, Text: text}, s: s}
}

func jsonDoc(t testing.TB, text string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("json schema: %v", err)
	}
	return v
}

func jsonOf(t testing.TB, text string, refs map[string]string) *jsonSchema {
	t.Helper()
	s := &jsonSchema{src: Source{Format: JSON, Text: text}, doc: jsonDoc(t, text), refs: map[string]any{}}
	for name, r := range refs {
		s.refs[name] = jsonDoc(t, r)
	}
	return s
}

func protoOf(t testing.TB, text string) *protoSchema {
	t.Helper()
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"test.proto": text}),
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(context.Background(), "test.proto")
	if err != nil {
		t.Fatalf("proto schema: %v", err)
	}
	return &protoSchema{src: Source{Format: Protobuf, Text: text}, file: files[0]}
}

// shapeString prints a Field tree compactly: name:kind, structs in
// braces, list and map elements in brackets.
func shapeString(f *Field) string {
	if f == nil {
		return "<nil>"
	}
	var b strings.Builder
	writeShape(&b, f)
	return b.String()
}

var kindNames = map[Kind]string{
	KindStruct: "struct", KindList: "list", KindMap: "map", KindBool: "bool", KindInt32: "int32",
	KindInt64: "int64", KindFloat32: "float32", KindFloat64: "float64", KindString: "string",
	KindBinary: "binary", KindTimestamp: "timestamp", KindDate: "date", KindJSON: "json",
}

func writeShape(b *strings.Builder, f *Field) {
	b.WriteString(f.Name + ":" + kindNames[f.Kind])
	switch f.Kind {
	case KindStruct:
		b.WriteString("{")
		for i, c := range f.Fields {
			if i > 0 {
				b.WriteString(" ")
			}
			writeShape(b, c)
		}
		b.WriteString("}")
	case KindList, KindMap:
		b.WriteString("[")
		writeShape(b, f.Elem)
		b.WriteString("]")
	}
}
