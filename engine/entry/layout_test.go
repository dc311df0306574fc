package entry

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// pyDoc is a document as Python's json.dumps writes it by default.
const pyDoc = `{"id": "s-0042", "ts": 1700000000123, "readings": {"temp": 21.5, "humidity": 40}, "tags": ["a", "b"]}`

// pyIndent is the same document with json.dumps(indent=2).
const pyIndent = "{\n  \"id\": \"s-0042\",\n  \"ts\": 1700000000123,\n  \"readings\": {\n    \"temp\": 21.5,\n" +
	"    \"humidity\": 40\n  },\n  \"tags\": [\n    \"a\",\n    \"b\"\n  ]\n}"

func TestFlattenWhitespace(t *testing.T) {
	pyMembers := []string{"id", `"s-0042"`, "ts", "1700000000123", "readings", `{"temp": 21.5, "humidity": 40}`, "tags", `["a", "b"]`}
	indentMembers := []string{"id", `"s-0042"`, "ts", "1700000000123",
		"readings", "{\n    \"temp\": 21.5,\n    \"humidity\": 40\n  }", "tags", "[\n    \"a\",\n    \"b\"\n  ]"}
	manyPy := func(n int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"m%d": %d`, i, i)
		}
		b.WriteByte('}')
		return b.String()
	}
	tests := []struct {
		name, value string
		ws          string   // expected __ws marker
		members     []string // expected member name/value pairs; nil = stored in __value
	}{
		// Each position on its own, uniform marker: A S F E T V B L.
		{"before {", ` {"a":1}`, "u....... ", []string{"a", "1"}},
		{"after {", `{ "a":1}`, "u.. ", []string{"a", "1"}},
		{"before :", `{"a" :1}`, "u...... ", []string{"a", "1"}},
		{"after :", `{"a": 1}`, "u ", []string{"a", "1"}},
		{"before }", `{"a":1 }`, "u... ", []string{"a", "1"}},
		{"after }", `{"a":1} `, "u.... ", []string{"a", "1"}},
		{"after ,", `{"a":1, "b":2}`, "u. ", []string{"a", "1", "b", "2"}},
		{"before ,", `{"a":1 ,"b":2}`, "u..... ", []string{"a", "1", "b", "2"}},
		{"everywhere", " \t{ \"a\" : 1 , \"b\" : 2 }\n", "u . . . .\n. . . \t", []string{"a", "1", "b", "2"}},

		{"python", pyDoc, "u . ", pyMembers},
		{"python newline", pyDoc + "\n", "u . ...\n", pyMembers},
		{"python one member", `{"a": [1, 2]}`, "u ", []string{"a", "[1, 2]"}},
		{"indent=2", pyIndent, "u .\n  .\n  .\n", indentMembers},
		{"indent=2 newline", pyIndent + "\n", "u .\n  .\n  .\n.\n", indentMembers},
		{"indent=2 one member", "{\n  \"a\": 1\n}", "u ..\n  .\n", []string{"a", "1"}},
		{"compact newline", "{\"a\":1,\"b\":2}\n", "u....\n", []string{"a", "1", "b", "2"}},
		{"crlf", "{\r\n  \"a\": 1,\r\n  \"b\": 2\r\n}\r\n", "u .\r\n  .\r\n  .\r\n.\r\n", []string{"a", "1", "b", "2"}},
		{"tabs", "{\t\"a\"\t:\t1\t}", "u\t..\t.\t...\t", []string{"a", "1"}},
		{"nested whitespace kept", `{"a": {"b" : [ 1 ,2 ] }, "c": "x  y"}`, "u . ", []string{"a", `{"b" : [ 1 ,2 ] }`, "c", `"x  y"`}},
		{"python many", manyPy(1000), "u . ", nil}, // members checked below

		// Not the same runs around every member: the general form.
		{"mixed", `{"a": 1,"b":2}`, "g... ......", []string{"a", "1", "b", "2"}},
		{"mixed lead trail", " {\"a\" :1, \"b\":\n2}\t", "g .. ... ..\n..\t", []string{"a", "1", "b", "2"}},

		// Must not flatten.
		{"nbsp", "{\u00a0\"a\": 1}", "", nil},
		{"nbsp after", "{\"a\": 1}\u00a0", "", nil},
		{"form feed", "{\f\"a\": 1}", "", nil},
		{"vertical tab", "{\"a\":\v1}", "", nil},
		{"nul", "{\"a\": 1}\x00", "", nil},
		{"only spaces", "   ", "", nil},
		{"empty object", "{ }", "", nil},
		{"empty object newline", "{}\n", "", nil},
		{"trailing comma", `{"a": 1, }`, "", nil},
		{"missing colon", `{"a" 1}`, "", nil},
		{"two objects", `{"a": 1} {"b": 2}`, "", nil},
		{"extra brace", `{"a": 1} }`, "", nil},
		{"garbage after", "{\"a\": 1}\n x", "", nil},
		{"unclosed", `{"a": 1 `, "", nil},
		{"space in number", `{"a": 1 2}`, "", nil},
		{"invalid nested", `{"a": [1, ]}`, "", nil},
		{"duplicate", `{"a": 1, "a": 2}`, "", nil},
		{"reserved name", `{"b": 1, "__ws": "u"}`, "", nil},
		{"reserved name first", `{ "__x": 1}`, "", nil},
		{"escaped name", `{"a\n": 1}`, "", nil},
		{"too many", manyPy(1001), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := record.Record{Value: []byte(tt.value)}
			var e Encoder
			got := encode(t, &e, &rec)[2:] // drop __ts
			want := []string{"__value", tt.value}
			switch {
			case tt.name == "python many":
				want = []string{"__ws", tt.ws}
				for i := range 1000 {
					want = append(want, fmt.Sprintf("m%d", i), fmt.Sprint(i))
				}
			case tt.members != nil:
				want = append([]string{"__ws", tt.ws}, tt.members...)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d fields %.200q, want %d", len(got), got, len(want))
			}
			for i := range got {
				if string(got[i]) != want[i] {
					t.Fatalf("field %d: got %.60q, want %.60q", i, got[i], want[i])
				}
			}
			var d Decoder
			var back record.Record
			if err := decode(&d, append([][]byte{[]byte("__ts"), []byte("0")}, got...), &back); err != nil {
				t.Fatal(err)
			}
			if err := sameRecord(&rec, &back); err != nil {
				t.Fatal(err)
			}
			if string(got[0]) == fieldWS {
				if ref, err := refRebuild(got); err != nil || !bytes.Equal(ref, rec.Value) {
					t.Fatalf("doc.go's grammar rebuilds %.200q, %v", ref, err)
				}
			}
		})
	}
}

// TestFlattenWhitespaceNeverChangesAByte perturbs documents by inserting
// each byte value at every position: whatever the encoder chooses, the
// value must come back exactly.
func TestFlattenWhitespaceNeverChangesAByte(t *testing.T) {
	var e Encoder
	var d Decoder
	flat := 0
	for _, doc := range []string{pyDoc, `{"a": 1, "b": [1, 2]}`, "{\n  \"a\": 1\n}\n"} {
		for pos := 0; pos <= len(doc); pos++ {
			for _, c := range []byte{' ', '\t', '\n', '\r', '\f', '\v', 0, 0xa0, ',', ':', '"', '{', '}'} {
				v := []byte(doc[:pos] + string([]byte{c}) + doc[pos:])
				rec := record.Record{Value: v}
				fields := encode(t, &e, &rec)
				if string(fields[2]) == fieldWS {
					flat++
				}
				d.Reset()
				var back record.Record
				if err := decode(&d, fields, &back); err != nil {
					t.Fatalf("%q: %v", v, err)
				}
				if err := sameRecord(&rec, &back); err != nil {
					t.Fatalf("%q: %v", v, err)
				}
			}
		}
	}
	if flat < 100 {
		t.Fatalf("only %d perturbed documents flattened with __ws", flat)
	}
}

func TestDecodeLayoutErrors(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
		want   string
	}{
		{"empty marker", []string{"__ws", "", "a", "1"}, "bad layout"},
		{"unknown form", []string{"__ws", "x", "a", "1"}, "bad layout"},
		{"not whitespace", []string{"__ws", "u a", "a", "1"}, "bad layout"},
		{"nbsp", []string{"__ws", "u\u00a0", "a", "1"}, "bad layout"},
		{"form feed", []string{"__ws", "u\f", "a", "1"}, "bad layout"},
		{"nine uniform runs", []string{"__ws", "u........", "a", "1"}, "bad layout"},
		{"general too few", []string{"__ws", "g....", "a", "1"}, "runs"},
		{"general too few two members", []string{"__ws", "g.....", "a", "1", "b", "2"}, "runs"},
		{"general too many", []string{"__ws", "g......", "a", "1"}, "runs"},
		{"general empty", []string{"__ws", "g", "a", "1"}, "runs"},
		{"twice", []string{"__ws", "u ", "__ws", "u ", "a", "1"}, "__ws repeated"},
		{"after member", []string{"a", "1", "__ws", "u "}, "not before the members"},
		{"after value", []string{"__value", "x", "__ws", "u "}, "not before the members"},
		{"before value", []string{"__ws", "u ", "__value", "x"}, "next to another value field"},
		{"no members", []string{"__ws", "u "}, "without members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fields := [][]byte{[]byte("__ts"), []byte("1")}
			for _, f := range tt.fields {
				fields = append(fields, []byte(f))
			}
			var d Decoder
			var rec record.Record
			err := decode(&d, fields, &rec)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrMalformed mentioning %q", err, tt.want)
			}
			// The next entry decodes cleanly, its layout not inherited.
			if err := decode(&d, [][]byte{[]byte("__ts"), []byte("3"), []byte("a"), []byte("1")}, &rec); err != nil {
				t.Fatal(err)
			}
			if string(rec.Value) != `{"a":1}` {
				t.Fatalf("after error: got %q", rec.Value)
			}
		})
	}
}

func TestDecodeLayoutLenient(t *testing.T) {
	// Markers the encoder never writes but the grammar allows.
	tests := []struct {
		fields []string
		want   string
	}{
		{[]string{"__ws", "u", "a", "1"}, `{"a":1}`},
		{[]string{"__ws", "u.......", "a", "1", "b", "2"}, `{"a":1,"b":2}`},
		{[]string{"__ws", "u.  .\t", "a", "1"}, "{\t\"a\":1}"}, // S unused by one member
		{[]string{"__ws", "g.....", "a", "1"}, `{"a":1}`},
		{[]string{"__ws", "g\n. . . . .\n", "a", "1"}, "\n{ \"a\" : 1 }\n"},
	}
	for _, tt := range tests {
		fields := [][]byte{[]byte("__ts"), []byte("1")}
		for _, f := range tt.fields {
			fields = append(fields, []byte(f))
		}
		var d Decoder
		var rec record.Record
		if err := decode(&d, fields, &rec); err != nil || string(rec.Value) != tt.want {
			t.Errorf("%q: got %q, %v; want %q", tt.fields, rec.Value, err, tt.want)
		}
	}
}

// refRebuild rebuilds a flattened value from its fields (no __ts; __ws
// first when present) the way doc.go describes it, independently of the
// Decoder.
func refRebuild(fields [][]byte) ([]byte, error) {
	marker := []byte(nil)
	if len(fields) >= 2 && string(fields[0]) == fieldWS {
		marker, fields = fields[1], fields[2:]
	}
	n := len(fields) / 2
	if n == 0 {
		return nil, errors.New("no members")
	}
	// runs[0] = L, then N B A V per member, then T.
	runs := make([]string, 4*n+2)
	if marker != nil {
		if len(marker) == 0 {
			return nil, errors.New("empty marker")
		}
		parts := strings.Split(string(marker[1:]), ".")
		for _, p := range parts {
			if strings.Trim(p, " \t\r\n") != "" {
				return nil, fmt.Errorf("run %q", p)
			}
		}
		switch marker[0] {
		case 'u':
			if len(parts) > 8 {
				return nil, fmt.Errorf("%d uniform runs", len(parts))
			}
			slot := make([]string, 8)
			copy(slot, parts)
			a, s, f, e, tr, v, b, l := slot[0], slot[1], slot[2], slot[3], slot[4], slot[5], slot[6], slot[7]
			runs[0], runs[4*n+1] = l, tr
			for i := range n {
				runs[1+4*i], runs[2+4*i], runs[3+4*i], runs[4+4*i] = s, b, a, v
			}
			runs[1], runs[4*n] = f, e
		case 'g':
			if len(parts) != 4*n+2 {
				return nil, fmt.Errorf("%d general runs for %d members", len(parts), n)
			}
			copy(runs, parts)
		default:
			return nil, fmt.Errorf("form %q", marker[0])
		}
	}
	var b bytes.Buffer
	b.WriteString(runs[0])
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s\"%s\"%s:%s%s%s", runs[1+4*i], fields[2*i], runs[2+4*i], runs[3+4*i], fields[2*i+1], runs[4+4*i])
	}
	b.WriteByte('}')
	b.WriteString(runs[4*n+1])
	return b.Bytes(), nil
}
