package devhost

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func createRequest(id string) adapters.CreateRequest {
	return adapters.CreateRequest{ID: id, Installation: inst}
}

const (
	fuzzRef        = "sbx_fuzz"
	fuzzSibling    = "sbx_sibling"
	canaryPrefix   = "CANARY-"
	outsideCanary  = canaryPrefix + "outside"
	siblingCanary  = canaryPrefix + "sibling"
	fuzzWritePrefx = "w:"
)

// fuzzTree is a devhost adapter with one sandbox whose file tree is rebuilt before
// every input, full of ways out: symlinks to /etc, to a directory outside the root, to
// the sandbox directory itself and to a sibling sandbox, plus a FIFO.
type fuzzTree struct {
	a       *Adapter
	fs      string
	outside string
	// before is every path under the adapter root and the outside directory,
	// the sandbox's own tree excepted, with its content.
	before map[string]string
}

func newFuzzTree(f *testing.F) *fuzzTree {
	a, err := New(filepath.Join(f.TempDir(), "root"))
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{fuzzRef, fuzzSibling} {
		if _, err := a.Create(ctx, createRequest(id)); err != nil {
			f.Fatal(err)
		}
	}
	ft := &fuzzTree{a: a, fs: a.fsDir(fuzzRef), outside: f.TempDir()}
	if err := os.WriteFile(filepath.Join(ft.outside, "secret"), []byte(outsideCanary), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := a.WriteFile(ctx, fuzzSibling, "secret", []byte(siblingCanary)); err != nil {
		f.Fatal(err)
	}
	ft.reset(f)
	ft.before = ft.snapshot(f)
	return ft
}

// reset rebuilds the sandbox's tree so that every input starts from the same state.
func (ft *fuzzTree) reset(t testing.TB) {
	t.Helper()
	if err := os.RemoveAll(ft.fs); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ft.fs, "dir", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(ft.fs, "dir", "file"), []byte("w:inside"), 0o644))
	must(os.Symlink("/etc", filepath.Join(ft.fs, "etc")))
	must(os.Symlink(ft.outside, filepath.Join(ft.fs, "out")))
	must(os.Symlink(filepath.Join(ft.outside, "secret"), filepath.Join(ft.fs, "outfile")))
	must(os.Symlink("..", filepath.Join(ft.fs, "up")))
	must(os.Symlink("../../"+fuzzSibling+"/fs", filepath.Join(ft.fs, "sib")))
	must(os.Symlink("l2", filepath.Join(ft.fs, "l1")))
	must(os.Symlink("sib", filepath.Join(ft.fs, "l2")))
	must(os.Symlink("dir", filepath.Join(ft.fs, "inside")))
	must(os.Symlink("loop", filepath.Join(ft.fs, "loop")))
	must(os.Symlink("missing", filepath.Join(ft.fs, "dangling")))
	must(os.Symlink(filepath.Join(ft.outside, "new"), filepath.Join(ft.fs, "dangling-out")))
	must(syscall.Mkfifo(filepath.Join(ft.fs, "fifo"), 0o644))
}

// snapshot records everything outside the sandbox's tree: the rest of the adapter
// root (metadata, the sibling) and the outside directory.
func (ft *fuzzTree) snapshot(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, top := range []string{ft.a.Root(), ft.outside} {
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == ft.fs {
				return filepath.SkipDir
			}
			content := d.Type().String()
			if d.Type().IsRegular() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				content = string(b)
			}
			out[p] = content
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (ft *fuzzTree) checkNoEscape(t *testing.T, op, p string) {
	t.Helper()
	after := ft.snapshot(t)
	for k, v := range after {
		if old, ok := ft.before[k]; !ok || old != v {
			t.Fatalf("%s %q changed %s outside the sandbox's tree", op, p, k)
		}
	}
	for k := range ft.before {
		if _, ok := after[k]; !ok {
			t.Fatalf("%s %q removed %s outside the sandbox's tree", op, p, k)
		}
	}
}

func checkFileCode(t *testing.T, op, p string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	e := api.AsError(err)
	if e == nil {
		t.Fatalf("%s %q: %v is not an *api.Error", op, p, err)
	}
	switch e.Code {
	case api.CodeInvalidRequest, api.CodeNotFound, api.CodePayloadTooLarge:
	default:
		t.Fatalf("%s %q: code %s (%v)", op, p, e.Code, err)
	}
}

// FuzzFilePaths throws arbitrary paths at ReadFile, ListFiles and WriteFile on a real
// sandbox. Nothing outside the sandbox's tree is ever created, changed or read (the
// canaries planted outside never come back), errors are *api.Error with
// invalid_request, not_found or payload_too_large, and nothing panics.
func FuzzFilePaths(f *testing.F) {
	for _, p := range []string{
		"a.txt", "dir/file", "dir/sub/new", "./x", "dir/../x", "", ".", "..", "../x", "a/../../x",
		"/etc/passwd", "//etc", "/", "a\x00b", "\x00", "etc", "etc/passwd", "out", "out/secret", "out/new",
		"outfile", "up", "up/fs/x", "up/meta.json", "sib", "sib/secret", "l1/secret", "l1", "inside/file",
		"inside/../../x", "loop", "loop/x", "dangling", "dangling-out", "fifo", "dir/file/x", "dir/",
		"dir//file", "\xff\xfe", "é/ü", strings.Repeat("a/", 120) + "x", strings.Repeat("n", 300),
		".devhost-write-x", "dir/.", "~", "$HOME", "a\\..\\..\\x", "C:\\x",
	} {
		f.Add(p, []byte("data"))
	}
	ft := newFuzzTree(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, p string, data []byte) {
		if len(p) > 300 {
			// Deep trees are slow to make and remove through os.Root (each call walks
			// from the root); a few hundred bytes reach every limit that matters
			// (NAME_MAX is 255).
			p = p[:300]
		}
		ft.reset(t)
		data = append([]byte(fuzzWritePrefx), data[:min(len(data), 64)]...)

		got, err := ft.a.ReadFile(ctx, fuzzRef, p)
		checkFileCode(t, "ReadFile", p, err)
		if bytes.HasPrefix(got, []byte(canaryPrefix)) {
			t.Fatalf("ReadFile %q read %q from outside the sandbox", p, got)
		}
		if err == nil && !bytes.HasPrefix(got, []byte(fuzzWritePrefx)) {
			t.Fatalf("ReadFile %q read %q, which no file of the sandbox holds", p, got)
		}

		list, err := ft.a.ListFiles(ctx, fuzzRef, p)
		checkFileCode(t, "ListFiles", p, err)
		for _, e := range list {
			if e.Name == "secret" || e.Name == "meta.json" || e.Name == "fs" {
				t.Fatalf("ListFiles %q listed %q from outside the sandbox: %+v", p, e.Name, list)
			}
			if filepath.IsAbs(e.Path) || e.Path == ".." || strings.HasPrefix(e.Path, "../") {
				t.Fatalf("ListFiles %q gave path %q", p, e.Path)
			}
		}

		err = ft.a.WriteFile(ctx, fuzzRef, p, data)
		checkFileCode(t, "WriteFile", p, err)
		if err == nil {
			back, rerr := ft.a.ReadFile(ctx, fuzzRef, p)
			if rerr != nil || !bytes.Equal(back, data) {
				t.Fatalf("WriteFile %q succeeded but reads back %q, %v", p, back, rerr)
			}
		}
		ft.checkNoEscape(t, "WriteFile", p)
		// No temporary file is left anywhere in the tree.
		_ = filepath.WalkDir(ft.fs, func(q string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".devhost-write-") && q != filepath.Join(ft.fs, p) {
				t.Fatalf("WriteFile %q left %s behind", p, q)
			}
			return nil
		})
	})
}
