package entry

import (
	"bytes"
	"encoding/json"
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
		if nullFlags&jsonWrapped != 0 {
			r.Value = append(append([]byte(`{"f":`), value...), `,"g":1}`...)
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
	} {
		f.Add([]byte(s))
	}
	var e Encoder
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
			// Flattened: the decoder's rebuild must give the input back.
			rebuilt := []byte{'{'}
			for i := 0; i < len(fields); i += 2 {
				if i > 0 {
					rebuilt = append(rebuilt, ',')
				}
				if bytes.HasPrefix(fields[i], []byte("__")) {
					t.Fatalf("member name %q starts with __", fields[i])
				}
				rebuilt = append(rebuilt, '"')
				rebuilt = append(rebuilt, fields[i]...)
				rebuilt = append(rebuilt, '"', ':')
				rebuilt = append(rebuilt, fields[i+1]...)
			}
			rebuilt = append(rebuilt, '}')
			if !bytes.Equal(rebuilt, value) {
				t.Fatalf("flattened %q rebuilds as %q", value, rebuilt)
			}
			if !json.Valid(value) || !utf8.Valid(value) {
				t.Fatalf("flattened invalid JSON %q", value)
			}
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

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
