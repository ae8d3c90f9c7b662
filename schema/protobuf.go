package schema

import (
	"context"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// protoMainFile is the name the registry's schema text gets when compiled.
// Registry references name .proto paths; none is spelled like this.
const protoMainFile = "<schema>"

// protoStdImports resolves the files protoc ships (google/protobuf/*.proto)
// and nothing else.
var protoStdImports = protocompile.WithStandardImports(protocompile.ResolverFunc(
	func(string) (protocompile.SearchResult, error) {
		return protocompile.SearchResult{}, fs.ErrNotExist
	}))

// compileProtoFile parses the .proto source text main (the registry's schema
// text of one id) with the .proto texts of its references, deps (import name →
// text, as the registry's references name them, transitively), and Google's
// well-known types (google/protobuf/*.proto, from protocompile's standard imports),
// and returns the file's descriptor. The main file gets some fixed name that
// cannot collide with a dep's name.
//
// A standard import's name resolves to protocompile's copy even when deps
// has a text under that name, so the well-known types are always the ones
// this package maps specially. The result is rebuilt with protodesc: its
// descriptors answer lookups by field number in constant time (dynamicpb
// does one per field it decodes) and keep no compiler state alive.
func compileProtoFile(main string, deps map[string]string) (protoreflect.FileDescriptor, error) {
	c := protocompile.Compiler{
		Resolver: protocompile.ResolverFunc(func(name string) (protocompile.SearchResult, error) {
			if name == protoMainFile {
				return protocompile.SearchResult{Source: strings.NewReader(main)}, nil
			}
			if r, err := protoStdImports.FindFileByPath(name); err == nil {
				return r, nil
			}
			if src, ok := deps[name]; ok {
				return protocompile.SearchResult{Source: strings.NewReader(src)}, nil
			}
			return protocompile.SearchResult{}, fs.ErrNotExist
		}),
	}
	files, err := c.Compile(context.Background(), protoMainFile)
	if err != nil {
		return nil, err
	}
	reg := new(protoregistry.Files)
	if err := registerProtoFile(reg, files[0]); err != nil {
		return nil, err
	}
	return reg.FindFileByPath(protoMainFile)
}

// registerProtoFile adds fd and, first, the files it imports to reg, as
// protodesc descriptors (a standard import as its generated descriptor).
func registerProtoFile(reg *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := reg.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		if err := registerProtoFile(reg, imports.Get(i).FileDescriptor); err != nil {
			return err
		}
	}
	if r, err := protoStdImports.FindFileByPath(fd.Path()); err == nil && r.Desc != nil {
		return reg.RegisterFile(r.Desc)
	}
	nf, err := protodesc.NewFile(protoutil.ProtoFromFileDescriptor(fd), reg)
	if err != nil {
		return err
	}
	return reg.RegisterFile(nf)
}
