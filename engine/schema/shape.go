package schema

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// maxShapeDepth bounds how deep a Shape nests: a hostile schema (or a
// very deep honest one) cannot grow the stack or the column count past
// it; what lies deeper becomes one KindJSON column.
const maxShapeDepth = 32

// maxValueDepth bounds how deep a decoded value nests (a recursive schema
// admits values of any depth, one payload byte per level).
const maxValueDepth = 512

// maxDecodeBytes bounds one payload: larger values are not decoded (their
// raw bytes are archived and served as always).
const maxDecodeBytes = 16 << 20

var errTooLarge = errors.New("payload larger than 16 MiB")

func jsonField(name, doc string) *Field { return &Field{Name: name, Kind: KindJSON, Doc: doc} }

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// appendJSONFloat appends f as a JSON number; NaN and the infinities,
// which JSON has no numbers for, become the strings protojson uses.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}
