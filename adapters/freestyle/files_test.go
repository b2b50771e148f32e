package freestyle_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/api"
)

func TestFiles(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	ctx := t.Context()
	inst, err := e.a.Create(ctx, request("sbx_files"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.WriteFile(ctx, inst.Ref, "/tmp/deep/er/secret", []byte("s3")); err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: "stat -c %a /tmp/deep/er/secret"})
	if err != nil || res.Stdout != "600\n" {
		t.Fatalf("mode of a written file: %+v, %v", res, err)
	}
	if _, err := e.a.ReadFile(ctx, inst.Ref, "/tmp/../etc/passwd"); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("path with ..: %v", err)
	}
	if _, err := e.a.ListFiles(ctx, inst.Ref, "/tmp/none"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("list of a missing dir: %v", err)
	}
	if err := e.a.WriteFile(ctx, inst.Ref, "/tmp/big", make([]byte, api.MaxFileBytes+1)); !api.IsCode(err, api.CodePayloadTooLarge) {
		t.Fatalf("write over the limit: %v", err)
	}
}

// TestReadOverTheLimit: a file over 100 MiB is an error, never a silent cut, whether
// or not the answer declares its length.
func TestReadOverTheLimit(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	inst, err := e.a.Create(t.Context(), request("sbx_big"))
	if err != nil {
		t.Fatal(err)
	}
	for _, declared := range []bool{true, false} {
		e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/fs/read") {
				return false
			}
			chunk := bytes.Repeat([]byte{'a'}, 1<<20)
			if declared {
				w.Header().Set("Content-Length", "104857601")
			}
			for range api.MaxFileBytes>>20 + 1 {
				if _, err := w.Write(chunk); err != nil {
					break
				}
			}
			return true
		})
		if _, err := e.a.ReadFile(t.Context(), inst.Ref, "/tmp/big"); !api.IsCode(err, api.CodePayloadTooLarge) {
			t.Fatalf("read over the limit (length declared %v): %v", declared, err)
		}
	}
}
