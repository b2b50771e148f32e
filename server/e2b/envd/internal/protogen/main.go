// Command protogen generates the Go code of envd's Connect services from the .proto
// files in ../../proto without protoc: protocompile (pure Go) compiles them, and the
// result is handed to protoc-gen-go and protoc-gen-connect-go, both run with `go tool`
// as go.mod's tool directives pin them, the way protoc would hand it to its plugins.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	protoDir := flag.String("proto", "proto", "directory of the .proto files")
	out := flag.String("out", ".", "directory the module's root is in")
	module := flag.String("module", "", "the module's path; generated files under it are written below -out")
	var maps mapFlag
	flag.Var(&maps, "M", "file=go/import/path;name, as protoc-gen-go's M option (repeatable)")
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 || *module == "" {
		log.Fatal("usage: protogen -module path [-proto dir] [-out dir] [-M file=importpath] file.proto...")
	}
	compiled, err := (&protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{*protoDir}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}).Compile(context.Background(), files...)
	if err != nil {
		log.Fatal(err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, ProtoFile: ordered(compiled)}
	params := []string{"paths=import"}
	for _, m := range maps {
		params = append(params, "M"+m)
	}
	req.Parameter = proto.String(strings.Join(params, ","))
	for _, plugin := range []string{"protoc-gen-go", "protoc-gen-connect-go"} {
		if err := run(plugin, req, *out, *module); err != nil {
			log.Fatalf("%s: %v", plugin, err)
		}
	}
}

// ordered lists every file the compiled ones need, each after its imports, as
// CodeGeneratorRequest.proto_file must.
func ordered(files linker.Files) []*descriptorpb.FileDescriptorProto {
	var out []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var visit func(f protoreflect.FileDescriptor)
	visit = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := range imports.Len() {
			visit(imports.Get(i).FileDescriptor)
		}
		out = append(out, protodesc.ToFileDescriptorProto(f))
	}
	for _, f := range files {
		visit(f)
	}
	return out
}

func run(plugin string, req *pluginpb.CodeGeneratorRequest, out, module string) error {
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "tool", plugin)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return err
	}
	var res pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(raw, &res); err != nil {
		return err
	}
	if res.Error != nil {
		return fmt.Errorf("%s", res.GetError())
	}
	for _, f := range res.File {
		rel, ok := strings.CutPrefix(f.GetName(), module+"/")
		if !ok {
			return fmt.Errorf("%s is outside module %s", f.GetName(), module)
		}
		path := filepath.Join(out, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

type mapFlag []string

func (m *mapFlag) String() string     { return strings.Join(*m, ",") }
func (m *mapFlag) Set(v string) error { *m = append(*m, v); return nil }
