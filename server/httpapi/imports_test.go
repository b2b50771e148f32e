package httpapi_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/different-ai/differently"

// allowedContract explains why httpapi may still import the adapter contract
// (package adapters, not an implementation of it): gen.go, generated from
// api/openapi.yaml with the type mappings of oapi.yaml, names the contract's data
// types adapters.FileInfo and adapters.Resources in the API's models. No handler
// needs it: the sandbox and profile routes reach adapters through server/sandboxes,
// the admin pool routes through server/pooladmin.
var allowedContract = map[string]bool{"gen.go": true}

// TestImports keeps httpapi a transport: decode, call a service, encode. Placement,
// the scheduler and the adapters belong to server/sandboxes and server/pooladmin; a
// handler that reaches for them again puts application logic back into the HTTP
// layer.
func TestImports(t *testing.T) {
	forbidden := []string{
		module + "/server/scheduler",
		module + "/server/placement",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		seen++
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case isUnder(path, forbidden...):
				t.Errorf("%s imports %s: go through server/sandboxes instead", name, path)
			case strings.HasPrefix(path, module+"/adapters/"):
				t.Errorf("%s imports the adapter implementation %s: the API must not know any adapter", name, path)
			case path == module+"/adapters" && !allowedContract[name]:
				t.Errorf("%s imports the adapter contract: call server/sandboxes or server/pooladmin instead (allowed only in %s)",
					name, strings.Join(sortedKeys(allowedContract), ", "))
			}
		}
	}
	if seen == 0 {
		t.Fatal("no non-test Go file found: is the test running in server/httpapi?")
	}
}

func isUnder(path string, pkgs ...string) bool {
	for _, p := range pkgs {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
