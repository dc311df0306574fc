package schema

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hamba/avro/v2"
)

// parseAvro parses an Avro schema after its references (named types
// defined in other subjects; as in Confluent's registry a reference's
// name is not checked against what its schema defines), all into one
// fresh SchemaCache: hamba's
// avro.Parse would use its process-wide DefaultSchemaCache, which would
// let one subject's types leak into another's.
//
// The canonical form is the schema's JSON re-encoded with sorted keys and
// no whitespace. Avro's Parsing Canonical Form (hamba's String()) drops
// defaults, logical types and aliases, so a schema that changes only a
// default would count as the same schema; Confluent keeps them apart, and
// so does this form. Field order, which matters in Avro, is an array's
// order and is kept.
func parseAvro(src Source, resolve Resolver) (Schema, error) {
	refs, err := collectRefs(src, resolve)
	if err != nil {
		return nil, err
	}
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if _, err := parseAvroText(r.src.Text, cache); err != nil {
			return nil, fmt.Errorf("%w: reference %q (subject %q version %d): %w", ErrInvalid, r.ref.Name, r.ref.Subject, r.ref.Version, err)
		}
	}
	doc, err := decodeJSON(src.Text)
	if err != nil {
		return nil, fmt.Errorf("%w: Avro schema is not JSON: %w", ErrInvalid, err)
	}
	s, err := parseAvroText(src.Text, cache)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &avroSchema{src: src, s: s, canonical: canonicalJSON(doc)}, nil
}

// parseAvroText parses one Avro text into cache, turning a panic of the
// parser on odd input into an error.
func parseAvroText(text string, cache *avro.SchemaCache) (s avro.Schema, err error) {
	if err := checkDepth(text); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("avro parser failed: %v", p)
		}
	}()
	s, err = avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("not an Avro schema")
	}
	return s, nil
}

func (s *avroSchema) Format() Format    { return Avro }
func (s *avroSchema) Source() Source    { return s.src }
func (s *avroSchema) Canonical() string { return s.canonical }

// canRead asks hamba/avro whether s reads what writer wrote (the verdict
// is hamba's), then walks records itself to say which fields are the
// problem: hamba's error names neither field nor record.
func (s *avroSchema) canRead(writer Schema) []string {
	w := writer.(*avroSchema)
	err := avro.NewSchemaCompatibility().Compatible(s.s, w.s)
	if err == nil {
		return nil
	}
	c := avroCompat{sc: avro.NewSchemaCompatibility(), seen: map[[2][32]byte]bool{}}
	c.walk("", s.s, w.s)
	if len(c.why) == 0 {
		return []string{err.Error()}
	}
	return c.why
}

type avroCompat struct {
	sc   *avro.SchemaCompatibility
	seen map[[2][32]byte]bool // reader/writer pairs walked (recursive types)
	why  []string
}

func derefAvro(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroTypeName names a type for a message: a named type by its full name.
func avroTypeName(s avro.Schema) string {
	s = derefAvro(s)
	if n, ok := s.(avro.NamedSchema); ok {
		return fmt.Sprintf("%s %q", s.Type(), n.FullName())
	}
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		return fmt.Sprintf("%s (%s)", s.Type(), l.Logical().Type())
	}
	return string(s.Type())
}

// walk explains why reader r cannot read writer w, at path ("" for the
// top; `field "a" of record "x"` below it).
func (c *avroCompat) walk(path string, r, w avro.Schema) {
	r, w = derefAvro(r), derefAvro(w)
	key := [2][32]byte{r.Fingerprint(), w.Fingerprint()}
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	err := c.sc.Compatible(r, w)
	if err == nil {
		return
	}
	at := func(msg string) string {
		if path == "" {
			return msg
		}
		return path + ": " + msg
	}
	rr, rok := r.(*avro.RecordSchema)
	wr, wok := w.(*avro.RecordSchema)
	switch {
	case rok && wok:
		if rr.FullName() != wr.FullName() && !slices.Contains(rr.Aliases(), wr.FullName()) {
			c.why = append(c.why, at(fmt.Sprintf("record %q cannot read record %q: names differ", rr.FullName(), wr.FullName())))
			return
		}
		n := len(c.why)
		for _, rf := range rr.Fields() {
			wf := avroField(wr, rf)
			fp := fmt.Sprintf("field %q of record %q", rf.Name(), rr.FullName())
			if path != "" {
				fp = path + ": " + fp
			}
			if wf == nil {
				if !rf.HasDefault() {
					c.why = append(c.why, fp+": missing in the writer's schema and has no default")
				}
				continue
			}
			c.walk(fp, rf.Type(), wf.Type())
		}
		if len(c.why) == n {
			c.why = append(c.why, at(err.Error()))
		}
	case r.Type() == avro.Array && w.Type() == avro.Array:
		c.walk(at("items"), r.(*avro.ArraySchema).Items(), w.(*avro.ArraySchema).Items())
	case r.Type() == avro.Map && w.Type() == avro.Map:
		c.walk(at("values"), r.(*avro.MapSchema).Values(), w.(*avro.MapSchema).Values())
	case r.Type() == avro.Enum && w.Type() == avro.Enum:
		re, we := r.(*avro.EnumSchema), w.(*avro.EnumSchema)
		if re.HasDefault() {
			c.why = append(c.why, at(err.Error()))
			return
		}
		for _, sym := range we.Symbols() {
			if !slices.Contains(re.Symbols(), sym) {
				c.why = append(c.why, at(fmt.Sprintf("enum %q lacks symbol %q of the writer's schema", re.FullName(), sym)))
			}
		}
		if len(we.Symbols()) > 0 && re.FullName() != we.FullName() {
			c.why = append(c.why, at(fmt.Sprintf("enum %q cannot read enum %q: names differ", re.FullName(), we.FullName())))
		}
	case r.Type() != w.Type() && r.Type() != avro.Union && w.Type() != avro.Union:
		c.why = append(c.why, at(fmt.Sprintf("type %s written cannot be read as %s", avroTypeName(w), avroTypeName(r))))
	default:
		c.why = append(c.why, at(fmt.Sprintf("%s written cannot be read as %s: %v", avroTypeName(w), avroTypeName(r), err)))
	}
}

// avroField finds the writer's field that reader field rf reads: by name,
// or by one of rf's aliases.
func avroField(w *avro.RecordSchema, rf *avro.Field) *avro.Field {
	for _, f := range w.Fields() {
		if f.Name() == rf.Name() {
			return f
		}
	}
	for _, f := range w.Fields() {
		if slices.Contains(rf.Aliases(), f.Name()) {
			return f
		}
	}
	return nil
}
