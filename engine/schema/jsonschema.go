package schema

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonRootURL is where a JSON schema without an absolute $id sits for the
// compiler: a relative {"$ref": "other.json"} resolves next to it, to
// jsonRootURL's directory, where each reference is found by its name.
const jsonRootURL = "https://schemas.korvet.invalid/subject/schema.json"

// parseJSON decodes a JSON Schema and compiles it with its references
// (santhosh-tekuri/jsonschema, draft 7 unless the schema's $schema says
// otherwise, as in Confluent's registry).
func parseJSON(src Source, resolve Resolver) (Schema, error) {
	refs, err := collectRefs(src, resolve)
	if err != nil {
		return nil, err
	}
	s := &jsonSchema{src: src, refs: make(map[string]any, len(refs))}
	for _, r := range refs {
		doc, err := decodeJSON(r.src.Text)
		if err != nil {
			return nil, fmt.Errorf("%w: reference %q (subject %q version %d) is not JSON: %w", ErrInvalid, r.ref.Name, r.ref.Subject, r.ref.Version, err)
		}
		if _, dup := s.refs[r.ref.Name]; dup {
			return nil, fmt.Errorf("%w: two references are named %q", ErrInvalid, r.ref.Name)
		}
		s.refs[r.ref.Name] = doc
	}
	if s.doc, err = decodeJSON(src.Text); err != nil {
		return nil, fmt.Errorf("%w: JSON Schema is not JSON: %w", ErrInvalid, err)
	}
	switch s.doc.(type) {
	case bool, map[string]any:
	default:
		return nil, fmt.Errorf("%w: a JSON Schema is an object or a boolean, not %s", ErrInvalid, jsonKind(s.doc))
	}
	if s.compiled, err = compileJSON(s.doc, s.refs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s.canonical = canonicalJSON(s.doc)
	return s, nil
}

// compileJSON compiles doc with a loader that knows the references and
// nothing else: the compiler never reads a file or the network.
func compileJSON(doc any, refs map[string]any) (sch *jsonschema.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			sch, err = nil, fmt.Errorf("JSON Schema compiler failed: %v", p)
		}
	}()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(refLoader(refs))
	if err := c.AddResource(jsonRootURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(jsonRootURL)
}

// refLoader serves a schema's references to the compiler.
type refLoader map[string]any

func (l refLoader) Load(u string) (any, error) {
	if doc, ok := lookupRef(l, u); ok {
		return doc, nil
	}
	return nil, fmt.Errorf("%q is not one of the schema's references (the registry fetches nothing else)", u)
}

// lookupRef finds the reference a $ref URL (without its fragment) names:
// the reference named so, or named relative to jsonRootURL, or, for a
// schema whose $id moves the base elsewhere, the reference whose name is
// the URL's last path segments.
func lookupRef(refs map[string]any, u string) (any, bool) {
	if doc, ok := refs[u]; ok {
		return doc, true
	}
	names := sortedKeys(refs)
	base, _ := url.Parse(jsonRootURL)
	for _, name := range names {
		if ru, err := url.Parse(name); err == nil && base.ResolveReference(ru).String() == u {
			return refs[name], true
		}
	}
	for _, name := range names {
		if strings.HasSuffix(u, "/"+strings.TrimPrefix(name, "./")) {
			return refs[name], true
		}
	}
	return nil, false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

func (s *jsonSchema) Format() Format    { return JSON }
func (s *jsonSchema) Source() Source    { return s.src }
func (s *jsonSchema) Canonical() string { return s.canonical }
