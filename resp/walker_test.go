package resp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/tidwall/redcon"
)

func TestWalkerShapes(t *testing.T) {
	in := replyShapes
	want := []Value{
		{Kind: KindString, Data: []byte("OK")},
		{Kind: KindError, Data: []byte("WRONGTYPE Operation against a key")},
		{Kind: KindInteger, Data: []byte("-42")},
		{Kind: KindBulk, Data: []byte("a\r\n\x00b")},
		{Kind: KindBulk, Data: []byte{}},
		{Kind: KindNull},
		{Kind: KindArray, Len: 0},
		{Kind: KindNull},
		{Kind: KindArray, Len: 2},
		{Kind: KindArray, Len: 2},
		{Kind: KindBulk, Data: []byte("id")},
		{Kind: KindArray, Len: 2},
		{Kind: KindBulk, Data: []byte("f")},
		{Kind: KindBulk, Data: []byte("v")},
		{Kind: KindInteger, Data: []byte("7")},
	}
	input := []byte(in)
	w := NewWalker(input)
	for i, wv := range want {
		v, err := w.Next()
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if v.Kind != wv.Kind || v.Len != wv.Len || !bytes.Equal(v.Data, wv.Data) || (v.Data == nil) != (wv.Data == nil) {
			t.Errorf("value %d: got %s %q len %d, want %s %q len %d", i, v.Kind, v.Data, v.Len, wv.Kind, wv.Data, wv.Len)
		}
		if v.Data != nil && (cap(v.Data) != len(v.Data) || !within(v.Data, input)) {
			t.Errorf("value %d: Data is not a capped sub-slice of the input", i)
		}
	}
	if len(w.Rest()) != 0 {
		t.Fatalf("%q left", w.Rest())
	}
	if _, err := w.Next(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("past the end: %v", err)
	}
}

func TestWalkerErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "reply ends where a value was due"},
		{"garbage", "HTTP/1.1 400\r\n", "unexpected byte 'H'"},
		{"bare LF", "+OK\n", "CRLF"},
		{"no line end", "$12", "ends inside a line"},
		{"bad int", ":12a\r\n", "bad integer"},
		{"empty int", ":\r\n", "bad integer"},
		{"bad len", "$abc\r\n", "bad length"},
		{"neg len", "$-2\r\n", "bad length"},
		{"plus len", "*+1\r\n:1\r\n", "bad length"},
		{"overflow len", "$9223372036854775807\r\nab", "bad length"},
		{"bulk no CRLF", "$3\r\nabcXY", "not terminated"},
		{"bulk cut", "$5\r\nab", "bulk string of 5 bytes, 2 left"},
		{"huge bulk", "$999999999999999999\r\nab\r\n", "bulk string of 999999999999999999 bytes"},
		{"huge array", "*999999999999999999\r\n:1\r\n", "array of 999999999999999999 elements"},
		{"array cut", "*3\r\n:1\r\n", "array of 3 elements"},
	}
	for _, tt := range tests {
		w := NewWalker([]byte(tt.in))
		err := w.Skip()
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	// An array whose elements are cut short fails on the missing one.
	w := NewWalker([]byte("*2\r\n:1\r\n:2"))
	if err := w.Skip(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "at byte 8") {
		t.Errorf("cut element: %v", err)
	}
}

// Array and Bulk refuse another kind without consuming it.
func TestWalkerExpect(t *testing.T) {
	w := NewWalker([]byte("$-1\r\n*1\r\n$1\r\nx\r\n"))
	if _, err := w.Bulk(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "want bulk string, got null at byte 0") {
		t.Fatalf("Bulk on a null: %v", err)
	}
	if _, err := w.Array(); err == nil {
		t.Fatal("Array on a null")
	}
	if v, err := w.Next(); err != nil || v.Kind != KindNull {
		t.Fatalf("the null is still there: %+v %v", v, err)
	}
	if _, err := w.Bulk(); err == nil {
		t.Fatal("Bulk on an array")
	}
	if n, err := w.Array(); err != nil || n != 1 {
		t.Fatalf("Array: %d %v", n, err)
	}
	if b, err := w.Bulk(); err != nil || string(b) != "x" {
		t.Fatalf("Bulk: %q %v", b, err)
	}
}

func TestWalkerSkip(t *testing.T) {
	w := NewWalker([]byte("*3\r\n*2\r\n$1\r\na\r\n*0\r\n$-1\r\n*1\r\n:1\r\n+next\r\n"))
	if err := w.Skip(); err != nil {
		t.Fatal(err)
	}
	if string(w.Rest()) != "+next\r\n" {
		t.Fatalf("rest %q", w.Rest())
	}
}

// xrangeReply is the shape of an XRANGE reply of n entries.
func xrangeReply(n int) []byte {
	b := redcon.AppendArray(nil, n)
	for i := range n {
		b = redcon.AppendArray(b, 2)
		b = redcon.AppendBulkString(b, fmt.Sprintf("%d-1", i))
		b = redcon.AppendArray(b, 4)
		b = redcon.AppendBulkString(b, "__key")
		b = redcon.AppendBulkString(b, fmt.Sprintf("key-%d", i))
		b = redcon.AppendBulkString(b, "__value")
		b = redcon.AppendBulkString(b, strings.Repeat("v", 100))
	}
	return b
}

// Walking a reply allocates nothing, however large it is.
func TestWalkerNoAllocs(t *testing.T) {
	raw := xrangeReply(1000)
	var keys int
	allocs := testing.AllocsPerRun(10, func() {
		keys = 0
		w := NewWalker(raw)
		n, err := w.Array()
		for range n {
			if err != nil {
				break
			}
			_, err = w.Array()
			if err == nil {
				_, err = w.Bulk()
			}
			var nf int
			if err == nil {
				nf, err = w.Array()
			}
			for j := 0; j < nf && err == nil; j++ {
				_, err = w.Bulk()
			}
			keys++
		}
		if err != nil {
			panic(err)
		}
	})
	if allocs != 0 || keys != 1000 {
		t.Fatalf("%v allocations for %d entries", allocs, keys)
	}
}

// FuzzWalker walks arbitrary bytes and compares the walk with the reply
// reader's: the Walker must not panic, must accept exactly what the
// reader accepts (but for nesting deeper than the reader allows), see the
// same values, and hand out capped sub-slices of its input.
func FuzzWalker(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR x\r\n", ":0\r\n", ":-9223372036854775808\r\n",
		"$3\r\nabc\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "*3\r\n$1\r\na\r\n",
		"$9223372036854775807\r\n", "$9223372036854775790\r\nab",
		"*9223372036854775807\r\n", ":\r\n", ":-\r\n", "$-0\r\n", "*+1\r\n:1\r\n",
		"+OK\n", "\r\n", "hello", strings.Repeat("*1\r\n", 100),
		"*1\r\n*-1\r\n+a\r\n-b\r\n", "$2\r\nab\r\n$2\r\ncd\r\n", "$0003\r\nabc\r\n",
		string(xrangeReply(3)),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxReply = 1 << 16
		if len(data) > maxReply {
			return
		}
		sameTyped(t, data)
		sameEntry(t, data)
		w := NewWalker(data)
		depth, werr := checkWalk(t, &w, data)
		walked := len(data) - len(w.Rest())

		// The reader frames every reply in its buffer: give it only the
		// value walked, or everything when the walk failed.
		in := data
		if werr == nil {
			in = data[:walked]
		}
		rs := &Replies{}
		_, rerr := readReplies(bytes.NewReader(in), rs, 1, maxReply, nil, false)
		switch {
		case werr != nil && rerr == nil:
			t.Fatalf("the reader took %q, the walker refused it: %v", rs.At(0).Raw, werr)
		case werr != nil:
			return
		case rerr != nil && depth <= maxDepth:
			t.Fatalf("the walker took %q, the reader refused it: %v", in, rerr)
		case rerr != nil:
			return
		}
		if walked != len(rs.At(0).Raw) {
			t.Fatalf("walked %d bytes, the reply has %d", walked, len(rs.At(0).Raw))
		}
		w = NewWalker(data)
		sameAs(t, &w, rs.At(0))
		w = NewWalker(data)
		if err := w.Skip(); err != nil || len(data)-len(w.Rest()) != walked {
			t.Fatalf("Skip: %v, %d bytes walked", err, len(data)-len(w.Rest()))
		}
	})
}

// sameEntry checks that Entry reads the first value of data as Array and
// Bulk do, step by step.
func sameEntry(t *testing.T, data []byte) {
	t.Helper()
	w := NewWalker(data)
	var want [][]byte
	n, err := w.Array()
	if err == nil && n != 2 {
		err = errors.New("not 2")
	}
	var id []byte
	if err == nil {
		id, err = w.Bulk()
	}
	if err == nil {
		n, err = w.Array()
	}
	if err == nil && n%2 != 0 {
		err = errors.New("odd")
	}
	for i := 0; i < n && err == nil; i++ {
		var v []byte
		v, err = w.Bulk()
		want = append(want, v)
	}
	we := NewWalker(data)
	seed := [][]byte{[]byte("kept")}
	gotID, got, gerr := we.Entry(seed)
	if (err == nil) != (gerr == nil) {
		t.Fatalf("Entry: %v; step by step: %v", gerr, err)
	}
	if gerr != nil {
		if !errors.Is(gerr, ErrMalformed) {
			t.Fatalf("Entry: %v does not wrap ErrMalformed", gerr)
		}
		return
	}
	if !bytes.Equal(gotID, id) || len(got) != 1+len(want) || string(got[0]) != "kept" || len(we.Rest()) != len(w.Rest()) {
		t.Fatalf("Entry: %q %q rest %d; step by step: %q %q rest %d", gotID, got, len(we.Rest()), id, want, len(w.Rest()))
	}
	for i, v := range want {
		if !bytes.Equal(got[1+i], v) || cap(got[1+i]) != len(got[1+i]) {
			t.Fatalf("Entry field %d: %q (cap %d), step by step %q", i, got[1+i], cap(got[1+i]), v)
		}
	}
}

// Entry reads stream entries as Array and Bulk do, and refuses what they
// refuse, cut anywhere.
func TestWalkerEntry(t *testing.T) {
	raw := xrangeReply(3)
	w := NewWalker(raw)
	if _, err := w.Array(); err != nil {
		t.Fatal(err)
	}
	one := w.Rest()
	for _, in := range [][]byte{
		one, []byte("*2\r\n$1\r\n1\r\n*0\r\n"), []byte("*2\r\n$0\r\n\r\n*2\r\n$0\r\n\r\n$1\r\nv\r\n"),
		[]byte("*2\r\n$1\r\n1\r\n*1\r\n$1\r\nk\r\n"), []byte("*3\r\n$1\r\n1\r\n*0\r\n"),
		[]byte("*2\r\n$-1\r\n*0\r\n"), []byte("*2\r\n$1\r\n1\r\n*2\r\n$-1\r\n$1\r\nv\r\n"),
		[]byte("*2\r\n$1\r\n1\r\n*2\r\n:1\r\n$1\r\nv\r\n"), []byte("*2\r\n*0\r\n*0\r\n"),
		[]byte("*2\r\n$1\r\n1\r\n$1\r\nx\r\n"), []byte("*2\r\n$1\r\n1\r\n*2\r\n$1\r\nkXY$1\r\nv\r\n"),
	} {
		for n := range len(in) + 1 {
			sameEntry(t, in[:n])
		}
	}
	w = NewWalker(one)
	var fields [][]byte
	for i := range 3 {
		id, f, err := w.Entry(fields[:0])
		if err != nil || string(id) != fmt.Sprintf("%d-1", i) || len(f) != 4 || string(f[0]) != "__key" || string(f[1]) != fmt.Sprintf("key-%d", i) {
			t.Fatalf("entry %d: %q %q %v", i, id, f, err)
		}
		fields = f
	}
	if len(w.Rest()) != 0 {
		t.Fatalf("%d bytes left", len(w.Rest()))
	}
}

// sameTyped checks that Array and Bulk read the first value of data as
// Next does, and leave it in place when it is of another kind.
func sameTyped(t *testing.T, data []byte) {
	w := NewWalker(data)
	v, err := w.Next()
	rest := w.Rest()
	wa, wb := NewWalker(data), NewWalker(data)
	n, aerr := wa.Array()
	b, berr := wb.Bulk()
	if ok := err == nil && v.Kind == KindArray; ok != (aerr == nil) || ok && (n != v.Len || len(wa.Rest()) != len(rest)) || !ok && len(wa.Rest()) != len(data) {
		t.Fatalf("Array: %d %v, rest %d; Next: %+v %v, rest %d", n, aerr, len(wa.Rest()), v, err, len(rest))
	}
	if ok := err == nil && v.Kind == KindBulk; ok != (berr == nil) || ok && (!bytes.Equal(b, v.Data) || cap(b) != len(b) || len(wb.Rest()) != len(rest)) || !ok && len(wb.Rest()) != len(data) {
		t.Fatalf("Bulk: %q %v, rest %d; Next: %+v %v, rest %d", b, berr, len(wb.Rest()), v, err, len(rest))
	}
	for _, err := range []error{aerr, berr} {
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error not wrapping ErrMalformed: %v", err)
		}
	}
}

// checkWalk walks one value with w, checking each value read, and reports
// how deep non-empty arrays nest.
func checkWalk(t *testing.T, w *Walker, input []byte) (depth int, err error) {
	var due []int // elements still due in each open array
	for {
		v, err := w.Next()
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			return depth, err
		}
		switch v.Kind {
		case KindArray:
			if v.Data != nil || v.Len < 0 {
				t.Fatalf("array with data %q len %d", v.Data, v.Len)
			}
		case KindNull:
			if v.Data != nil || v.Len != 0 {
				t.Fatalf("null with data %q len %d", v.Data, v.Len)
			}
		case KindString, KindError, KindInteger, KindBulk:
			if v.Data == nil || v.Len != 0 || cap(v.Data) != len(v.Data) || !within(v.Data, input) {
				t.Fatalf("%s with data %q (cap %d) len %d", v.Kind, v.Data, cap(v.Data), v.Len)
			}
		default:
			t.Fatalf("kind %s", v.Kind)
		}
		if v.Kind == KindArray && v.Len > 0 {
			due = append(due, v.Len)
			depth = max(depth, len(due))
			continue
		}
		// A value ended: close every array it completes.
		for len(due) > 0 {
			if due[len(due)-1]--; due[len(due)-1] > 0 {
				break
			}
			due = due[:len(due)-1]
		}
		if len(due) == 0 {
			return depth, nil
		}
	}
}

// sameAs walks one value with w and compares it with r.
func sameAs(t *testing.T, w *Walker, r Reply) {
	v, err := w.Next()
	if err != nil {
		t.Fatalf("walker: %v on %q", err, r.Raw)
	}
	switch {
	case r.IsNil():
		if v.Kind != KindNull {
			t.Fatalf("walker %s, reader a null", v.Kind)
		}
	case r.Type == redcon.Array:
		if v.Kind != KindArray || v.Len != r.Len() {
			t.Fatalf("walker %s of %d, reader an array of %d", v.Kind, v.Len, r.Len())
		}
		r.ForEach(func(e Reply) bool {
			sameAs(t, w, e)
			return true
		})
	default:
		if v.Kind != Kind(r.Type) || !bytes.Equal(v.Data, r.Bytes()) {
			t.Fatalf("walker %s %q, reader %s %q", v.Kind, v.Data, typeName(r.Type), r.Bytes())
		}
	}
}

// within reports whether b lies in buf's memory.
func within(b, buf []byte) bool {
	if len(b) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(len(buf))
}
