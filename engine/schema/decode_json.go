package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// JSON Schema's typed columns. Properties come in the order the schema
// text lists them (encoding/json forgets it: keyOrder reads it off the
// text with a token walk); in documents that have no text here (those of
// references) they come sorted by name.
//
// A value that does not fit its property's schema (a string where an
// integer is declared, say) decodes to null in that column rather than
// failing the record: producers need not validate, and the raw value
// keeps what was sent. An integer beyond int64 is an error, though: it
// fits the schema and has no column to go in.

type jsonWalk struct {
	s     *jsonSchema
	order map[string][]string // JSON pointer of an object in the main document -> its keys in order
}

func (s *jsonSchema) Shape() *Field {
	s.once.Do(func() {
		w := &jsonWalk{s: s, order: keyOrder(s.src.Text)}
		root, ok := s.doc.(map[string]any)
		if !ok {
			return
		}
		f := w.shape(root, "", true, "", "", nil, 0)
		if f.Kind == KindStruct {
			s.shape = f
		}
	})
	return s.shape
}

// keyOrder maps the JSON pointer of every object in text to its keys in
// order; nil when text does not parse.
func keyOrder(text string) map[string][]string {
	if text == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	order := map[string][]string{}
	var walk func(ptr string, depth int) error
	walk = func(ptr string, depth int) error {
		if depth > 4*maxShapeDepth {
			return errors.New("too deep")
		}
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'):
			var keys []string
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, _ := k.(string)
				keys = append(keys, ks)
				if err := walk(ptr+"/"+pointerEscape(ks), depth+1); err != nil {
					return err
				}
			}
			order[ptr] = keys
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(ptr+"/"+strconv.Itoa(i), depth+1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if walk("", 0) != nil {
		return nil
	}
	return order
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func pointerUnescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// shape describes node. ptr is its JSON pointer when main says it lies
// in the main document; refs lists the $refs followed on the way here.
func (w *jsonWalk) shape(node map[string]any, ptr string, main bool, name, doc string, refs []string, depth int) *Field {
	if d, ok := node["description"].(string); ok && doc == "" {
		doc = d
	}
	f := &Field{Name: name, Doc: doc, Kind: KindJSON}
	if depth > maxShapeDepth {
		return f
	}
	if ref, ok := node["$ref"].(string); ok {
		if slices.Contains(refs, ref) {
			return f // recursion
		}
		target, tptr, tmain := w.resolve(ref, main)
		if target == nil {
			return f
		}
		return w.shape(target, tptr, tmain, name, doc, append(refs, ref), depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "if"} {
		if _, ok := node[k]; ok {
			return f
		}
	}
	typ := ""
	switch t := node["type"].(type) {
	case string:
		typ = t
	case []any:
		var others []string
		for _, x := range t {
			if s, _ := x.(string); s != "null" {
				others = append(others, s)
			}
		}
		if len(others) == 1 {
			typ = others[0]
		}
	case nil:
		// Properties make an object of a schema that leaves its type out.
		if _, ok := node["properties"].(map[string]any); ok {
			typ = "object"
		}
	}
	switch typ {
	case "string":
		f.Kind = KindString // date-time too: kept exactly as sent
	case "integer":
		f.Kind = KindInt64
	case "number":
		f.Kind = KindFloat64
	case "boolean":
		f.Kind = KindBool
	case "array":
		if items, ok := node["items"].(map[string]any); ok {
			f.Kind = KindList
			f.Elem = w.shape(items, ptr+"/items", main, "element", "", refs, depth+1)
		}
	case "object":
		props, ok := node["properties"].(map[string]any)
		if !ok {
			if ap, ok := node["additionalProperties"].(map[string]any); ok {
				f.Kind = KindMap
				f.Elem = w.shape(ap, ptr+"/additionalProperties", main, "value", "", refs, depth+1)
			}
			return f
		}
		f.Kind = KindStruct
		for _, k := range w.keys(props, ptr+"/properties", main) {
			sub, ok := props[k].(map[string]any)
			var c *Field
			if ok {
				c = w.shape(sub, ptr+"/properties/"+pointerEscape(k), main, k, "", refs, depth+1)
			} else {
				c = jsonField(k, "") // true, or a non-schema
			}
			f.Fields = append(f.Fields, c)
		}
	}
	return f
}

// keys lists an object's keys in document order when known, else sorted.
func (w *jsonWalk) keys(obj map[string]any, ptr string, main bool) []string {
	if main {
		if ks, ok := w.order[ptr]; ok && len(ks) == len(obj) {
			return ks
		}
	}
	ks := make([]string, 0, len(obj))
	for k := range obj {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// resolve follows a $ref: a pointer into the current document (#/...),
// or a reference's name with an optional pointer into it.
func (w *jsonWalk) resolve(ref string, main bool) (map[string]any, string, bool) {
	base, frag, _ := strings.Cut(ref, "#")
	var doc any
	switch {
	case base == "" && main:
		doc = w.s.doc
	case base == "":
		return nil, "", false // a local pointer inside a referenced document: which one is lost
	default:
		d, ok := w.s.refs[base]
		if !ok {
			return nil, "", false
		}
		doc, main = d, false
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return nil, "", false
	}
	node := doc
	if frag != "" {
		for _, tok := range strings.Split(frag[1:], "/") {
			m, ok := node.(map[string]any)
			if !ok {
				return nil, "", false
			}
			node = m[pointerUnescape(tok)]
		}
	}
	m, ok := node.(map[string]any)
	return m, frag, main && ok
}

// Decode decodes a JSON payload into the types of Shape.
func (s *jsonSchema) Decode(payload []byte) (any, error) {
	f := s.Shape()
	if f == nil {
		return nil, errors.New("json: the schema does not describe an object: no typed value")
	}
	v, err := decodeJSONValue(payload)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("json: the value is not an object")
	}
	return jsonTyped(v, f)
}

func decodeJSONValue(payload []byte) (any, error) {
	if len(payload) > maxDecodeBytes {
		return nil, fmt.Errorf("json: %w", errTooLarge)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("json: decode value: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json: data after the value")
	}
	return v, nil
}

// jsonTyped converts a decoded JSON value to f's kind.
func jsonTyped(v any, f *Field) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch f.Kind {
	case KindStruct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		out := make(map[string]any, len(f.Fields))
		for _, c := range f.Fields {
			x, err := jsonTyped(m[c.Name], c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			out[c.Name] = x
		}
		return out, nil
	case KindList:
		l, ok := v.([]any)
		if !ok {
			return nil, nil
		}
		out := make([]any, len(l))
		for i, x := range l {
			y, err := jsonTyped(x, f.Elem)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = y
		}
		return out, nil
	case KindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			y, err := jsonTyped(x, f.Elem)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = y
		}
		return out, nil
	case KindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, nil
	case KindBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, nil
	case KindFloat64:
		if n, ok := v.(json.Number); ok {
			if x, err := n.Float64(); err == nil {
				return x, nil
			}
		}
		return nil, nil
	case KindInt64:
		n, ok := v.(json.Number)
		if !ok {
			return nil, nil
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return i, nil
		} else if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("json: integer %s out of the int64 range", n)
		}
		// 1.0 or 1e3 is an integer too, when it is one exactly.
		if x, err := n.Float64(); err == nil && x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), nil
		}
		return nil, nil
	case KindJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		return string(b), nil
	}
	return nil, nil
}

// JSON returns the payload itself once it is checked to be JSON.
func (s *jsonSchema) JSON(payload []byte) ([]byte, error) {
	if len(payload) > maxDecodeBytes {
		return nil, fmt.Errorf("json: %w", errTooLarge)
	}
	if !json.Valid(payload) {
		return nil, errors.New("json: the value is not valid JSON")
	}
	return payload, nil
}
