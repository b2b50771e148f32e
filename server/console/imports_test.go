package console

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/different-ai/differently"

// TestImports keeps the console a front door: it calls the services the API calls
// and never reaches the scheduler, placement, an adapter or a store implementation
// by a path of its own.
func TestImports(t *testing.T) {
	forbidden := []string{
		module + "/server/scheduler", module + "/server/placement", module + "/adapters",
		module + "/server/store/postgres", module + "/server/store/sqlite", module + "/server/httpapi",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		seen++
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range forbidden {
				if path == p || strings.HasPrefix(path, p+"/") {
					t.Errorf("%s imports %s: call server/sandboxes or server/pooladmin instead", name, path)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no non-test Go file found: is the test running in server/console?")
	}
}
