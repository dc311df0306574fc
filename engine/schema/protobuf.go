package schema

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
)

// protoFileName is the name the schema's own .proto file gets in its
// descriptor (and in error positions: "schema.proto:3:7: ...").
const protoFileName = "schema.proto"

// parseProtobuf compiles a .proto schema with bufbuild/protocompile. Its
// references are its imports, by import path; google/protobuf/*.proto
// resolve without references. The compiler sees only these sources: an
// import of anything else is "not found", never a file read.
func parseProtobuf(src Source, resolve Resolver) (Schema, error) {
	refs, err := collectRefs(src, resolve)
	if err != nil {
		return nil, err
	}
	files := make(map[string]string, len(refs)+1)
	for _, r := range refs {
		if r.ref.Name == protoFileName {
			return nil, fmt.Errorf("%w: a reference may not be named %q", ErrInvalid, protoFileName)
		}
		if _, dup := files[r.ref.Name]; dup {
			return nil, fmt.Errorf("%w: two references are named %q", ErrInvalid, r.ref.Name)
		}
		files[r.ref.Name] = r.src.Text
	}
	files[protoFileName] = src.Text
	s := &protoSchema{src: src}
	if err := s.compile(files); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	fdp := protodesc.ToFileDescriptorProto(s.file)
	fdp.SourceCodeInfo = nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fdp)
	if err != nil {
		return nil, fmt.Errorf("%w: rendering the descriptor: %w", ErrInvalid, err)
	}
	// The canonical form is the compiled descriptor (no comments, no
	// layout), deterministically marshalled, in base64 to stay text.
	// protojson and prototext are no use here: their output varies on
	// purpose between builds.
	s.canonical = base64.StdEncoding.EncodeToString(b)
	return s, nil
}

func (s *protoSchema) compile(files map[string]string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("protobuf compiler failed: %v", p)
		}
	}()
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(files),
		}),
		// One file and its imports: no point in goroutines.
		MaxParallelism: 1,
	}
	compiled, err := c.Compile(context.Background(), protoFileName)
	if err != nil {
		return err
	}
	s.file = compiled[0]
	return nil
}

func (s *protoSchema) Format() Format    { return Protobuf }
func (s *protoSchema) Source() Source    { return s.src }
func (s *protoSchema) Canonical() string { return s.canonical }
