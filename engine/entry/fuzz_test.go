package entry

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/korvet/korvet/engine/record"
)

// Bits of FuzzRoundTrip's nullFlags.
const (
	nullKey       = 1 << iota // key is null
	nullValue                 // value is null (tombstone)
	nullHdrVal                // header value is null
	noHeaders                 // record has no headers
	twoHeaders                // header appears twice, second with a null value
	jsonWrapped               // value becomes {"f":value,"g":1}, to reach the flattener more often
	transactional             // record of a transactional batch (producer from ts)
	control                   // control record (with transactional; key and value not null)
)

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"a":1,"b":"x"}`), []byte("h"), []byte("v"), byte(0), int64(1700000000000))
	f.Add([]byte{}, []byte{}, []byte{}, []byte{}, byte(noHeaders), int64(-1))
	f.Add([]byte(nil), []byte("\x00\xff"), []byte("__header.x"), []byte(nil), byte(nullKey|nullHdrVal|twoHeaders), int64(-1<<63))
	f.Add([]byte("k"), []byte("1"), []byte("h"), []byte("v"), byte(jsonWrapped), int64(0))
	f.Add([]byte("k"), []byte("[1, 2]"), []byte("h"), []byte("v"), byte(jsonWrapped), int64(-2))
	f.Add([]byte("k"), []byte(`{"x": 1} `), []byte("h"), []byte("v"), byte(jsonWrapped|transactional), int64(-1))
	f.Add([]byte("k"), []byte(nil), []byte("h"), []byte("v"), byte(nullValue), int64(1<<63-1))
	f.Add([]byte("k"), []byte(`{"a":1}`), []byte("h"), []byte("v"), byte(transactional), int64(42))
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 5}, []byte("h"), []byte("v"), byte(transactional|control|noHeaders), int64(7))
	f.Add([]byte("k"), bytes.Repeat([]byte(`{"t": 21.5, "u": "c"} `), 20), []byte("h"), []byte("v"), byte(0), int64(1))
	f.Add([]byte("k"), sensorDoc(1), []byte("h"), []byte("v"), byte(0), int64(2))
	f.Add([]byte("k"), []byte(`{"a":"`+string(bytes.Repeat([]byte("ab"), 100))+`"}`), []byte("h"), []byte("v"), byte(0), int64(6))
	var e Encoder
	// The compressed form, without and with a dictionary, picked by the
	// timestamp's low bits: (ts&3) 1 is version 0, 2 is version 1.
	d1 := testDict(f, 1) // training is not deterministic: one dictionary for both sides
	zc := []*Compressor{nil, newCompressor(f, 0, nil), newCompressor(f, 1, d1)}
	d := Decoder{Dicts: testDicts(map[uint32][]byte{1: d1})}
	f.Fuzz(func(t *testing.T, key, value, hdrName, hdrVal []byte, nullFlags byte, ts int64) {
		e.Zstd = zc[min(ts&3, 2)]
		// The fuzzer never hands out nil; make nil vs empty explicit.
		if key == nil {
			key = []byte{}
		}
		if value == nil {
			value = []byte{}
		}
		if hdrName == nil {
			hdrName = []byte{}
		}
		if hdrVal == nil {
			hdrVal = []byte{}
		}
		r := record.Record{Timestamp: ts, Key: key, Value: value}
		switch {
		case nullFlags&jsonWrapped == 0:
		case ts >= 0:
			r.Value = append(append([]byte(`{"f":`), value...), `,"g":1}`...)
		case ts%2 == 0: // whitespace as Python writes it: a uniform __ws
			r.Value = append(append([]byte(`{"f": `), value...), `, "g": 1}`...)
		default: // irregular whitespace: a general __ws
			r.Value = append(append([]byte(" {\"f\" :\t"), value...), " ,\"g\":1\r\n}\n"...)
		}
		if nullFlags&nullKey != 0 {
			r.Key = nil
		}
		if nullFlags&nullValue != 0 {
			r.Value = nil
		}
		if nullFlags&noHeaders == 0 {
			h := record.Header{Key: hdrName, Value: hdrVal}
			if nullFlags&nullHdrVal != 0 {
				h.Value = nil
			}
			r.Headers = append(r.Headers, h)
			if nullFlags&twoHeaders != 0 {
				r.Headers = append(r.Headers, record.Header{Key: hdrName})
			}
		}
		want := record.Txn{ProducerID: -1}
		var fields [][]byte
		if nullFlags&transactional != 0 {
			want = record.Txn{ProducerID: ts & (1<<62 - 1), Epoch: int16(len(key) & 0x7fff), Control: nullFlags&control != 0}
			if want.Control {
				r.Key, r.Value = key, value
			}
			var c capture
			pairs := e.PrepareTxn(&r, AppendTxn(nil, want.ProducerID, want.Epoch), want.Control)
			e.Append(&c)
			if len(c.fields) != 2*pairs {
				t.Fatalf("PrepareTxn said %d pairs, Append wrote %d fields", pairs, len(c.fields))
			}
			for _, f := range c.fields {
				fields = append(fields, append([]byte{}, f...))
			}
		} else {
			fields = encode(t, &e, &r)
		}
		members, hasValue := 0, false
		for i := 0; i < len(fields); i += 2 {
			name := fields[i]
			switch {
			case string(name) == fieldWS:
			case string(name) == fieldValue || bytes.HasPrefix(name, []byte(prefixZstd)):
				if hasValue {
					t.Fatalf("two whole-value fields: %q", fields)
				}
				hasValue = true
			case !bytes.HasPrefix(name, []byte("__")):
				members++
			}
		}
		switch {
		case r.Value == nil && (members > 0 || hasValue):
			t.Fatalf("tombstone wrote a value field: %q", fields)
		case r.Value != nil && members > 0 == hasValue:
			t.Fatalf("value needs exactly one of __value, __zstd.<v> or members: %q", fields)
		}
		d.Reset()
		var back record.Record
		var txn record.Txn
		d.Begin()
		for i := 0; i+1 < len(fields); i += 2 {
			d.Field(fields[i], fields[i+1])
		}
		if err := d.FinishTxn(&back, &txn); err != nil {
			t.Fatalf("decode %q: %v", fields, err)
		}
		if txn != want {
			t.Fatalf("transaction of %q: %+v, want %+v", fields, txn, want)
		}
		if err := sameRecord(&r, &back); err != nil {
			t.Fatalf("round trip of %q: %v", fields, err)
		}
	})
}

func FuzzFlatten(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x","c":{"d": [1, 2]}}`, `{"a":1}`, `{}`, `{"a":1,"a":2}`, `{"a\n":1}`,
		`{"__a":1}`, `[1]`, `1`, `{"a":1} `, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}",
		`{"a":[[[[[]]]]],"b":{"c":{"d":null}}}`, `{"a":-0.0e-0,"b":true,"c":false}`,
		`{"a": 1, "b": [1, 2]}`, "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": 2\n  }\n}\n", "\r\n{\t\"a\" :1 ,\"b\":2 }\r\n",
		"{\u00a0\"a\": 1}", "{\"a\": 1}\f",
	} {
		f.Add([]byte(s))
	}
	var e Encoder
	var d Decoder
	f.Fuzz(func(t *testing.T, value []byte) {
		r := record.Record{Value: value}
		var c capture
		pairs := e.Prepare(&r)
		e.Append(&c)
		if len(c.fields) != 2*pairs {
			t.Fatalf("Prepare said %d pairs, Append wrote %d fields", pairs, len(c.fields))
		}
		fields := c.fields[2:] // drop __ts
		if len(fields) == 2 && string(fields[0]) == fieldValue {
			if !bytes.Equal(fields[1], value) {
				t.Fatalf("__value %q != %q", fields[1], value)
			}
		} else {
			// Flattened: doc.go's rebuild must give the input back.
			for i := 0; i < len(fields); i += 2 {
				if bytes.HasPrefix(fields[i], []byte("__")) && (i > 0 || string(fields[i]) != fieldWS) {
					t.Fatalf("member name %q starts with __", fields[i])
				}
			}
			rebuilt, err := refRebuild(fields)
			if err != nil || !bytes.Equal(rebuilt, value) {
				t.Fatalf("flattened %q rebuilds as %q, %v", value, rebuilt, err)
			}
			if !json.Valid(value) || !utf8.Valid(value) {
				t.Fatalf("flattened invalid JSON %q", value)
			}
		}
		// Whitespace outside strings never decides flattening: a valid
		// document flattens exactly when its compact form does.
		if json.Valid(value) && utf8.Valid(value) {
			var compact bytes.Buffer
			if err := json.Compact(&compact, value); err != nil {
				t.Fatal(err)
			}
			var fl flattener
			if flat := string(fields[0]) != fieldValue; fl.analyse(compact.Bytes()) != flat {
				t.Fatalf("%q flattened %v, its compact form %q the opposite", value, flat, compact.Bytes())
			}
		}
		// And the Decoder agrees, byte for byte.
		d.Reset()
		var back record.Record
		if err := decode(&d, c.fields, &back); err != nil || !bytes.Equal(back.Value, value) {
			t.Fatalf("decoded %q as %q, %v", value, back.Value, err)
		}
		// Differential check of the validator against encoding/json, which
		// accepts invalid UTF-8 but is otherwise strict RFC 8259.
		var fl flattener
		end := -1
		if len(value) > 0 {
			end = fl.value(value, 0)
		}
		mine := end == len(value)
		theirs := json.Valid(value) && utf8.Valid(value) && len(value) > 0 &&
			skipSpace(value, 0) == 0 && !isSpace(value[len(value)-1])
		if mine != theirs {
			t.Fatalf("validator says %v (end %d), encoding/json %v, for %q", mine, end, theirs, value)
		}
	})
}

// FuzzDecodeFields feeds the Decoder arbitrary fields, __ws markers among
// them: it must return a record or ErrMalformed, never panic, and a record
// it returns must survive a round trip through the Encoder.
func FuzzDecodeFields(f *testing.F) {
	for _, s := range []string{
		"__ts\x000\x00__ws\x00u . \x00a\x001\x00b\x002",
		"__ts\x000\x00__ws\x00g\n. . . . .\n\x00a\x00[1, 2]",
		"__ts\x000\x00__ws\x00g...\x00a\x001\x00b\x002",
		"__ts\x000\x00__ws\x00u.........\x00a\x001",
		"__ts\x000\x00a\x001\x00__ws\x00u ",
		"__ts\x000\x00__ws\x00u \x00__value\x00x",
		"__ts\x00-1\x00__key\x00k\x00__header.h\x00v\x00__ws\x00u .\n  .\n  .\n\x00a\x00\"x\"",
	} {
		f.Add([]byte(s))
	}
	var d Decoder
	var e Encoder
	f.Fuzz(func(t *testing.T, blob []byte) {
		fields := bytes.Split(blob, []byte{0})
		if len(fields)%2 != 0 {
			fields = fields[:len(fields)-1]
		}
		d.Reset()
		var rec record.Record
		if err := decode(&d, fields, &rec); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		onlyMembers := true
		for i := 4; i < len(fields); i += 2 {
			onlyMembers = onlyMembers && !bytes.HasPrefix(fields[i], []byte("__"))
		}
		if len(fields) >= 6 && string(fields[2]) == fieldWS && onlyMembers {
			// __ts, __ws, members: doc.go's grammar agrees.
			if ref, err := refRebuild(fields[2:]); err != nil || !bytes.Equal(ref, rec.Value) {
				t.Fatalf("decoded %q, doc.go's grammar %q, %v", rec.Value, ref, err)
			}
		}
		var back record.Record
		var d2 Decoder
		if err := decode(&d2, encode(t, &e, &rec), &back); err != nil {
			t.Fatal(err)
		}
		if err := sameRecord(&rec, &back); err != nil {
			t.Fatal(err)
		}
	})
}
