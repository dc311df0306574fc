package entry

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// maxMembers caps the fields a flattened value turns into, so that one
// record cannot blow up into an unbounded number of stream fields.
const maxMembers = 1000

// member locates one top-level member of a flattenable object: the name
// between its quotes is v[nameStart:nameEnd], its raw value v[valStart:valEnd].
// Only whitespace and the structural bytes lie between them.
type member struct {
	nameStart, nameEnd, valStart, valEnd int
}

// flattener decides whether a value can be flattened and finds its members.
// It keeps its scratch between calls so that analysis does not allocate.
type flattener struct {
	members []member
	order   []int32  // member indexes, sorted by name for the uniqueness check
	stack   []uint64 // container kinds while validating nested values: 1 bit per level, set = object
	marker  []byte   // the __ws marker of the value analysed last, empty when compact
	tmp     []byte   // rebuilt pieces while checking a marker
	lay     layout   // the marker parsed back, as the decoder will
}

// analyse reports whether v can be flattened, leaving its members in
// f.members and, when v has whitespace outside member values, its layout
// marker in f.marker.
func (f *flattener) analyse(v []byte) bool {
	f.members, f.marker = f.members[:0], f.marker[:0]
	if cap(f.marker) > maxKeptScratch {
		f.marker = nil
	}
	// Cheap reject first: most non-JSON values fail here.
	if len(v) < 2 || v[0] != '{' && !isSpace(v[0]) || v[len(v)-1] != '}' && !isSpace(v[len(v)-1]) {
		return false
	}
	open := skipSpace(v, 0)
	if open == len(v) || v[open] != '{' {
		return false
	}
	spaced := open != 0
	prev := open
	for {
		if len(f.members) == maxMembers {
			return false
		}
		nameAt := skipSpace(v, prev+1)
		end, escaped := scanString(v, nameAt)
		if end < 0 || escaped {
			return false
		}
		m := member{nameStart: nameAt + 1, nameEnd: end - 1}
		if m.nameEnd-m.nameStart >= 2 && v[m.nameStart] == '_' && v[m.nameStart+1] == '_' {
			return false
		}
		colon := skipSpace(v, end)
		if colon == len(v) || v[colon] != ':' {
			return false
		}
		m.valStart = skipSpace(v, colon+1)
		if m.valEnd = f.value(v, m.valStart); m.valEnd < 0 {
			return false
		}
		delim := skipSpace(v, m.valEnd)
		if delim == len(v) {
			return false
		}
		spaced = spaced || nameAt != prev+1 || colon != end || m.valStart != colon+1 || delim != m.valEnd
		f.members = append(f.members, m)
		switch v[delim] {
		case ',':
			prev = delim
			continue
		case '}':
			if skipSpace(v, delim+1) != len(v) {
				return false
			}
			spaced = spaced || delim != len(v)-1
		default:
			return false
		}
		break
	}
	if !f.unique(v) {
		return false
	}
	if !spaced {
		return rebuilds(v, f.members)
	}
	f.marker = appendMarker(f.marker, v, f.members)
	return f.lay.parse(f.marker) && f.rebuildsWS(v, &f.lay)
}

// rebuildsWS is rebuilds for a value with a layout marker: it rebuilds the
// pieces between names and values with the decoder's own code and checks
// that they, and the names and values between them, land where they are
// in v. Names and values are slices of v, so landing at their own
// position is the same as matching byte for byte.
func (f *flattener) rebuildsWS(v []byte, l *layout) bool {
	if cap(f.tmp) > maxKeptScratch {
		f.tmp = nil
	}
	p := 0
	eat := func(b []byte) bool {
		if len(v)-p < len(b) || !sameRun(v[p:p+len(b)], b) {
			return false
		}
		p += len(b)
		return true
	}
	var ok bool
	uniform := l.set && !l.general
	for i, m := range f.members {
		// A uniform layout's repeated pieces are what appendOpen and
		// appendColon append; compare them in place.
		if uniform && i > 0 {
			ok = eat(l.comma)
		} else if f.tmp, ok = l.appendOpen(f.tmp[:0], i); ok {
			ok = eat(f.tmp)
		}
		if !ok || p != m.nameStart {
			return false
		}
		p = m.nameEnd
		if uniform {
			ok = eat(l.colon)
		} else if f.tmp, ok = l.appendColon(f.tmp[:0], i); ok {
			ok = eat(f.tmp)
		}
		if !ok || p != m.valStart {
			return false
		}
		p = m.valEnd
	}
	f.tmp, ok = l.appendClose(f.tmp[:0], len(f.members))
	return ok && eat(f.tmp) && p == len(v)
}

// unique reports whether the member names are pairwise distinct.
func (f *flattener) unique(v []byte) bool {
	ms := f.members
	name := func(i int32) []byte { return v[ms[i].nameStart:ms[i].nameEnd] }
	if len(ms) <= 16 {
		// Quadratic is faster than sorting for the typical small object.
		for i := 1; i < len(ms); i++ {
			for j := 0; j < i; j++ {
				if bytes.Equal(name(int32(i)), name(int32(j))) {
					return false
				}
			}
		}
		return true
	}
	f.order = f.order[:0]
	for i := range ms {
		f.order = append(f.order, int32(i))
	}
	slices.SortFunc(f.order, func(a, b int32) int { return bytes.Compare(name(a), name(b)) })
	for i := 1; i < len(f.order); i++ {
		if bytes.Equal(name(f.order[i-1]), name(f.order[i])) {
			return false
		}
	}
	return true
}

// rebuilds reports whether joining the members the way the decoder does
// gives back exactly v. It is the final guard: whatever the scanner got
// wrong, a value is only flattened when the bytes provably survive.
func rebuilds(v []byte, ms []member) bool {
	if len(ms) == 0 || len(v) == 0 || v[0] != '{' {
		return false
	}
	p := 1
	for k, m := range ms {
		name, val := v[m.nameStart:m.nameEnd], v[m.valStart:m.valEnd]
		if len(v)-p < len(name)+len(val)+4 || v[p] != '"' {
			return false
		}
		p++
		if !bytes.Equal(v[p:p+len(name)], name) {
			return false
		}
		p += len(name)
		if v[p] != '"' || v[p+1] != ':' {
			return false
		}
		p += 2
		if !bytes.Equal(v[p:p+len(val)], val) {
			return false
		}
		p += len(val)
		sep := byte(',')
		if k == len(ms)-1 {
			sep = '}'
		}
		if v[p] != sep {
			return false
		}
		p++
	}
	return p == len(v)
}

// value validates the JSON value starting exactly at v[i] (no leading
// whitespace) and returns the index just past it, or -1. It is iterative,
// keeping container kinds in a bit stack, so any nesting depth is safe.
func (f *flattener) value(v []byte, i int) int {
	depth := 0
	for {
		// Scan one value; an opening bracket pushes and loops to its first element.
		if i >= len(v) {
			return -1
		}
		switch c := v[i]; c {
		case '{':
			if i = skipSpace(v, i+1); i < len(v) && v[i] == '}' {
				i++
				break
			}
			f.push(depth, true)
			depth++
			if i = objectKey(v, i); i < 0 {
				return -1
			}
			continue
		case '[':
			if i = skipSpace(v, i+1); i < len(v) && v[i] == ']' {
				i++
				break
			}
			f.push(depth, false)
			depth++
			continue
		case '"':
			i, _ = scanString(v, i)
		case 't':
			i = literal(v, i, "true")
		case 'f':
			i = literal(v, i, "false")
		case 'n':
			i = literal(v, i, "null")
		default:
			i = scanNumber(v, i)
		}
		if i < 0 {
			return -1
		}
		// A value is complete: close containers until one has a next element.
	closing:
		for {
			if depth == 0 {
				return i
			}
			if i = skipSpace(v, i); i >= len(v) {
				return -1
			}
			inObject := f.top(depth)
			switch v[i] {
			case ',':
				i = skipSpace(v, i+1)
				if inObject {
					if i = objectKey(v, i); i < 0 {
						return -1
					}
				}
				break closing
			case '}':
				if !inObject {
					return -1
				}
			case ']':
				if inObject {
					return -1
				}
			default:
				return -1
			}
			i++
			depth--
		}
	}
}

// push records the kind of the container at nesting level d.
func (f *flattener) push(d int, object bool) {
	w, bit := d/64, uint64(1)<<(d%64)
	if w == len(f.stack) {
		f.stack = append(f.stack, 0)
	}
	if object {
		f.stack[w] |= bit
	} else {
		f.stack[w] &^= bit
	}
}

// top reports whether the innermost of depth open containers is an object.
func (f *flattener) top(depth int) bool {
	d := depth - 1
	return f.stack[d/64]&(uint64(1)<<(d%64)) != 0
}

// objectKey scans `"name" :` plus the whitespace after it, starting at v[i],
// and returns the index of the member value, or -1.
func objectKey(v []byte, i int) int {
	if i, _ = scanString(v, i); i < 0 {
		return -1
	}
	if i = skipSpace(v, i); i >= len(v) || v[i] != ':' {
		return -1
	}
	return skipSpace(v, i+1)
}

// scanString scans the string starting at v[i], which must be a quote. It
// returns the index just past the closing quote and whether the string holds
// an escape sequence, or -1. Raw bytes must be valid UTF-8.
func scanString(v []byte, i int) (int, bool) {
	if i >= len(v) || v[i] != '"' {
		return -1, false
	}
	escaped := false
	for i++; i < len(v); {
		switch c := v[i]; {
		case c == '"':
			return i + 1, escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(v) {
				return -1, false
			}
			switch v[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(v) || !isHex(v[i+2]) || !isHex(v[i+3]) || !isHex(v[i+4]) || !isHex(v[i+5]) {
					return -1, false
				}
				i += 6
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(v[i:])
			if r == utf8.RuneError && n == 1 {
				return -1, false
			}
			i += n
		}
	}
	return -1, false
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at v[i]
// and returns the index just past it, or -1.
func scanNumber(v []byte, i int) int {
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i >= len(v):
		return -1
	case v[i] == '0':
		i++
	case v[i] >= '1' && v[i] <= '9':
		i = skipDigits(v, i+1)
	default:
		return -1
	}
	if i < len(v) && v[i] == '.' {
		start := i + 1
		if i = skipDigits(v, start); i == start {
			return -1
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		start := i
		if i = skipDigits(v, start); i == start {
			return -1
		}
	}
	return i
}

func skipDigits(v []byte, i int) int {
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	return i
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// literal matches lit at v[i] and returns the index just past it, or -1.
func literal(v []byte, i int, lit string) int {
	if len(v)-i < len(lit) || string(v[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
