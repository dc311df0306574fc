package engine

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/resp"
)

// bulk and arr spell RESP2 for the tests.
func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
func arr(elems ...string) string {
	return "*" + strconv.Itoa(len(elems)) + "\r\n" + strings.Join(elems, "")
}

// xentry is one XRANGE entry: [id, [field, value, ...]].
func xentry(id string, fv ...string) string {
	fields := make([]string, len(fv))
	for i, s := range fv {
		fields[i] = bulk(s)
	}
	return arr(bulk(id), arr(fields...))
}

func TestParseKeyEntries(t *testing.T) {
	raw := arr(
		xentry("0-1", "__ts", "1", "__key", "a", "__value", "v"),
		xentry("1-1", "__ts", "1", "__key", "b"),                             // tombstone
		xentry("2-3", "__ts", "1", "__key", "", "__header.h", "x", "n", "1"), // empty key, flattened value
		xentry("3-1", "__ts", "1", "__value", "v"),                           // no key
		xentry("7-1", "__ts", "1", "__key", "c", "__hnull.h", "", "_x", "2"),
		xentry("8-1", "__ts", "1", "__key", "d", "__ws", "u . ", "a", "1", "b", "2"), // flattened with whitespace
	)
	recs, err := parseKeyEntries([]byte(raw), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		off            int64
		key            string
		nilKey, hasVal bool
	}{{0, "a", false, true}, {1, "b", false, false}, {2, "", false, true}, {3, "", true, true}, {7, "c", false, true}, {8, "d", false, true}}
	if len(recs) != len(want) {
		t.Fatalf("%d records", len(recs))
	}
	for i, w := range want {
		r := recs[i]
		if r.Offset != w.off || string(r.Key) != w.key || (r.Key == nil) != w.nilKey || (r.Value != nil) != w.hasVal {
			t.Errorf("record %d: offset %d key %q (nil %v) value %q, want %+v", i, r.Offset, r.Key, r.Key == nil, r.Value, w)
		}
	}
	// Appends to what it is given.
	recs, err = parseKeyEntries([]byte(arr(xentry("9-1", "__key", "z"))), recs[:1])
	if err != nil || len(recs) != 2 || recs[1].Offset != 9 || string(recs[0].Key) != "a" {
		t.Fatalf("append: %+v %v", recs, err)
	}
	if recs, err := parseKeyEntries([]byte("*0\r\n"), nil); err != nil || len(recs) != 0 {
		t.Fatalf("empty reply: %+v %v", recs, err)
	}
}

// Transactional entries and control records come back in txns, parallel
// to the records once one has a transaction; a reply without any leaves
// txns empty.
func TestParseKeyEntriesTxn(t *testing.T) {
	raw := arr(
		xentry("0-1", "__ts", "1", "__key", "a", "__value", "v"),
		xentry("1-1", "__ts", "1", "__txn", "7.2", "__key", "b", "__value", "v"),
		xentry("2-1", "__ts", "1", "__txn", "7.2", "__ctl", "", "__key", "\x00\x00\x00\x01", "__value", "\x00\x00\x00\x00\x00\x00"),
		xentry("3-1", "__ts", "1", "__key", "c", "__value", "v"),
	)
	recs, txns, err := parseKeyEntriesTxn([]byte(raw), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []record.Txn{{ProducerID: -1}, {ProducerID: 7, Epoch: 2}, {ProducerID: 7, Epoch: 2, Control: true}, {ProducerID: -1}}
	if len(recs) != 4 || !slices.Equal(txns, want) {
		t.Fatalf("records %d, txns %+v, want %+v", len(recs), txns, want)
	}
	if recs[1].Value == nil || string(recs[1].Key) != "b" {
		t.Fatalf("transactional record %+v", recs[1])
	}
	if _, txns, err := parseKeyEntriesTxn([]byte(arr(xentry("0-1", "__ts", "1", "__key", "a"))), nil, nil); err != nil || len(txns) != 0 {
		t.Fatalf("no transaction: %+v %v", txns, err)
	}
	for _, bad := range []string{
		arr(xentry("0-1", "__ts", "1", "__txn", "x", "__key", "a")),
		arr(xentry("0-1", "__ts", "1", "__txn", "-1.0", "__key", "a")),
		arr(xentry("0-1", "__ts", "1", "__ctl", "", "__key", "a")),
	} {
		if _, _, err := parseKeyEntriesTxn([]byte(bad), nil, nil); !errors.Is(err, entry.ErrMalformed) {
			t.Errorf("%q: %v, want malformed", bad, err)
		}
	}
}

func TestParseKeyEntriesMalformed(t *testing.T) {
	tests := []struct{ name, raw string }{
		{"not an array", bulk("x")},
		{"null", "*-1\r\n"},
		{"cut", arr(xentry("0-1", "__key", "a"), xentry("1-1", "__key", "b"))[:40]},
		{"entry of 3", arr(arr(bulk("0-1"), arr(), bulk("x")))},
		{"id not bulk", arr(arr(":0\r\n", arr()))},
		{"null fields", arr(arr(bulk("0-1"), "*-1\r\n"))},
		{"odd fields", arr(arr(bulk("0-1"), arr(bulk("__key"))))},
		{"null value", arr(arr(bulk("0-1"), arr(bulk("__key"), "$-1\r\n")))},
		{"count past the end", "*5\r\n" + xentry("0-1")},
	}
	for _, tt := range tests {
		recs, err := parseKeyEntries([]byte(tt.raw), nil)
		if !errors.Is(err, entry.ErrMalformed) {
			t.Errorf("%s: %+v, error %v", tt.name, recs, err)
		}
	}
	// A bad entry ID is the ID parser's error.
	if _, err := parseKeyEntries([]byte(arr(xentry("x-1", "__key", "a"))), nil); err == nil || !strings.Contains(err.Error(), "bad stream entry id") {
		t.Errorf("bad id: %v", err)
	}
	// Keys point into the reply: no copy.
	raw := []byte(arr(xentry("0-1", "__key", "abc")))
	recs, _ := parseKeyEntries(raw, make([]record.Record, 0, 1))
	raw[len(raw)-3] = 'X'
	if string(recs[0].Key) != "abX" {
		t.Errorf("key %q was copied", recs[0].Key)
	}
}

// FuzzParseKeyEntries: whatever Redis (or something posing as it) sends,
// the walk of a catch-up read does not panic, and the keys it returns are
// pieces of the reply.
func FuzzParseKeyEntries(f *testing.F) {
	f.Add([]byte(arr(xentry("0-1", "__ts", "1", "__key", "a", "__value", "v"), xentry("1-1", "__key", ""))))
	f.Add([]byte(arr(xentry("2-3", "__key", "k", "n", "1", "__hnull.h", ""))))
	f.Add([]byte("*1\r\n*2\r\n$3\r\n0-1\r\n*-1\r\n"))
	f.Add([]byte("*999999999999999999\r\n"))
	f.Add([]byte(arr(xentry("0-1", "__txn", "7.2", "__ctl", "", "__key", "a"), arr(bulk("1-1"), arr(arr(), bulk("x"))))))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameOnMarks(t, raw)
		recs, err := parseKeyEntries(raw, nil)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Key != nil && (len(r.Key) > len(raw) || !bytes.Contains(raw, r.Key)) {
				t.Fatalf("key %q is not in the reply", r.Key)
			}
			if r.Offset < 0 {
				t.Fatalf("offset %d", r.Offset)
			}
		}
	})
}

// sameOnMarks checks that parseKeyMarks, on the Marks of raw, reads what
// parseKeyEntriesTxn does, and refuses what it refuses.
func sameOnMarks(t *testing.T, raw []byte) {
	t.Helper()
	marks, err := resp.MarkReply(raw)
	if err != nil || marks == nil {
		return // not framed, or unmarked: readKeys walks it
	}
	seed := []record.Record{{Offset: 99}}
	want, wantTxns, werr := parseKeyEntriesTxn(raw, seed, nil)
	got, gotTxns, gerr := parseKeyMarks(raw, marks, seed, nil)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: on marks %v, walked %v", raw, gerr, werr)
	}
	if werr != nil {
		if errors.Is(werr, entry.ErrMalformed) != errors.Is(gerr, entry.ErrMalformed) {
			t.Fatalf("%q: on marks %v, walked %v", raw, gerr, werr)
		}
		return
	}
	if len(got) != len(want) || !slices.Equal(gotTxns, wantTxns) {
		t.Fatalf("%q: on marks %d records %+v, walked %d %+v", raw, len(got), gotTxns, len(want), wantTxns)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) || (g.Value == nil) != (w.Value == nil) ||
			len(g.Key) > 0 && &g.Key[0] != &w.Key[0] {
			t.Fatalf("%q: record %d on marks %+v, walked %+v", raw, i, g, w)
		}
	}
}

// The rebuild's reads parse the Marks their framing left as the walk of
// the reply does: every reply of the tests above.
func TestParseKeyMarks(t *testing.T) {
	for _, raw := range []string{
		arr(xentry("0-1", "__ts", "1", "__key", "a", "__value", "v"), xentry("1-1", "__ts", "1", "__key", "b"),
			xentry("2-3", "__ts", "1", "__key", "", "__header.h", "x", "n", "1"), xentry("3-1", "__ts", "1", "__value", "v"),
			xentry("7-1", "__ts", "1", "__key", "c", "__hnull.h", "", "_x", "2"), xentry("8-1", "__ts", "1", "__key", "d", "__ws", "u . ", "a", "1", "b", "2")),
		arr(xentry("0-1", "__ts", "1", "__key", "a", "__value", "v"), xentry("1-1", "__ts", "1", "__txn", "7.2", "__key", "b", "__value", "v"),
			xentry("2-1", "__ts", "1", "__txn", "7.2", "__ctl", "", "__key", "\x00\x00\x00\x01", "__value", "\x00\x00\x00\x00\x00\x00"),
			xentry("3-1", "__ts", "1", "__key", "c", "__value", "v")),
		arr(xentry("0-1", "__ts", "1", "__txn", "x", "__key", "a")),
		arr(xentry("0-1", "__ts", "1", "__ctl", "", "__key", "a")),
		arr(xentry("x-1", "__key", "a")),
		arr(arr(bulk("0-1"), arr(bulk("x"), bulk("y")), bulk("x"))),
		arr(arr(bulk("0-1"), arr(bulk("__key")))),
		arr(arr(bulk("0-1"), arr(bulk("__key"), arr(bulk("v"))))),
		arr(arr(bulk("0-1"))),
		arr(bulk("0-1")),
		arr(arr(arr(bulk("0")), arr(bulk("k"), bulk("v")))),
		bulk("x"),
	} {
		if m, err := resp.MarkReply([]byte(raw)); err != nil || m == nil {
			t.Fatalf("%q: no marks: %v", raw, err)
		}
		sameOnMarks(t, []byte(raw))
	}
}
