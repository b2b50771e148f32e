package client_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// The deprecated names keep the signatures they had, so code written against them
// still builds; this fails to compile if one is dropped or changed.
var (
	_ func(*client.Client, context.Context, string, api.ExecRequest) (*api.ExecResult, error)    = (*client.Client).Exec
	_                                                                                            = (*client.Client).ExecStream
	_ func(*client.Client, context.Context, string, string) ([]byte, error)                      = (*client.Client).ReadFile
	_ func(*client.Client, context.Context, string, string, []byte) error                        = (*client.Client).WriteFile
	_ func(*client.Client, context.Context, string, string) ([]client.FileInfo, error)           = (*client.Client).ListFiles
	_ func(*client.Client, context.Context, string) (*client.Sandbox, error)                     = (*client.Client).Stop
	_ func(*client.Client, context.Context, string) (*client.Sandbox, error)                     = (*client.Client).Start
	_ func(*client.Client, context.Context, string) (*client.Sandbox, error)                     = (*client.Client).Pause
	_ func(*client.Client, context.Context, string) (*client.Sandbox, error)                     = (*client.Client).Resume
	_ func(*client.Client, context.Context, string, client.ForkRequest) (*client.Sandbox, error) = (*client.Client).Fork
	_ func(*client.Client, context.Context) (*client.TrustReport, error)                         = (*client.Client).TrustReport
	_ func(*client.Client, context.Context) (*client.ReconcileReport, error)                     = (*client.Client).Reconcile
)

// TestDeprecatedNames: each old name sends the very request its new name sends.
func TestDeprecatedNames(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no such thing"}}`)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	req := api.ExecRequest{Command: "true"}
	stream := func(seq func(func(api.ExecEvent, error) bool)) {
		for range seq {
			break
		}
	}
	for _, tc := range []struct {
		name     string
		old, new func()
	}{
		{"Exec", func() { c.Exec(ctx, "sbx_1", req) }, func() { c.ExecSandbox(ctx, "sbx_1", req) }},
		{"ExecStream", func() { stream(c.ExecStream(ctx, "sbx_1", req)) }, func() { stream(c.ExecSandboxStream(ctx, "sbx_1", req)) }},
		{"ReadFile", func() { c.ReadFile(ctx, "sbx_1", "a.txt") }, func() { c.ReadSandboxFile(ctx, "sbx_1", "a.txt") }},
		{"WriteFile", func() { c.WriteFile(ctx, "sbx_1", "a.txt", []byte("x")) }, func() { c.WriteSandboxFile(ctx, "sbx_1", "a.txt", []byte("x")) }},
		{"ListFiles", func() { c.ListFiles(ctx, "sbx_1", "/") }, func() { c.ListSandboxFiles(ctx, "sbx_1", "/") }},
		{"Stop", func() { c.Stop(ctx, "sbx_1") }, func() { c.StopSandbox(ctx, "sbx_1") }},
		{"Start", func() { c.Start(ctx, "sbx_1") }, func() { c.StartSandbox(ctx, "sbx_1") }},
		{"Pause", func() { c.Pause(ctx, "sbx_1") }, func() { c.PauseSandbox(ctx, "sbx_1") }},
		{"Resume", func() { c.Resume(ctx, "sbx_1") }, func() { c.ResumeSandbox(ctx, "sbx_1") }},
		{"Fork", func() { c.Fork(ctx, "sbx_1", client.ForkRequest{}) }, func() { c.ForkSandbox(ctx, "sbx_1", client.ForkRequest{}) }},
		{"TrustReport", func() { c.TrustReport(ctx) }, func() { c.GetTrustReport(ctx) }},
		{"Reconcile", func() { c.Reconcile(ctx) }, func() { c.ReconcileNow(ctx) }},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		tc.old()
		tc.new()
		mu.Lock()
		got := seen
		mu.Unlock()
		if len(got) != 2 || got[0] != got[1] {
			t.Errorf("%s and its new name sent %q, want the same single request each", tc.name, got)
		}
	}
}

// TestExamplesUseNewNames: what a new user copies (the example program and this
// package's README) calls no deprecated method. The deprecated names are read from
// deprecated.go, so one added there is checked too.
func TestExamplesUseNewNames(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "deprecated.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var old []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Doc != nil &&
			regexp.MustCompile(`(?m)^Deprecated: `).MatchString(fn.Doc.Text()) {
			old = append(old, fn.Name.Name)
		}
	}
	if len(old) < 12 {
		t.Fatalf("found %d deprecated methods in deprecated.go: %v", len(old), old)
	}
	calls := regexp.MustCompile(`\bc\.(` + strings.Join(old, "|") + `)\(`)
	for _, path := range []string{"../examples/go-client/main.go", "README.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if m := calls.FindAll(b, -1); len(m) > 0 {
			t.Errorf("%s calls deprecated methods: %q", path, m)
		}
	}
}
