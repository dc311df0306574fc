package schema

import (
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

const avroAll = `{"type":"record","name":"All","namespace":"t","fields":[
 {"name":"i","type":"int","doc":"an int"},
 {"name":"l","type":"long"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"b","type":"boolean"},
 {"name":"s","type":"string"},
 {"name":"raw","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
 {"name":"arr","type":{"type":"array","items":"long"}},
 {"name":"m","type":{"type":"map","values":"string"}},
 {"name":"opt","type":["null","string"]},
 {"name":"opt2","type":["int","null"]},
 {"name":"multi","type":["null","string","long"]},
 {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"inner","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},
 {"name":"again","type":"Inner"},
 {"name":"next","type":["null",{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}]}
]}`

func TestAvroShape(t *testing.T) {
	s := avroOf(t, avroAll)
	want := "All:struct{i:int32 l:int64 f:float32 d:float64 b:bool s:string raw:binary fx:binary e:string arr:list[element:int64] m:map[value:string] " +
		"opt:string opt2:int32 multi:json tsm:timestamp tsu:timestamp lts:timestamp day:date tm:int32 tu:int64 dec:string id:string " +
		"inner:struct{x:int32} again:struct{x:int32} next:struct{v:int32 next:json}}"
	if got := shapeString(s.Shape()); got != want {
		t.Fatalf("shape\n got %s\nwant %s", got, want)
	}
	if doc := s.Shape().Fields[0].Doc; doc != "an int" {
		t.Errorf("doc %q", doc)
	}
	for _, text := range []string{`"string"`, `{"type":"array","items":"int"}`, `["null","string"]`} {
		if sh := avroOf(t, text).Shape(); sh != nil {
			t.Errorf("%s: shape %s, want nil", text, shapeString(sh))
		}
		if _, err := avroOf(t, text).Decode([]byte{0}); err == nil {
			t.Errorf("%s: Decode of a non-record: no error", text)
		}
	}
}

func TestAvroDecodeAndJSON(t *testing.T) {
	s := avroOf(t, avroAll)
	ts := time.UnixMilli(1700000000123).UTC()
	in := map[string]any{
		"i": 7, "l": int64(-1 << 40), "f": float32(1.5), "d": 2.25, "b": true, "s": "h\"é",
		"raw": []byte{0, 1, 2}, "fx": [4]byte{9, 8, 7, 6}, "e": "GREEN", "arr": []any{int64(1), int64(2)},
		"m": map[string]any{"k": "v"}, "opt": map[string]any{"string": "x"}, "opt2": nil,
		"multi": map[string]any{"long": int64(5)},
		"tsm":   ts, "tsu": ts, "lts": ts, "day": time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		"tm": 3 * time.Second, "tu": 4 * time.Microsecond, "dec": big.NewRat(-12345, 100),
		"id": "0e0f6f5a-0c47-4c3e-9d2b-6b1a9b7c1d11", "inner": map[string]any{"x": 1}, "again": map[string]any{"x": 2},
		"next": map[string]any{"t.Node": map[string]any{"v": 1, "next": map[string]any{"t.Node": map[string]any{"v": 2, "next": nil}}}},
	}
	payload, err := avro.Marshal(s.s, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"i": int32(7), "l": int64(-1 << 40), "f": float32(1.5), "d": 2.25, "b": true, "s": "h\"é",
		"raw": []byte{0, 1, 2}, "fx": []byte{9, 8, 7, 6}, "e": "GREEN", "arr": []any{int64(1), int64(2)},
		"m": map[string]any{"k": "v"}, "opt": "x", "opt2": nil, "multi": "5",
		"tsm": int64(1700000000123000), "tsu": int64(1700000000123000), "lts": int64(1700000000123000), "day": int32(19754),
		"tm": int32(3000), "tu": int64(4), "dec": "-123.45", "id": "0e0f6f5a-0c47-4c3e-9d2b-6b1a9b7c1d11",
		"inner": map[string]any{"x": int32(1)}, "again": map[string]any{"x": int32(2)},
		"next": map[string]any{"v": int32(1), "next": `{"v":2,"next":null}`},
	}
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got.(map[string]any)[k], want[k]) {
				t.Errorf("%s: got %#v, want %#v", k, got.(map[string]any)[k], want[k])
			}
		}
	}
	js, err := s.JSON(payload)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"i":7,"l":-1099511627776,"f":1.5,"d":2.25,"b":true,"s":"h\"é","raw":"AAEC","fx":"CQgHBg==","e":"GREEN",` +
		`"arr":[1,2],"m":{"k":"v"},"opt":"x","opt2":null,"multi":5,"tsm":1700000000123,"tsu":1700000000123000,"lts":1700000000123,` +
		`"day":19754,"tm":3000,"tu":4,"dec":"-123.45","id":"0e0f6f5a-0c47-4c3e-9d2b-6b1a9b7c1d11","inner":{"x":1},"again":{"x":2},` +
		`"next":{"v":1,"next":{"v":2,"next":null}}}`
	if string(js) != wantJSON {
		t.Errorf("JSON\n got %s\nwant %s", js, wantJSON)
	}
	if !json.Valid(js) {
		t.Error("JSON is not valid")
	}
}

func TestAvroDecimalText(t *testing.T) {
	for _, c := range []struct {
		b     []byte
		scale int
		want  string
	}{
		{[]byte{0x01}, 2, "0.01"}, {[]byte{0xff}, 0, "-1"}, {[]byte{0xff}, 3, "-0.001"},
		{[]byte{0x30, 0x39}, 2, "123.45"}, {nil, 2, "0.00"}, {[]byte{0x80, 0x00}, 1, "-3276.8"},
	} {
		if got := decimalText(c.b, c.scale); got != c.want {
			t.Errorf("decimalText(%x, %d) = %s, want %s", c.b, c.scale, got, c.want)
		}
	}
}

// TestAvroBadPayloads: every malformed payload is an error, quickly and
// without a large allocation.
func TestAvroBadPayloads(t *testing.T) {
	s := avroOf(t, `{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":"null"}},
		{"name":"s","type":"string"},{"name":"u","type":["null","int"]},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}]}`)
	good, err := avro.Marshal(s.s, map[string]any{"a": []any{nil, nil}, "s": "x", "u": nil, "e": "A"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(good); err != nil {
		t.Fatalf("good payload: %v", err)
	}
	zig := func(v int64) []byte { return avroLong(nil, v) }
	cases := map[string][]byte{
		"empty":           {},
		"truncated":       good[:len(good)-1],
		"trailing":        append(append([]byte{}, good...), 0),
		"huge null array": append(zig(1<<62), 0),
		"huge string":     append(append([]byte{0}, zig(1<<40)...), 'x'),
		"negative length": append([]byte{0}, zig(-5)...),
		"union branch":    append(append(append([]byte{0}, zig(1)...), 'x'), zig(7)...),
		"enum symbol":     append(append(append([]byte{0}, zig(1)...), 'x', 0), zig(3)...),
		"overlong varint": {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"min block count": append(zig(-1<<63), 0),
	}
	for name, p := range cases {
		if _, err := s.Decode(p); err == nil {
			t.Errorf("%s: Decode: no error", name)
		}
		if _, err := s.JSON(p); err == nil {
			t.Errorf("%s: JSON: no error", name)
		}
	}
	// Deep recursion is refused, not followed to the end of the stack.
	list := avroOf(t, `{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}`)
	deep := append([]byte(strings.Repeat("\x02", 100000)), 0)
	if _, err := list.Decode(deep); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("deep value: %v", err)
	}
}

func avroLong(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}
