package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// Bounds on what Parse accepts, checked before the text is decoded: the
// registry takes schemas from clients, so a hostile one must get an error,
// not a long parse or a deep recursion.
const (
	// MaxTextLen bounds one schema text (the schema or a reference).
	MaxTextLen = 1 << 20
	// maxTotalLen bounds a schema with all its references.
	maxTotalLen = 8 << 20
	// maxRefs bounds the references of a schema, transitively counted
	// (which also bounds their depth).
	maxRefs = 100
	// maxDepth bounds the nesting of a JSON document (Avro, JSON Schema).
	// The compatibility walks recurse along it.
	maxDepth = 200
)

// resolved is one reference with its source, as collectRefs found them.
type resolved struct {
	ref Reference
	src Source
}

// collectRefs resolves the references of src transitively and returns
// them dependencies first, each once. It refuses a reference cycle, more
// than maxRefs references, a reference of another format than src's and
// sources too big, so that no input makes it loop or grow unbounded.
func collectRefs(src Source, resolve Resolver) ([]resolved, error) {
	if len(src.Text) > MaxTextLen {
		return nil, fmt.Errorf("%w: schema text of %d bytes is over the limit of %d", ErrInvalid, len(src.Text), MaxTextLen)
	}
	if len(src.References) == 0 {
		return nil, nil
	}
	if resolve == nil {
		return nil, fmt.Errorf("%w: the schema has references but nothing resolves them", ErrInvalid)
	}
	type state uint8
	const (
		visiting state = iota + 1
		done
	)
	var (
		out   []resolved
		seen  = map[Reference]state{}
		total = len(src.Text)
		visit func(ref Reference, depth int) error
	)
	visit = func(ref Reference, depth int) error {
		switch seen[ref] {
		case visiting:
			return fmt.Errorf("%w: reference %q (subject %q version %d) refers back to itself (a reference cycle)", ErrInvalid, ref.Name, ref.Subject, ref.Version)
		case done:
			return nil
		}
		if len(seen) >= maxRefs || depth > maxRefs {
			return fmt.Errorf("%w: more than %d references", ErrInvalid, maxRefs)
		}
		if ref.Name == "" {
			return fmt.Errorf("%w: a reference (subject %q version %d) has no name", ErrInvalid, ref.Subject, ref.Version)
		}
		seen[ref] = visiting
		rs, err := resolve(ref)
		if err != nil {
			return fmt.Errorf("%w: reference %q (subject %q version %d): %w", ErrInvalid, ref.Name, ref.Subject, ref.Version, err)
		}
		if rs.Format == "" {
			rs.Format = Avro
		}
		if rs.Format != src.Format {
			return fmt.Errorf("%w: reference %q (subject %q version %d) is %s, not %s", ErrInvalid, ref.Name, ref.Subject, ref.Version, rs.Format, src.Format)
		}
		if len(rs.Text) > MaxTextLen {
			return fmt.Errorf("%w: reference %q: schema text of %d bytes is over the limit of %d", ErrInvalid, ref.Name, len(rs.Text), MaxTextLen)
		}
		if total += len(rs.Text); total > maxTotalLen {
			return fmt.Errorf("%w: the schema and its references are over %d bytes", ErrInvalid, maxTotalLen)
		}
		for _, child := range rs.References {
			if err := visit(child, depth+1); err != nil {
				return err
			}
		}
		seen[ref] = done
		out = append(out, resolved{ref: ref, src: rs})
		return nil
	}
	for _, ref := range src.References {
		if err := visit(ref, 1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeJSON decodes one JSON document with numbers kept as json.Number
// (so a default of 1.50 stays 1.50), refusing trailing data and nesting
// deeper than maxDepth.
func decodeJSON(text string) (any, error) {
	if err := checkDepth(text); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, jsonErr(text, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON document at offset %d", dec.InputOffset())
	}
	if err := checkNumbers(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// Bounds on a number in a schema document. Numbers are compared exactly
// (math/big), and the cost of that grows with a literal's digits and
// exponent: 1e999999 alone takes the JSON Schema compiler 50ms.
const (
	maxNumberLen = 100
	maxExponent  = 1000
)

// checkNumbers refuses numbers past maxNumberLen digits or maxExponent.
func checkNumbers(v any) error {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if len(s) > maxNumberLen {
			return fmt.Errorf("number %.20s... is longer than %d characters", s, maxNumberLen)
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if e, err := strconv.Atoi(s[i+1:]); err != nil || e > maxExponent || e < -maxExponent {
				return fmt.Errorf("number %s: exponent out of range (at most %d)", s, maxExponent)
			}
		}
	case []any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonErr says where a JSON syntax error is, as line:col.
func jsonErr(text string, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(text, int(se.Offset))
		return fmt.Errorf("line %d:%d: %v", line, col, se)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		line, col := lineCol(text, len(text))
		return fmt.Errorf("line %d:%d: unexpected end of the JSON document", line, col)
	}
	return err
}

func lineCol(text string, off int) (line, col int) {
	if off > len(text) {
		off = len(text)
	}
	line, col = 1, 1
	for i := 0; i < off; i++ {
		if text[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// checkDepth scans text for nesting deeper than maxDepth before anything
// is decoded (strings are skipped so brackets in them do not count).
func checkDepth(text string) error {
	depth, inStr, esc := 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				line, col := lineCol(text, i)
				return fmt.Errorf("line %d:%d: nested deeper than %d levels", line, col, maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// canonicalJSON renders a decoded document with object keys sorted, no
// whitespace and no HTML escaping: the same document written with other
// spacing or key order renders the same.
func canonicalJSON(doc any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		// A document decodeJSON returned always encodes.
		return fmt.Sprintf("%v", doc)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// number reads a JSON number as an exact rational.
func number(v any) (*big.Rat, bool) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = string(n)
	case float64:
		return new(big.Rat).SetFloat64(n), true
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}
