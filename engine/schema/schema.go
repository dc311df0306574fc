// Package schema knows the formats of korvet's schema registry: Avro,
// JSON Schema and Protobuf. It parses a schema with its references (each
// format through a well-kept library), decides whether a new version is
// compatible with the ones before it at a Confluent compatibility level,
// decodes registry-framed record values (magic byte 0, 4-byte schema id,
// payload), renders them as JSON, and describes a schema's values as a
// tree of typed columns (Shape) for the cold tier's Iceberg tables.
//
// It holds no state and talks to nothing: the registry (engine/registry)
// stores schemas in Redis and hands sources to Parse.
package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Format is a schema type as the Confluent API names it ("schemaType";
// absent means AVRO).
type Format string

// The formats the registry serves.
const (
	Avro     Format = "AVRO"
	JSON     Format = "JSON"
	Protobuf Format = "PROTOBUF"
)

// ParseFormat accepts a "schemaType" value; "" is AVRO, as in Confluent's API.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToUpper(s)); f {
	case "":
		return Avro, nil
	case Avro, JSON, Protobuf:
		return f, nil
	}
	return "", fmt.Errorf("unknown schema type %q: want AVRO, JSON or PROTOBUF", s)
}

// Reference names another registered schema that a schema imports: for
// Avro a named type's full name, for JSON Schema the $ref URL, for
// Protobuf the import path.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Source is a schema as registered: its format, text and references.
type Source struct {
	Format     Format      `json:"schemaType"`
	Text       string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
}

// Resolver returns the source of a reference, which is registered already.
// Parse calls it for references of references too.
type Resolver func(Reference) (Source, error)

// ErrInvalid wraps every reason a schema does not parse (HTTP 422, error
// code 42201 in the registry's API).
var ErrInvalid = errors.New("invalid schema")

// Schema is a parsed schema.
type Schema interface {
	Format() Format
	Source() Source
	// Canonical is the schema's normalized text: two registrations whose
	// canonical forms and references are equal are the same schema and
	// get the same id.
	Canonical() string
	// Shape describes the values of this schema as typed columns: a
	// struct for an Avro record, a JSON Schema object, or the first
	// message of a .proto file (Confluent's default message index [0]).
	// It is nil when a value is not a record/object/message (a bare
	// Avro string, say): such a topic gets no typed columns.
	Shape() *Field
	// Decode decodes a value's payload (what follows the 5-byte frame
	// header; for Protobuf this starts with the message indexes) into Go
	// values laid out as Shape says (see Field). Values of other Protobuf
	// messages than [0] are an error.
	Decode(payload []byte) (any, error)
	// JSON renders a value's payload as JSON (Avro: natural JSON, unions
	// unwrapped; Protobuf: protojson of the indexed message; JSON Schema:
	// the payload as it is, after checking it is JSON).
	JSON(payload []byte) ([]byte, error)

	// canRead lists why data written with writer cannot be read with this
	// schema as the reader; nil when it can. writer has the same Format.
	canRead(writer Schema) []string
}

// The concrete schemas. Parse fills them; the Shape, Decode and JSON
// methods read them.
type (
	avroSchema struct {
		src       Source
		s         avro.Schema // with referenced named types resolved
		canonical string

		once sync.Once // builds comp: Shape and decoder (helper D)
		comp *avroCompiled
	}
	jsonSchema struct {
		src       Source
		doc       any            // the schema document as decoded by encoding/json (UseNumber)
		refs      map[string]any // reference name -> its decoded document (transitively)
		compiled  *jsonschema.Schema
		canonical string

		once  sync.Once // builds shape (helper D)
		shape *Field
	}
	protoSchema struct {
		src       Source
		file      protoreflect.FileDescriptor // imports (references) linked
		canonical string

		once sync.Once // builds comp: Shape and decoder of message [0] (helper D)
		comp *protoCompiled
	}
)

// Parse parses src, resolving its references with resolve (nil when src
// has none). Errors wrap ErrInvalid and say what is wrong where.
func Parse(src Source, resolve Resolver) (Schema, error) {
	switch src.Format {
	case Avro, "":
		src.Format = Avro
		return parseAvro(src, resolve)
	case JSON:
		return parseJSON(src, resolve)
	case Protobuf:
		return parseProtobuf(src, resolve)
	}
	return nil, fmt.Errorf("%w: unknown schema type %q", ErrInvalid, src.Format)
}

// Level is a compatibility level.
type Level string

// Confluent's compatibility levels.
const (
	None               Level = "NONE"
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
)

// DefaultLevel is the registry's global level until it is set, as in
// Confluent's registry.
const DefaultLevel = Backward

// ParseLevel accepts a level name in any case.
func ParseLevel(s string) (Level, error) {
	switch l := Level(strings.ToUpper(s)); l {
	case None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive:
		return l, nil
	}
	return "", fmt.Errorf("unknown compatibility level %q: want NONE, BACKWARD, FORWARD, FULL or one of them with _TRANSITIVE", s)
}

// Check lists why next is not compatible at level with the versions
// before it (prior, oldest first; deleted versions left out by the
// caller); nil when it is. A non-transitive level checks against the
// latest version only. BACKWARD: next reads data written with the old
// schema; FORWARD: the old schema reads data written with next; FULL:
// both. A schema of another format is incompatible.
func Check(level Level, next Schema, prior []Schema) []string {
	if level == None || len(prior) == 0 {
		return nil
	}
	against := prior
	if !strings.HasSuffix(string(level), "_TRANSITIVE") {
		against = prior[len(prior)-1:]
	}
	base := Level(strings.TrimSuffix(string(level), "_TRANSITIVE"))
	var why []string
	for i := len(against) - 1; i >= 0; i-- {
		old := against[i]
		if old.Format() != next.Format() {
			why = append(why, fmt.Sprintf("schema type %s differs from %s of an earlier version", next.Format(), old.Format()))
			continue
		}
		if base == Backward || base == Full {
			why = append(why, next.canRead(old)...)
		}
		if base == Forward || base == Full {
			why = append(why, old.canRead(next)...)
		}
	}
	return why
}

// Magic is the first byte of a registry-framed value.
const Magic = 0

// SplitFrame splits a registry-framed value into its schema id and
// payload; ok is false for a value that is not framed (too short, or not
// starting with Magic).
func SplitFrame(v []byte) (id int32, payload []byte, ok bool) {
	if len(v) < 5 || v[0] != Magic {
		return 0, nil, false
	}
	id = int32(binary.BigEndian.Uint32(v[1:5]))
	return id, v[5:], id > 0
}

// AppendFrame appends the frame header for schema id to dst.
func AppendFrame(dst []byte, id int32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, Magic), uint32(id))
}
