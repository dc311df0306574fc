package entry

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// capture is a Writer that keeps references to what it is given, without
// copying, so that a test sees any scratch overwritten during one Append.
type capture struct{ fields [][]byte }

func (c *capture) Bulk(b []byte)   { c.fields = append(c.fields, b) }
func (c *capture) String(s string) { c.fields = append(c.fields, []byte(s)) }

// encode runs Prepare and Append and returns copies of the fields written,
// checking that Prepare predicted the number of pairs.
func encode(t testing.TB, e *Encoder, r *record.Record) [][]byte {
	t.Helper()
	var c capture
	pairs := e.Prepare(r)
	e.Append(&c)
	if len(c.fields) != 2*pairs {
		t.Fatalf("Prepare said %d pairs, Append wrote %d fields", pairs, len(c.fields))
	}
	out := make([][]byte, len(c.fields))
	for i, f := range c.fields {
		out[i] = bytes.Clone(f)
		if out[i] == nil {
			out[i] = []byte{}
		}
	}
	return out
}

func decode(d *Decoder, fields [][]byte, rec *record.Record) error {
	d.Begin()
	for i := 0; i+1 < len(fields); i += 2 {
		d.Field(fields[i], fields[i+1])
	}
	return d.Finish(rec)
}

// sameRecord compares everything the encoding must preserve, nil-ness included.
func sameRecord(a, b *record.Record) error {
	if a.Timestamp != b.Timestamp {
		return fmt.Errorf("timestamp %d != %d", a.Timestamp, b.Timestamp)
	}
	if err := sameBytes("key", a.Key, b.Key); err != nil {
		return err
	}
	if err := sameBytes("value", a.Value, b.Value); err != nil {
		return err
	}
	if len(a.Headers) != len(b.Headers) {
		return fmt.Errorf("%d headers != %d", len(a.Headers), len(b.Headers))
	}
	for i := range a.Headers {
		if !bytes.Equal(a.Headers[i].Key, b.Headers[i].Key) {
			return fmt.Errorf("header %d name %q != %q", i, a.Headers[i].Key, b.Headers[i].Key)
		}
		if err := sameBytes(fmt.Sprintf("header %d value", i), a.Headers[i].Value, b.Headers[i].Value); err != nil {
			return err
		}
	}
	return nil
}

func sameBytes(what string, a, b []byte) error {
	if (a == nil) != (b == nil) {
		return fmt.Errorf("%s: nil %v != nil %v", what, a == nil, b == nil)
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("%s: %q != %q", what, a, b)
	}
	return nil
}

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func TestEncodeFields(t *testing.T) {
	bin := []byte{0, 0xff, '{', '"', 0x80}
	tests := []struct {
		name string
		rec  record.Record
		want []string // alternating field names and values
	}{
		{"null key null value", record.Record{Timestamp: 5}, []string{"__ts", "5"}},
		{"empty key", record.Record{Timestamp: -7, Key: []byte{}}, []string{"__ts", "-7", "__key", ""}},
		{"binary key", record.Record{Key: bin}, []string{"__ts", "0", "__key", string(bin)}},
		{"empty value", record.Record{Value: []byte{}}, []string{"__ts", "0", "__value", ""}},
		{"binary value", record.Record{Value: bin}, []string{"__ts", "0", "__value", string(bin)}},
		{"min timestamp", record.Record{Timestamp: -1 << 63}, []string{"__ts", "-9223372036854775808"}},
		{
			"headers",
			record.Record{Timestamp: 1, Headers: []record.Header{
				{Key: []byte("a"), Value: []byte("1")},
				{Key: []byte("a"), Value: []byte("2")},
				{Key: []byte("n"), Value: nil},
				{Key: []byte("e"), Value: []byte{}},
				{Key: []byte{0, '.', 0xfe}, Value: bin},
				{Key: []byte{}, Value: nil},
			}},
			[]string{
				"__ts", "1",
				"__header.a", "1",
				"__header.a", "2",
				"__hnull.n", "",
				"__header.e", "",
				"__header.\x00.\xfe", string(bin),
				"__hnull.", "",
			},
		},
		{
			"everything flattened",
			record.Record{
				Timestamp: 1700000000000,
				Key:       []byte("k"),
				Value:     []byte(`{"a":1,"b":"x","c":{"d": [1, 2]}}`),
				Headers:   []record.Header{{Key: []byte("h"), Value: []byte("v")}},
			},
			[]string{
				"__ts", "1700000000000", "__key", "k", "__header.h", "v",
				"a", "1", "b", `"x"`, "c", `{"d": [1, 2]}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Encoder
			got := encode(t, &e, &tt.rec)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i := range got {
				if string(got[i]) != tt.want[i] {
					t.Fatalf("field %d: got %q, want %q (all: %q)", i, got[i], tt.want[i], got)
				}
			}
			var d Decoder
			var back record.Record
			if err := decode(&d, got, &back); err != nil {
				t.Fatal(err)
			}
			if err := sameRecord(&tt.rec, &back); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFlatten(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"m%d":%d`, i, i)
		}
		b.WriteByte('}')
		return b.String()
	}
	tests := []struct {
		value string
		want  []string // member name/value pairs; nil = stored in __value
	}{
		{`{"a":1,"b":"x","c":{"d": [1, 2]}}`, []string{"a", "1", "b", `"x"`, "c", `{"d": [1, 2]}`}},
		{`{"a":12.50}`, []string{"a", "12.50"}},
		{`{"":null}`, []string{"", "null"}},
		{`{"_x":true,"x_":false}`, []string{"_x", "true", "x_", "false"}},
		{`{"é":"ü","a":[ ]}`, []string{"é", `"ü"`, "a", "[ ]"}},
		{`{"a":"\u00e9\n\"","b":-0.5e+10,"c":{ "x" : [ 1 , {} ] }}`, []string{"a", `"\u00e9\n\""`, "b", "-0.5e+10", "c", `{ "x" : [ 1 , {} ] }`}},
		{`{"a":` + nested(10000) + `}`, []string{"a", nested(10000)}},
		{many(1000), nil}, // checked below: 1000 members flatten
		{many(1001), nil},

		// Whitespace outside member values: see TestFlattenWhitespace.
		{`{}`, nil},
		{`{"a":1,"a":2}`, nil},
		{`{"a\u0062":1}`, nil},
		{`{"a\"":1}`, nil},
		{`{"__x":1}`, nil},
		{`{"__":1}`, nil},
		{`{"a":1,"__value":2}`, nil},
		{`[1,2]`, nil},
		{`12`, nil},
		{`"s"`, nil},
		{`null`, nil},
		{`{"a":1}x`, nil},
		{`{"a":1}}`, nil},
		{`{"a":1,}`, nil},
		{`{"a":}`, nil},
		{`{"a"}`, nil},
		{`{"a":01}`, nil},
		{`{"a":1.}`, nil},
		{`{"a":.5}`, nil},
		{`{"a":+1}`, nil},
		{`{"a":1e}`, nil},
		{`{"a":tru}`, nil},
		{`{"a":nul}`, nil},
		{`{"a":[1,]}`, nil},
		{`{"a":[1 2]}`, nil},
		{`{"a":{"b":1,}}`, nil},
		{`{"a":{"b" 1}}`, nil},
		{`{"a":{1:2}}`, nil},
		{`{"a":[}`, nil},
		{`{"a":{]}`, nil},
		{`{"a":"\x"}`, nil},
		{`{"a":"\u12g4"}`, nil},
		{"{\"a\":\"\t\"}", nil},
		{"{\"a\":\"\xff\"}", nil},
		{"{\"\xc3\":1}", nil},
		{"{\"a\":\"\xed\xa0\x80\"}", nil}, // UTF-8-encoded surrogate
		{`{"a":"unterminated}`, nil},
		{`{"a":` + strings.Repeat("[", 10000) + `}`, nil},
		{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), nil},
		{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), nil}, // ok below
	}
	for _, tt := range tests {
		name := tt.value
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			rec := record.Record{Value: []byte(tt.value)}
			var e Encoder
			got := encode(t, &e, &rec)[2:] // drop __ts
			want := tt.want
			switch tt.value {
			case many(1000):
				want = make([]string, 0, 2000)
				for i := range 1000 {
					want = append(want, fmt.Sprintf("m%d", i), fmt.Sprint(i))
				}
			case strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000):
				want = []string{"a", strings.Repeat(`{"a":`, 9999) + "1" + strings.Repeat("}", 9999)}
			}
			if want == nil {
				want = []string{"__value", tt.value}
			}
			if len(got) != len(want) {
				t.Fatalf("got %d fields, want %d", len(got), len(want))
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
		})
	}
}

func TestEncoderReuse(t *testing.T) {
	// Scratch and member lists carry over between records; results must not.
	recs := []record.Record{
		{Timestamp: 1, Value: []byte(`{"a":1,"b":2}`), Headers: []record.Header{{Key: []byte("long header name"), Value: []byte("v")}}},
		{Timestamp: 2, Value: []byte("plain"), Headers: []record.Header{{Key: []byte("x")}}},
		{Timestamp: 3, Key: []byte{}, Value: nil},
		{Timestamp: 4, Value: []byte(`{"c":3}`), Headers: []record.Header{{Key: []byte(strings.Repeat("h", 100000)), Value: []byte{}}}},
		{Timestamp: 5, Value: []byte(`{"c":3}`)},
	}
	var e Encoder
	var d Decoder
	got := make([]record.Record, len(recs))
	for i := range recs {
		if err := decode(&d, encode(t, &e, &recs[i]), &got[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Every record decoded since the last Reset must still be intact.
	for i := range recs {
		if err := sameRecord(&recs[i], &got[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

func TestAppendWithoutPrepare(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var e Encoder
	e.Append(&capture{})
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
		want   string
	}{
		{"missing ts", []string{"__key", "k"}, "missing field __ts"},
		{"bad ts", []string{"__ts", "1x"}, "bad timestamp"},
		{"empty ts", []string{"__ts", ""}, "bad timestamp"},
		{"ts overflow", []string{"__ts", "9223372036854775808"}, "bad timestamp"},
		{"ts underflow", []string{"__ts", "-9223372036854775809"}, "bad timestamp"},
		{"duplicate ts", []string{"__ts", "1", "__ts", "1"}, "duplicate field __ts"},
		{"duplicate key", []string{"__ts", "1", "__key", "", "__key", ""}, "duplicate field __key"},
		{"unknown field", []string{"__ts", "1", "__bogus", "x"}, `unknown field "__bogus"`},
		{"header prefix only", []string{"__ts", "1", "__header", "x"}, `unknown field "__header"`},
		{"value twice", []string{"__ts", "1", "__value", "a", "__value", "b"}, "__value"},
		{"member after value", []string{"__ts", "1", "__value", "a", "m", "1"}, "__value"},
		{"value after member", []string{"__ts", "1", "m", "1", "__value", "a"}, "__value"},
		{"null header with value", []string{"__ts", "1", "__hnull.h", "x"}, "has a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fields := make([][]byte, len(tt.fields))
			for i, f := range tt.fields {
				fields[i] = []byte(f)
			}
			var d Decoder
			var rec record.Record
			err := decode(&d, fields, &rec)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrMalformed mentioning %q", err, tt.want)
			}
			// The decoder is usable again after an error.
			if err := decode(&d, [][]byte{[]byte("__ts"), []byte("3"), []byte("a"), []byte("1")}, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Timestamp != 3 || string(rec.Value) != `{"a":1}` {
				t.Fatalf("after error: got %+v", rec)
			}
		})
	}
}

func TestDecodeNilFieldValues(t *testing.T) {
	// Some clients hand out nil for an empty bulk string; present fields
	// must still decode as empty, not null.
	var d Decoder
	d.Begin()
	d.Field([]byte("__ts"), []byte("0"))
	d.Field([]byte("__key"), nil)
	d.Field([]byte("__header.h"), nil)
	d.Field([]byte("__value"), nil)
	var rec record.Record
	if err := d.Finish(&rec); err != nil {
		t.Fatal(err)
	}
	want := record.Record{Key: []byte{}, Value: []byte{}, Headers: []record.Header{{Key: []byte("h"), Value: []byte{}}}}
	if err := sameRecord(&want, &rec); err != nil {
		t.Fatal(err)
	}
}

func TestDecodedSlicesAreCapped(t *testing.T) {
	var e Encoder
	var d Decoder
	r1 := record.Record{Value: []byte(`{"a":1}`), Headers: []record.Header{{Key: []byte("x"), Value: []byte("1")}}}
	r2 := record.Record{Value: []byte(`{"b":2}`), Headers: []record.Header{{Key: []byte("y"), Value: []byte("2")}}}
	var g1, g2 record.Record
	if err := decode(&d, encode(t, &e, &r1), &g1); err != nil {
		t.Fatal(err)
	}
	if err := decode(&d, encode(t, &e, &r2), &g2); err != nil {
		t.Fatal(err)
	}
	_ = append(g1.Value, 'X')
	_ = append(g1.Headers, record.Header{})
	if err := sameRecord(&r2, &g2); err != nil {
		t.Fatal(err)
	}
}

func TestParseInt(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "1700000000000", "999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807", "-9223372036854775808", "007"} {
		var want int64
		fmt.Sscan(s, &want)
		if got, ok := parseInt([]byte(s)); !ok || got != want {
			t.Errorf("parseInt(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "-", "+1", " 1", "1 ", "0x1", "9223372036854775808", "-9223372036854775809", "99999999999999999999"} {
		if _, ok := parseInt([]byte(s)); ok {
			t.Errorf("parseInt(%q) accepted", s)
		}
	}
}

func TestEncodedSize(t *testing.T) {
	small := EncodedSize(&record.Record{})
	big := EncodedSize(&record.Record{Key: make([]byte, 10), Value: make([]byte, 1000),
		Headers: []record.Header{{Key: []byte("h"), Value: make([]byte, 100)}}})
	if small <= 0 || big < small+1111 {
		t.Fatalf("EncodedSize: empty %d, big %d", small, big)
	}
}
