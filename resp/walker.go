package resp

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrMalformed is a reply a Walker cannot walk: cut short, or not RESP2.
var ErrMalformed = errors.New("resp: malformed reply")

// Kind is the type of a RESP2 value.
type Kind byte

// The kinds of RESP2 values, named by their type byte; KindNull stands for
// both nulls, "$-1" and "*-1".
const (
	KindString  Kind = '+'
	KindError   Kind = '-'
	KindInteger Kind = ':'
	KindBulk    Kind = '$'
	KindArray   Kind = '*'
	KindNull    Kind = '_'
)

// Value is one value read by a Walker.
type Value struct {
	Kind Kind
	// Data is the payload of a simple string, error, integer or bulk
	// string (never nil for those), as a sub-slice of the walked bytes
	// whose capacity ends with it; nil for an array or a null.
	Data []byte
	// Len is the number of elements of an array: they are the next Len
	// values the Walker reads (each of them possibly an array itself).
	Len int
}

// Walker reads a RESP2 reply held in memory (such as Reply.Raw) value by
// value, depth first, without copying or allocating: what it returns are
// sub-slices of its input. It is meant for replies too large to be worth
// a Reply per element, like an XRANGE of thousands of entries.
//
// It trusts nothing in the input: it never panics, and a length the input
// claims is checked against the bytes that are there before anything is
// taken, so a hostile length costs nothing. Errors wrap ErrMalformed.
type Walker struct {
	b    []byte // what is left to walk
	size int    // of the input, for error offsets
}

// NewWalker returns a Walker over b.
func NewWalker(b []byte) Walker { return Walker{b: b, size: len(b)} }

// Rest returns the bytes not walked yet.
func (w *Walker) Rest() []byte { return w.b }

// Next reads the next value. For an array it reads only the header: its
// elements follow.
func (w *Walker) Next() (Value, error) {
	b := w.b
	if len(b) == 0 {
		return Value{}, w.fail("the reply ends where a value was due")
	}
	switch kind := Kind(b[0]); kind {
	case KindBulk, KindArray:
		n, i, ok := lenLine(b)
		switch {
		case !ok:
			return Value{}, w.badLine()
		case n < 0:
			w.b = b[i:]
			return Value{Kind: KindNull}, nil
		case kind == KindBulk:
			if n > len(b)-i-2 {
				return Value{}, w.fail(fmt.Sprintf("bulk string of %d bytes, %d left in the reply", n, len(b)-i))
			}
			if b[i+n] != '\r' || b[i+n+1] != '\n' {
				return Value{}, w.fail("bulk string not terminated by CRLF")
			}
			w.b = b[i+n+2:]
			return Value{Kind: kind, Data: b[i : i+n : i+n]}, nil
		default:
			// Each element takes 3 bytes at least ("+\r\n").
			if n > (len(b)-i)/3 {
				return Value{}, w.fail(fmt.Sprintf("array of %d elements, %d bytes left in the reply", n, len(b)-i))
			}
			w.b = b[i:]
			return Value{Kind: kind, Len: n}, nil
		}
	case KindString, KindError, KindInteger:
		nl := bytes.IndexByte(b, '\n')
		if nl < 2 || b[nl-1] != '\r' {
			return Value{}, w.badLine()
		}
		line := b[1 : nl-1 : nl-1]
		if kind == KindInteger && !validInt(line) {
			return Value{}, w.fail(fmt.Sprintf("bad integer %q", line))
		}
		w.b = b[nl+1:]
		return Value{Kind: kind, Data: line}, nil
	default:
		return Value{}, w.fail(fmt.Sprintf("unexpected byte %q at the start of a value", b[0]))
	}
}

// Array reads the header of an array, which must come next, and returns
// its number of elements.
func (w *Walker) Array() (int, error) {
	// The common case inline; Next explains the others.
	if b := w.b; len(b) > 0 && b[0] == byte(KindArray) {
		if n, i, ok := lenLine(b); ok && n >= 0 && n <= (len(b)-i)/3 {
			w.b = b[i:]
			return n, nil
		}
	}
	v, err := w.expect(KindArray)
	return v.Len, err
}

// Bulk reads a bulk string, which must come next (not a null).
func (w *Walker) Bulk() ([]byte, error) {
	// The common case inline; Next explains the others.
	if b := w.b; len(b) > 0 && b[0] == byte(KindBulk) {
		if n, i, ok := lenLine(b); ok && n >= 0 && n <= len(b)-i-2 && b[i+n] == '\r' && b[i+n+1] == '\n' {
			w.b = b[i+n+2:]
			return b[i : i+n : i+n], nil
		}
	}
	v, err := w.expect(KindBulk)
	return v.Data, err
}

// Entry reads a stream entry, which must come next: an array of its id and
// an array of field names and values, all bulk strings, as XRANGE and
// XREAD return entries. It appends the names and values, in turn, to
// fields and returns them: Array, Bulk, Array and a Bulk per name and
// value in one call, as strict, for the elements of big replies.
func (w *Walker) Entry(fields [][]byte) (id []byte, _ [][]byte, err error) {
	if id, out, ok := w.entry(fields); ok {
		return id, out, nil
	}
	// The long way: what entry does not take is malformed, and the
	// reads say how.
	var n int
	if n, err = w.Array(); err == nil && n != 2 {
		err = w.fail(fmt.Sprintf("stream entry of %d elements", n))
	}
	if err == nil {
		id, err = w.Bulk()
	}
	if err == nil {
		n, err = w.Array()
	}
	if err == nil && n%2 != 0 {
		err = w.fail(fmt.Sprintf("stream entry of %d fields and values", n))
	}
	for i := 0; i < n && err == nil; i++ {
		var v []byte
		v, err = w.Bulk()
		fields = append(fields, v)
	}
	return id, fields, err
}

// entry is Entry for a well-formed entry, in one tight loop: ok false, and
// w untouched, at anything else.
func (w *Walker) entry(fields [][]byte) ([]byte, [][]byte, bool) {
	b := w.b
	if len(b) < 4 || b[0] != byte(KindArray) || b[1] != '2' || b[2] != '\r' || b[3] != '\n' {
		return nil, fields, false
	}
	pos := 4
	var id []byte
	nf := -1
	for base := len(fields); ; {
		if pos >= len(b) {
			return nil, fields[:base], false
		}
		typ := b[pos]
		n, i, ok := digits(b, pos)
		if !ok {
			return nil, fields[:base], false
		}
		if typ == byte(KindArray) && id != nil && nf < 0 && n%2 == 0 {
			nf, pos = n, i
		} else if typ == byte(KindBulk) && (id == nil || nf >= 0) && n <= len(b)-i-2 && b[i+n] == '\r' && b[i+n+1] == '\n' {
			v := b[i : i+n : i+n]
			pos = i + n + 2
			if id == nil {
				id = v
				continue
			}
			fields = append(fields, v)
		} else {
			return nil, fields[:base], false
		}
		if nf >= 0 && len(fields)-base == nf {
			w.b = b[pos:]
			return id, fields, true
		}
	}
}

// Skip reads the next value whole, the elements of an array included.
func (w *Walker) Skip() error {
	for due := 1; due > 0; due-- {
		v, err := w.Next()
		if err != nil {
			return err
		}
		due += v.Len
	}
	return nil
}

func (w *Walker) expect(kind Kind) (Value, error) {
	at := w.b
	v, err := w.Next()
	if err == nil && v.Kind != kind {
		w.b = at
		return Value{}, w.fail(fmt.Sprintf("want %s, got %s", kind, v.Kind))
	}
	return v, err
}

// lenLine reads the header line of a bulk string or an array at the
// start of b, "$<n>\r\n" or "*<n>\r\n": n is -1 for a null, next the offset
// of what follows. It accepts what parseLen does, and nothing else.
func lenLine(b []byte) (n, next int, ok bool) {
	if len(b) >= 5 && b[1] == '-' && b[2] == '1' && b[3] == '\r' && b[4] == '\n' {
		return -1, 5, true
	}
	return digits(b, 0)
}

// badLine explains why the header line at the start of w.b is refused.
func (w *Walker) badLine() error {
	b := w.b
	nl := bytes.IndexByte(b, '\n')
	switch {
	case nl < 0:
		return w.fail("the reply ends inside a line")
	case nl < 2 || b[nl-1] != '\r':
		return w.fail("line not terminated by CRLF")
	}
	return w.fail(fmt.Sprintf("bad length %q", b[1:nl-1]))
}

func (w *Walker) fail(msg string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrMalformed, msg, w.size-len(w.b))
}

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "simple string"
	case KindError:
		return "error"
	case KindInteger:
		return "integer"
	case KindBulk:
		return "bulk string"
	case KindArray:
		return "array"
	case KindNull:
		return "null"
	}
	return fmt.Sprintf("kind %q", byte(k))
}
