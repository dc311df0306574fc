package schema

import (
	"fmt"
	"strings"
	"testing"
)

func countFields(f *Field) int {
	if f == nil {
		return 0
	}
	n := 1 + countFields(f.Elem)
	for _, c := range f.Fields {
		n += countFields(c)
	}
	return n
}

// TestShapeBudgets: JSON Schema definitions and Protobuf messages reused
// level after level describe 2^40 fields in a few lines; their Shapes
// stop at the budget (plus a KindJSON leaf for each field of the structs
// open when it ran out), quickly.
func TestShapeBudgets(t *testing.T) {
	const levels = 40
	var defs []string
	defs = append(defs, `"D0":{"type":"object","properties":{"v":{"type":"integer"}}}`)
	for i := 1; i <= levels; i++ {
		defs = append(defs, fmt.Sprintf(`"D%d":{"type":"object","properties":{"a":{"$ref":"#/definitions/D%d"},"b":{"$ref":"#/definitions/D%d"}}}`, i, i-1, i-1))
	}
	js := jsonOf(t, fmt.Sprintf(`{"$ref":"#/definitions/D%d","definitions":{%s}}`, levels, strings.Join(defs, ",")), nil)

	var proto strings.Builder
	proto.WriteString("syntax = \"proto3\";\n")
	fmt.Fprintf(&proto, "message M%d { M%d a = 1; M%d b = 2; }\n", levels, levels-1, levels-1)
	for i := levels - 1; i >= 1; i-- {
		fmt.Fprintf(&proto, "message M%d { M%d a = 1; M%d b = 2; }\n", i, i-1, i-1)
	}
	proto.WriteString("message M0 { int32 v = 1; }\n")
	ps := protoOf(t, proto.String())

	for _, s := range []Schema{js, ps} {
		sh := s.Shape()
		if sh == nil || sh.Kind != KindStruct {
			t.Fatalf("%s: shape %v", s.Format(), sh)
		}
		if n := countFields(sh); n > 3*maxShapeFields {
			t.Errorf("%s: shape of %d fields", s.Format(), n)
		}
	}
}
