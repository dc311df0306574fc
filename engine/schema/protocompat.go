package schema

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf compatibility is done by hand over the two compiled
// descriptors, by Confluent's rules: the package must stay; no message or
// enum defined in the file (nested ones included) may go; a field number
// must keep a wire-compatible type; a required (proto2) field may be
// neither added nor dropped; a field may not move into or out of a
// oneof; an enum keeps its values. Dropping an optional field and adding
// a field number are fine: unknown fields are skipped and absent ones
// read as their defaults.

// protoWireGroup puts kinds whose wire encodings read as each other in one
// group (0: a kind only reads itself).
func protoWireGroup(k protoreflect.Kind) int {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind:
		return 1
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return 2
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return 3
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return 4
	case protoreflect.StringKind, protoreflect.BytesKind:
		return 5
	}
	return 0
}

type protoCompat struct {
	rPkg, wPkg string
	why        []string
}

func (s *protoSchema) canRead(writer Schema) []string {
	r, w := s.file, writer.(*protoSchema).file
	c := protoCompat{rPkg: string(r.Package()), wPkg: string(w.Package())}
	if c.rPkg != c.wPkg {
		c.why = append(c.why, fmt.Sprintf("package changed from %q to %q", c.wPkg, c.rPkg))
	}
	rMsgs, rEnums := map[string]protoreflect.MessageDescriptor{}, map[string]protoreflect.EnumDescriptor{}
	var wMsgs []protoreflect.MessageDescriptor
	var wEnums []protoreflect.EnumDescriptor
	collectProto(r.Messages(), r.Enums(), func(m protoreflect.MessageDescriptor) { rMsgs[c.rel(m.FullName(), c.rPkg)] = m },
		func(e protoreflect.EnumDescriptor) { rEnums[c.rel(e.FullName(), c.rPkg)] = e })
	collectProto(w.Messages(), w.Enums(), func(m protoreflect.MessageDescriptor) { wMsgs = append(wMsgs, m) },
		func(e protoreflect.EnumDescriptor) { wEnums = append(wEnums, e) })
	for _, wm := range wMsgs {
		name := c.rel(wm.FullName(), c.wPkg)
		rm, ok := rMsgs[name]
		if !ok {
			c.why = append(c.why, fmt.Sprintf("message %q removed", name))
			continue
		}
		c.message(name, rm, wm)
	}
	for _, we := range wEnums {
		name := c.rel(we.FullName(), c.wPkg)
		re, ok := rEnums[name]
		if !ok {
			c.why = append(c.why, fmt.Sprintf("enum %q removed", name))
			continue
		}
		vals := we.Values()
		for i := range vals.Len() {
			v := vals.Get(i)
			if re.Values().ByNumber(v.Number()) == nil {
				c.why = append(c.why, fmt.Sprintf("value %s (%d) of enum %q removed", v.Name(), v.Number(), name))
			}
		}
	}
	return c.why
}

// rel is a full name without its file's package, so that a changed
// package is reported once rather than as every message removed.
func (c *protoCompat) rel(n protoreflect.FullName, pkg string) string {
	if pkg == "" {
		return string(n)
	}
	return strings.TrimPrefix(string(n), pkg+".")
}

// collectProto calls onMsg and onEnum for every message and enum defined
// in a file, nested ones included, in file order (map entries left out:
// their fields are compared as the map field's key and value).
func collectProto(msgs protoreflect.MessageDescriptors, enums protoreflect.EnumDescriptors,
	onMsg func(protoreflect.MessageDescriptor), onEnum func(protoreflect.EnumDescriptor)) {
	for i := range enums.Len() {
		onEnum(enums.Get(i))
	}
	for i := range msgs.Len() {
		m := msgs.Get(i)
		if m.IsMapEntry() {
			continue
		}
		onMsg(m)
		collectProto(m.Messages(), m.Enums(), onMsg, onEnum)
	}
}

// realOneof is a field's oneof, unless that is the synthetic one of a
// proto3 optional field.
func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

func (c *protoCompat) message(name string, rm, wm protoreflect.MessageDescriptor) {
	wf, rf := wm.Fields(), rm.Fields()
	for i := range wf.Len() {
		w := wf.Get(i)
		at := fmt.Sprintf("field %q (%d) of message %q", w.Name(), w.Number(), name)
		r := rf.ByNumber(w.Number())
		if r == nil {
			if w.Cardinality() == protoreflect.Required {
				c.why = append(c.why, at+": required field removed")
			}
			continue
		}
		c.field(at, r, w)
		if r.Cardinality() == protoreflect.Required && w.Cardinality() != protoreflect.Required {
			c.why = append(c.why, at+": required now")
		}
		ro, wo := realOneof(r), realOneof(w)
		switch {
		case ro != nil && wo == nil:
			c.why = append(c.why, fmt.Sprintf("%s: moved into oneof %q", at, ro.Name()))
		case ro == nil && wo != nil:
			c.why = append(c.why, fmt.Sprintf("%s: moved out of oneof %q", at, wo.Name()))
		case ro != nil && ro.Name() != wo.Name():
			c.why = append(c.why, fmt.Sprintf("%s: moved from oneof %q to oneof %q", at, wo.Name(), ro.Name()))
		}
	}
	for i := range rf.Len() {
		r := rf.Get(i)
		if r.Cardinality() == protoreflect.Required && wf.ByNumber(r.Number()) == nil {
			c.why = append(c.why, fmt.Sprintf("field %q (%d) of message %q: required field added", r.Name(), r.Number(), name))
		}
	}
}

// field compares the types of one field number.
func (c *protoCompat) field(at string, r, w protoreflect.FieldDescriptor) {
	if r.IsMap() != w.IsMap() {
		c.why = append(c.why, fmt.Sprintf("%s: writer's %s cannot be read as %s", at, protoTypeName(w, c.wPkg), protoTypeName(r, c.rPkg)))
		return
	}
	if r.IsMap() {
		c.field(at+" (map key)", r.MapKey(), w.MapKey())
		c.field(at+" (map value)", r.MapValue(), w.MapValue())
		return
	}
	rk, wk := r.Kind(), w.Kind()
	compatible := rk == wk || (protoWireGroup(rk) != 0 && protoWireGroup(rk) == protoWireGroup(wk))
	if compatible {
		switch rk {
		case protoreflect.MessageKind, protoreflect.GroupKind:
			compatible = c.rel(r.Message().FullName(), c.rPkg) == c.rel(w.Message().FullName(), c.wPkg)
		case protoreflect.EnumKind:
			compatible = c.rel(r.Enum().FullName(), c.rPkg) == c.rel(w.Enum().FullName(), c.wPkg)
		}
	}
	if !compatible {
		c.why = append(c.why, fmt.Sprintf("%s: writer's %s cannot be read as %s", at, protoTypeName(w, c.wPkg), protoTypeName(r, c.rPkg)))
		return
	}
	rRep, wRep := r.Cardinality() == protoreflect.Repeated, w.Cardinality() == protoreflect.Repeated
	if rRep != wRep && protoWireGroup(rk) != 1 && protoWireGroup(rk) != 2 && protoWireGroup(rk) != 3 && protoWireGroup(rk) != 4 {
		// Scalar numbers read as each other repeated or not (the last
		// value wins); strings, bytes and messages do not.
		c.why = append(c.why, fmt.Sprintf("%s: changed between repeated and singular", at))
	}
}

func protoTypeName(f protoreflect.FieldDescriptor, pkg string) string {
	rel := func(n protoreflect.FullName) string {
		if pkg == "" {
			return string(n)
		}
		return strings.TrimPrefix(string(n), pkg+".")
	}
	switch {
	case f.IsMap():
		return "map"
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return fmt.Sprintf("message %s", rel(f.Message().FullName()))
	case f.Kind() == protoreflect.EnumKind:
		return fmt.Sprintf("enum %s", rel(f.Enum().FullName()))
	}
	return f.Kind().String()
}
