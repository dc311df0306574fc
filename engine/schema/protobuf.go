package schema

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// protoFileName is the name the schema's own .proto file gets in its
// descriptor (and in error positions: "schema.proto:3:7: ...").
const protoFileName = "schema.proto"

// parseProtobuf compiles a .proto schema (or a base64-encoded
// FileDescriptorProto) with bufbuild/protocompile. Its references are its
// imports, by import path; google/protobuf/*.proto resolve without
// references. The compiler sees only these sources: an
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
	for name, text := range files {
		if err := checkProtoDepth(text); err != nil {
			return nil, fmt.Errorf("%w: %s:%w", ErrInvalid, name, err)
		}
	}
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
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			text, ok := files[path]
			if !ok {
				return protocompile.SearchResult{}, fmt.Errorf("%q: %w (not one of the schema's references)", path, fs.ErrNotExist)
			}
			if fdp := serializedProto(text); fdp != nil {
				fdp.Name = proto.String(path)
				return protocompile.SearchResult{Proto: fdp}, nil
			}
			return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
		})),
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

// checkProtoDepth refuses .proto text nested deeper than maxDepth
// (messages, option values, brackets) before the compiler's recursive
// walks see it. Strings and comments do not count.
func checkProtoDepth(text string) error {
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"' || c == '\'':
			for i++; i < len(text) && text[i] != c && text[i] != '\n'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				return nil // the compiler reports the open comment
			}
			i += end + 3
		case c == '{' || c == '[' || c == '(' || c == '<':
			if depth++; depth > maxDepth {
				line, col := lineCol(text, i)
				return fmt.Errorf("%d:%d: nested deeper than %d levels", line, col, maxDepth)
			}
		case c == '}' || c == ']' || c == ')' || c == '>':
			depth--
		}
	}
	return nil
}

// serializedProto reads a schema text that is a base64-encoded
// FileDescriptorProto, which Confluent's registry accepts besides .proto
// text (confluent-kafka-python's Protobuf serializer registers schemas so);
// nil for anything else. A .proto text is never valid base64: it has
// spaces, semicolons or braces.
func serializedProto(text string) *descriptorpb.FileDescriptorProto {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil
	}
	var fdp descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(b, &fdp); err != nil {
		return nil
	}
	return &fdp
}

func (s *protoSchema) Format() Format    { return Protobuf }
func (s *protoSchema) Source() Source    { return s.src }
func (s *protoSchema) Canonical() string { return s.canonical }
