package entry

import (
	"bytes"
	"errors"
	"testing"

	"github.com/korvet/korvet/engine/record"
)

// TestTxnRoundTrip encodes transactional and control records and checks
// the fields in order and that they decode to the same record and Txn.
func TestTxnRoundTrip(t *testing.T) {
	var e Encoder
	var d Decoder
	ctlKey := []byte{0, 0, 0, 1}
	ctlValue := []byte{0, 0, 0, 0, 0, 7}
	cases := []struct {
		name    string
		rec     record.Record
		pid     int64
		epoch   int16
		control bool
		fields  []string
	}{
		{"json value", record.Record{Timestamp: 5, Key: []byte("k"), Value: []byte(`{"a":1}`)}, 42, 3, false,
			[]string{"__ts", "5", "__txn", "42.3", "__key", "k", "a", "1"}},
		{"tombstone with header", record.Record{Timestamp: -1, Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}}, 0, 0, false,
			[]string{"__ts", "-1", "__txn", "0.0", "__header.h", "v"}},
		{"commit marker", record.Record{Timestamp: 9, Key: ctlKey, Value: ctlValue}, 1<<62 + 1, 32767, true,
			[]string{"__ts", "9", "__txn", "4611686018427387905.32767", "__ctl", "", "__key", string(ctlKey), "__value", string(ctlValue)}},
		{"json-looking control value stays whole", record.Record{Timestamp: 1, Key: ctlKey, Value: []byte(`{"a":1}`)}, 7, 1, true,
			[]string{"__ts", "1", "__txn", "7.1", "__ctl", "", "__key", string(ctlKey), "__value", `{"a":1}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w capture
			tag := AppendTxn(nil, c.pid, c.epoch)
			pairs := e.PrepareTxn(&c.rec, tag, c.control)
			e.Append(&w)
			if len(w.fields) != 2*pairs {
				t.Fatalf("Prepare said %d pairs, Append wrote %d fields", pairs, len(w.fields))
			}
			if len(w.fields) != len(c.fields) {
				t.Fatalf("fields %q, want %q", w.fields, c.fields)
			}
			for i := range w.fields {
				if string(w.fields[i]) != c.fields[i] {
					t.Fatalf("field %d = %q, want %q (all %q)", i, w.fields[i], c.fields[i], w.fields)
				}
			}
			d.Begin()
			for i := 0; i+1 < len(w.fields); i += 2 {
				d.Field(bytes.Clone(w.fields[i]), bytes.Clone(w.fields[i+1]))
			}
			var got record.Record
			var txn record.Txn
			if err := d.FinishTxn(&got, &txn); err != nil {
				t.Fatal(err)
			}
			if err := sameRecord(&got, &c.rec); err != nil {
				t.Fatal(err)
			}
			want := record.Txn{ProducerID: c.pid, Epoch: c.epoch, Control: c.control}
			if txn != want {
				t.Fatalf("txn %+v, want %+v", txn, want)
			}
		})
	}
}

// TestPlainEntryHasNoTxn: entries without __txn (all data from before
// transactions) report ProducerID -1, also from a zero Decoder.
func TestPlainEntryHasNoTxn(t *testing.T) {
	var d Decoder
	d.Field([]byte("__ts"), []byte("1"))
	d.Field([]byte("__value"), []byte("x"))
	var rec record.Record
	txn := record.Txn{ProducerID: 5, Control: true}
	if err := d.FinishTxn(&rec, &txn); err != nil {
		t.Fatal(err)
	}
	if txn != (record.Txn{ProducerID: -1}) {
		t.Fatalf("txn %+v, want none", txn)
	}
	// Finish ignores the transaction fields.
	d.Begin()
	d.Field([]byte("__ts"), []byte("1"))
	d.Field([]byte("__txn"), []byte("3.4"))
	d.Field([]byte("__value"), []byte("x"))
	if err := d.Finish(&rec); err != nil || string(rec.Value) != "x" {
		t.Fatalf("Finish: %v, value %q", err, rec.Value)
	}
}

func TestTxnDecodeErrors(t *testing.T) {
	for _, fields := range [][]string{
		{"__ts", "1", "__txn", "3"},
		{"__ts", "1", "__txn", ".3"},
		{"__ts", "1", "__txn", "3."},
		{"__ts", "1", "__txn", "-3.1"},
		{"__ts", "1", "__txn", "3.-1"},
		{"__ts", "1", "__txn", "3.32768"},
		{"__ts", "1", "__txn", "x.1"},
		{"__ts", "1", "__txn", "1.1", "__txn", "1.1"},
		{"__ts", "1", "__txn", "1.1", "__ctl", "x", "__key", "k", "__value", "v"},
		{"__ts", "1", "__txn", "1.1", "__ctl", "", "__ctl", "", "__key", "k", "__value", "v"},
		{"__ts", "1", "__ctl", "", "__key", "k", "__value", "v"},
		{"__ts", "1", "__txn", "1.1", "__ctl", "", "__value", "v"},
		{"__ts", "1", "__txn", "1.1", "__ctl", "", "__key", "k"},
	} {
		var d Decoder
		d.Begin()
		for i := 0; i+1 < len(fields); i += 2 {
			d.Field([]byte(fields[i]), []byte(fields[i+1]))
		}
		var rec record.Record
		var txn record.Txn
		if err := d.FinishTxn(&rec, &txn); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err %v, want ErrMalformed", fields, err)
		}
	}
}
