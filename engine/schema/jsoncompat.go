package schema

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// JSON Schema compatibility is done by hand: no Go library computes it.
// The rules are Confluent's documented ones, checked keyword by keyword:
// the reader (the new schema for BACKWARD) must accept every instance the
// writer accepted. Each keyword is a constraint and constraints conjoin,
// so a reader constraint that is looser than the writer's (or absent) is
// fine. Keywords whose comparison is not decided here (oneOf, anyOf,
// allOf, not, patternProperties, ...) are compatible only when the reader
// has none or the same one as the writer.

// jsonAnnotations change no instance's validity.
var jsonAnnotations = map[string]bool{
	"title": true, "description": true, "$comment": true, "default": true, "examples": true,
	"$id": true, "id": true, "$schema": true, "definitions": true, "$defs": true,
	"readOnly": true, "writeOnly": true, "deprecated": true, "$anchor": true,
	"contentMediaType": true, "contentEncoding": true,
}

// jsonHandled are compared by the rules in check.
var jsonHandled = map[string]bool{
	"$ref": true, "type": true, "enum": true, "const": true,
	"maximum": true, "exclusiveMaximum": true, "maxLength": true, "maxItems": true, "maxProperties": true,
	"minimum": true, "exclusiveMinimum": true, "minLength": true, "minItems": true, "minProperties": true,
	"multipleOf": true, "uniqueItems": true,
	"properties": true, "additionalProperties": true, "required": true, "items": true,
}

// jsonInteracting constrain together with other keywords (which properties
// additionalProperties applies to, which items additionalItems does), so
// even their absence from the reader is decided only by equality.
var jsonInteracting = map[string]bool{
	"patternProperties": true, "additionalItems": true, "prefixItems": true,
	"unevaluatedProperties": true, "unevaluatedItems": true,
}

// jsonUpper and jsonLower are bounds: the reader's must be at least as
// loose as the writer's, and a writer without one is unbounded.
var (
	jsonUpper = []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"}
	jsonLower = []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"}
	// jsonBoundType is the instance type a bound applies to.
	jsonBoundType = map[string]string{
		"maximum": "number", "exclusiveMaximum": "number", "minimum": "number", "exclusiveMinimum": "number",
		"multipleOf": "number", "maxLength": "string", "minLength": "string",
		"maxItems": "array", "minItems": "array", "uniqueItems": "array",
		"maxProperties": "object", "minProperties": "object",
	}
)

// jnode is a schema value with the document it sits in, for local $refs.
type jnode struct {
	v    any
	root any
	refs map[string]any
}

// jsonMaxReasons bounds the reasons listed; jsonMaxDepth the nesting a
// walk follows (a $ref cycle against one of another length never meets
// a pair it has seen before).
const (
	jsonMaxReasons = 100
	jsonMaxDepth   = 2 * maxDepth
)

// jpath is where a walk is, as a JSON pointer into the reader, built
// only when a reason is added.
type jpath struct {
	up    *jpath
	seg   string
	depth int
}

func (p *jpath) at(segs ...string) *jpath {
	for _, seg := range segs {
		d := 1
		if p != nil {
			d = p.depth + 1
		}
		p = &jpath{up: p, seg: seg, depth: d}
	}
	return p
}

func (p *jpath) String() string {
	var segs []string
	for ; p != nil; p = p.up {
		segs = append(segs, strings.ReplaceAll(strings.ReplaceAll(p.seg, "~", "~0"), "/", "~1"))
	}
	slices.Reverse(segs)
	return strings.Join(append([]string{"#"}, segs...), "/")
}

// jsonMaxSteps bounds the work of one comparison, in schema pairs
// visited (and bytes rendered, see canon): $refs can make two schemas'
// walk the product of their sizes.
const jsonMaxSteps = 100_000

type jsonCompat struct {
	seen   map[[2]uintptr]bool
	steps  int
	gaveUp bool
	why    []string
}

func (s *jsonSchema) canRead(writer Schema) []string {
	w := writer.(*jsonSchema)
	c := jsonCompat{seen: map[[2]uintptr]bool{}}
	c.check(nil, jnode{s.doc, s.doc, s.refs}, jnode{w.doc, w.doc, w.refs})
	return c.why
}

// canon renders v for a comparison, counting the work against
// jsonMaxSteps (a step per 64 bytes): a large subschema compared at many
// nodes would otherwise be re-rendered without bound.
func (c *jsonCompat) canon(v any) string {
	s := canonicalJSON(v)
	c.steps += len(s) / 64
	return s
}

func (c *jsonCompat) add(path *jpath, format string, args ...any) {
	switch {
	case len(c.why) < jsonMaxReasons:
		c.why = append(c.why, path.String()+": "+fmt.Sprintf(format, args...))
	case len(c.why) == jsonMaxReasons:
		c.why = append(c.why, fmt.Sprintf("and more (only the first %d reasons are listed)", jsonMaxReasons))
	}
}

// deref follows $ref (local JSON pointers and the schema's references)
// until a schema without one; ok is false for one it cannot follow (an
// anchor, an unknown URL, a cycle of $refs, a $ref with assertions beside
// it).
func deref(n jnode) (jnode, bool) {
	for range 32 {
		m, isMap := n.v.(map[string]any)
		if !isMap {
			return n, true
		}
		ref, isRef := m["$ref"].(string)
		if !isRef {
			return n, true
		}
		for k := range m {
			if k != "$ref" && !jsonAnnotations[k] {
				// Draft 2019+ applies a $ref's siblings too (draft 7
				// ignores them): compare such a node by equality.
				return n, false
			}
		}
		loc, frag, _ := strings.Cut(ref, "#")
		doc := n.root
		if loc != "" {
			d, ok := lookupRef(n.refs, loc)
			if !ok {
				base, _ := url.Parse(jsonRootURL)
				u, err := url.Parse(loc)
				if err != nil {
					return n, false
				}
				if d, ok = lookupRef(n.refs, base.ResolveReference(u).String()); !ok {
					return n, false
				}
			}
			doc = d
		}
		v, ok := jsonPointer(doc, frag)
		if !ok {
			return n, false
		}
		n = jnode{v, doc, n.refs}
	}
	return n, false // a $ref chain this long is a cycle
}

// jsonPointer resolves an RFC 6901 pointer (as a URL fragment) in doc.
func jsonPointer(doc any, frag string) (any, bool) {
	if frag == "" {
		return doc, true
	}
	if p, err := url.PathUnescape(frag); err == nil {
		frag = p
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false // an anchor: not followed
	}
	v := doc
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// acceptsAll is true for a schema that accepts every instance.
func acceptsAll(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case map[string]any:
		for k := range x {
			if !jsonAnnotations[k] {
				return false
			}
		}
		return true
	}
	return false
}

func asMap(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// typeSet reads "type"; nil means any type.
func typeSet(m map[string]any) map[string]bool {
	switch t := m["type"].(type) {
	case string:
		return map[string]bool{t: true}
	case []any:
		set := map[string]bool{}
		for _, v := range t {
			if s, ok := v.(string); ok {
				set[s] = true
			}
		}
		return set
	}
	return nil
}

// enumTypes is the set of types of a schema's enum or const values; nil
// without either.
func enumTypes(m map[string]any) map[string]bool {
	var vals []any
	if e, ok := m["enum"].([]any); ok {
		vals = e
	} else if v, ok := m["const"]; ok {
		vals = []any{v}
	} else {
		return nil
	}
	set := map[string]bool{}
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			set["null"] = true
		case bool:
			set["boolean"] = true
		case string:
			set["string"] = true
		case []any:
			set["array"] = true
		case map[string]any:
			set["object"] = true
		default:
			if n, ok := number(x); ok && n.IsInt() {
				set["integer"] = true
			} else {
				set["number"] = true
			}
		}
	}
	return set
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func mapID(v any) uintptr {
	if m, ok := v.(map[string]any); ok {
		return reflect.ValueOf(m).Pointer()
	}
	return 0
}

// check adds why reader r does not accept every instance writer w does.
func (c *jsonCompat) check(path *jpath, r, w jnode) {
	if c.steps++; c.steps >= jsonMaxSteps {
		if !c.gaveUp {
			c.gaveUp = true
			// Listed even past jsonMaxReasons: it says the list is partial.
			c.why = append(c.why, fmt.Sprintf("%s: the schemas are too large to compare (over %d steps)", path, jsonMaxSteps))
		}
		return
	}
	var rok, wok bool
	r, rok = deref(r)
	w, wok = deref(w)
	if !rok || !wok {
		if c.canon(r.v) != c.canon(w.v) {
			c.add(path, "a $ref that cannot be followed changed")
		}
		return
	}
	if acceptsAll(r.v) || w.v == false {
		return
	}
	if path != nil && path.depth > jsonMaxDepth {
		c.add(path, "nested too deeply to compare (over %d levels)", jsonMaxDepth)
		return
	}
	if r.v == false {
		c.add(path, "the schema accepts nothing now")
		return
	}
	key := [2]uintptr{mapID(r.v), mapID(w.v)}
	if key[0] != 0 && key[1] != 0 {
		if c.seen[key] {
			return
		}
		c.seen[key] = true
	}
	rm, wm := asMap(r.v), asMap(w.v)

	rt, wt := typeSet(rm), typeSet(wm)
	if wt == nil {
		wt = enumTypes(wm)
	}
	if rt != nil {
		if wt == nil {
			c.add(path, "type narrowed from any type to %v", sortedKeys(rt))
		} else {
			for _, t := range sortedKeys(wt) {
				if !rt[t] && !(t == "integer" && rt["number"]) {
					c.add(path, "type narrowed: %q no longer allowed (now %v)", t, sortedKeys(rt))
				}
			}
		}
	}
	// writes is whether the writer accepts instances of type t, for the
	// keywords that apply to t alone.
	writes := func(t string) bool {
		return wt == nil || wt[t] || (t == "number" && wt["integer"]) || (t == "integer" && wt["number"])
	}

	c.checkEnum(path, rm, wm)

	for _, k := range jsonUpper {
		if rv, ok := rm[k]; ok && writes(jsonBoundType[k]) {
			c.bound(path, k, rv, wm, true)
		}
	}
	for _, k := range jsonLower {
		if rv, ok := rm[k]; ok && writes(jsonBoundType[k]) {
			c.bound(path, k, rv, wm, false)
		}
	}
	if rv, ok := rm["multipleOf"]; ok && writes("number") {
		rn, rok := number(rv)
		wn, wok := number(wm["multipleOf"])
		if !rok || !wok || rn.Sign() == 0 || !wn.Quo(wn, rn).IsInt() {
			c.add(path, "multipleOf %v is stricter than the writer's %v", rv, orNone(wm["multipleOf"]))
		}
	}
	if rm["uniqueItems"] == true && wm["uniqueItems"] != true && writes("array") {
		c.add(path, "uniqueItems is required now")
	}

	for _, k := range sortedKeys(rm) {
		if jsonAnnotations[k] || jsonHandled[k] {
			continue
		}
		if c.canon(rm[k]) != c.canon(wm[k]) {
			c.add(path, "%q changed (compatible only when unchanged)", k)
		}
	}
	for _, k := range sortedKeys(wm) {
		if _, inR := rm[k]; !inR && jsonInteracting[k] {
			c.add(path, "%q removed (compatible only when unchanged)", k)
		}
	}

	if writes("object") {
		c.checkObject(path, r, w, rm, wm)
	}
	if writes("array") {
		c.checkItems(path, r, w, rm, wm)
	}
}

func orNone(v any) any {
	if v == nil {
		return "none"
	}
	return v
}

func (c *jsonCompat) checkEnum(path *jpath, rm, wm map[string]any) {
	values := func(m map[string]any) ([]any, bool) {
		if e, ok := m["enum"].([]any); ok {
			return e, true
		}
		if v, ok := m["const"]; ok {
			return []any{v}, true
		}
		return nil, false
	}
	rv, rok := values(rm)
	if !rok {
		return
	}
	wv, wok := values(wm)
	if !wok {
		c.add(path, "values restricted to %s now", c.canon(rv))
		return
	}
	c.steps += (len(rv) + len(wv)) / 8
	have := map[string]bool{}
	for _, v := range rv {
		have[c.canon(v)] = true
	}
	for _, v := range wv {
		if s := c.canon(v); !have[s] {
			c.add(path, "enum value %s removed", s)
		}
	}
}

// bound checks the reader's bound k (rv; an upper one or a lower one)
// against the writer's, which must lie within it.
func (c *jsonCompat) bound(path *jpath, k string, rv any, wm map[string]any, upper bool) {
	rn, rok := number(rv)
	wv, has := wm[k]
	if !rok {
		// Draft 4's boolean exclusiveMaximum/Minimum: equality only.
		if c.canon(rv) != c.canon(wv) {
			c.add(path, "%s changed from %s to %s", k, c.canon(orNone(wv)), c.canon(rv))
		}
		return
	}
	if !has {
		c.add(path, "%s %s added", k, c.canon(rv))
		return
	}
	wn, wok := number(wv)
	if !wok || (upper && wn.Cmp(rn) > 0) || (!upper && wn.Cmp(rn) < 0) {
		c.add(path, "%s changed from %s to %s", k, c.canon(wv), c.canon(rv))
	}
}

func (c *jsonCompat) checkObject(path *jpath, r, w jnode, rm, wm map[string]any) {
	rp, wp := asMap(rm["properties"]), asMap(wm["properties"])
	rAP, rHas := rm["additionalProperties"]
	wAP, wHas := wm["additionalProperties"]
	if !rHas {
		rAP = true
	}
	if !wHas {
		wAP = true
	}
	sub := func(p *jpath, rv, wv any) { c.check(p, jnode{rv, r.root, r.refs}, jnode{wv, w.root, w.refs}) }
	for _, name := range sortedKeys(wp) {
		p := path.at("properties", name)
		if rv, ok := rp[name]; ok {
			sub(p, rv, wp[name])
			continue
		}
		switch {
		case rAP == false:
			c.add(p, "property %q removed from a closed content model", name)
		case !acceptsAll(rAP):
			sub(p, rAP, wp[name])
		}
	}
	for _, name := range sortedKeys(rp) {
		if _, ok := wp[name]; ok {
			continue
		}
		p := path.at("properties", name)
		switch {
		case wAP == false:
			// The writer wrote no such property.
		case !acceptsAll(wAP):
			sub(p, rp[name], wAP)
		case !acceptsAll(rp[name]):
			if rr, ok := deref(jnode{rp[name], r.root, r.refs}); !ok || !acceptsAll(rr.v) {
				c.add(p, "property %q added to an open content model", name)
			}
		}
	}
	switch {
	case acceptsAll(rAP):
	case rAP == false:
		if wAP != false {
			c.add(path, "content model closed (additionalProperties false)")
		}
	case wAP == false:
	case acceptsAll(wAP):
		c.add(path, "additionalProperties narrowed")
	default:
		sub(path.at("additionalProperties"), rAP, wAP)
	}
	wreq := map[string]bool{}
	if req, ok := wm["required"].([]any); ok {
		for _, v := range req {
			if s, ok := v.(string); ok {
				wreq[s] = true
			}
		}
	}
	if req, ok := rm["required"].([]any); ok {
		for _, v := range req {
			if s, ok := v.(string); ok && !wreq[s] {
				c.add(path, "property %q is required now", s)
			}
		}
	}
}

func (c *jsonCompat) checkItems(path *jpath, r, w jnode, rm, wm map[string]any) {
	ri, rHas := rm["items"]
	if !rHas {
		return
	}
	wi, wHas := wm["items"]
	if !wHas {
		wi = true
	}
	_, rTuple := ri.([]any)
	_, wTuple := wi.([]any)
	if rTuple || wTuple {
		if c.canon(ri) != c.canon(wi) {
			c.add(path, "tuple \"items\" changed (compatible only when unchanged)")
		}
		return
	}
	c.check(path.at("items"), jnode{ri, r.root, r.refs}, jnode{wi, w.root, w.refs})
}
