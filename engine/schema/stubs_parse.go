package schema

// Placeholders until parsing lands (helper A deletes this file): a minimal
// Avro parse without references, and nothing for the other formats.

import (
	"fmt"

	"github.com/hamba/avro/v2"
)

func parseAvro(src Source, _ Resolver) (Schema, error) {
	s, err := avro.Parse(src.Text)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &avroSchema{src: src, s: s, canonical: s.String()}, nil
}

func parseJSON(Source, Resolver) (Schema, error) {
	return nil, fmt.Errorf("%w: JSON Schema not implemented yet", ErrInvalid)
}

func parseProtobuf(Source, Resolver) (Schema, error) {
	return nil, fmt.Errorf("%w: Protobuf not implemented yet", ErrInvalid)
}

func (s *avroSchema) Format() Format    { return Avro }
func (s *avroSchema) Source() Source    { return s.src }
func (s *avroSchema) Canonical() string { return s.canonical }
func (s *avroSchema) canRead(w Schema) []string {
	if err := avro.NewSchemaCompatibility().Compatible(s.s, w.(*avroSchema).s); err != nil {
		return []string{err.Error()}
	}
	return nil
}

func (s *jsonSchema) Format() Format          { return JSON }
func (s *jsonSchema) Source() Source          { return s.src }
func (s *jsonSchema) Canonical() string       { return s.canonical }
func (s *jsonSchema) canRead(Schema) []string { return nil }

func (s *protoSchema) Format() Format          { return Protobuf }
func (s *protoSchema) Source() Source          { return s.src }
func (s *protoSchema) Canonical() string       { return s.canonical }
func (s *protoSchema) canRead(Schema) []string { return nil }
