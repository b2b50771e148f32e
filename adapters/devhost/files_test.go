package devhost

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/different-ai/differently/api"
)

func TestFilesRoundTrip(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_f", nil)
	if err := a.WriteFile(ctx, "sbx_f", "a/b/c.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "sbx_f", "a/b/c.txt", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "sbx_f", "./empty", nil); err != nil {
		t.Fatal(err)
	}
	data, err := a.ReadFile(ctx, "sbx_f", "a/b/c.txt")
	if err != nil || string(data) != "replaced" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if data, err := a.ReadFile(ctx, "sbx_f", "empty"); err != nil || len(data) != 0 {
		t.Fatalf("ReadFile(empty) = %q, %v", data, err)
	}
	fi, err := os.Stat(filepath.Join(a.fsDir("sbx_f"), "a", "b", "c.txt"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("written file: %v, %v", fi, err)
	}
	// A command sees what the file API wrote, and the other way round.
	if res, err := a.Exec(ctx, "sbx_f", api.ExecRequest{Command: "cat a/b/c.txt; echo made > a/made"}); err != nil || res.Stdout != "replaced" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}

	list, err := a.ListFiles(ctx, "sbx_f", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "b" || !list[0].IsDir || list[0].Path != "a/b" ||
		list[1].Name != "made" || list[1].IsDir || list[1].Size != 5 || list[1].Path != "a/made" ||
		list[1].Mode != 0o644 || list[1].ModTime.IsZero() {
		t.Fatalf("ListFiles(a) = %+v", list)
	}
	for _, root := range []string{"", ".", "a/.."} {
		list, err := a.ListFiles(ctx, "sbx_f", root)
		if err != nil || len(list) != 2 || list[0].Path != "a" || list[1].Path != "empty" {
			t.Fatalf("ListFiles(%q) = %+v, %v", root, list, err)
		}
	}
	if list, err := a.ListFiles(ctx, "sbx_f", "a/b/"); err != nil || len(list) != 1 || list[0].Path != "a/b/c.txt" {
		t.Fatalf("ListFiles(a/b/) = %+v, %v", list, err)
	}
	entries, _ := os.ReadDir(filepath.Join(a.fsDir("sbx_f"), "a", "b"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestFilesErrors(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_f", nil)
	create(t, a, "sbx_sibling", nil)
	fs := a.fsDir("sbx_f")
	outside := t.TempDir()
	if err := a.WriteFile(ctx, "sbx_sibling", "secret", []byte("sibling's")); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "sbx_f", "dir/file", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Links made the way sandbox code would make them.
	res, err := a.Exec(ctx, "sbx_f", api.ExecRequest{Command: "ln -s /etc etc && ln -s " + outside + " out && " +
		"ln -s l2 l1 && ln -s ../../sbx_sibling/fs l2 && ln -s dir inside && mkfifo fifo"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", res, err)
	}

	tests := []struct {
		name string
		path string
		read api.Code // expected code of ReadFile, WriteFile and ListFiles unless overridden
		// write and list override read when set.
		write, list api.Code
	}{
		{"parent", "../x", api.CodeInvalidRequest, "", ""},
		{"absolute", "/etc/passwd", api.CodeInvalidRequest, "", ""},
		{"dot-dot inside", "a/../../x", api.CodeInvalidRequest, "", ""},
		{"deep parent", "dir/../../../../etc/passwd", api.CodeInvalidRequest, "", ""},
		{"nul", "a\x00b", api.CodeInvalidRequest, "", ""},
		{"empty", "", api.CodeInvalidRequest, "", "ok"},
		{"symlink to /etc", "etc/passwd", api.CodeInvalidRequest, "", ""},
		{"symlink to /etc itself", "etc", api.CodeInvalidRequest, "ok", ""},
		{"symlink outside, new file", "out/new", api.CodeInvalidRequest, "", ""},
		{"symlink chain to sibling", "l1/secret", api.CodeInvalidRequest, "", ""},
		{"symlink chain dir", "l1", api.CodeInvalidRequest, "ok", ""},
		{"missing", "nope/x", api.CodeNotFound, "ok", ""},
		{"directory", "dir", api.CodeInvalidRequest, "", "ok"},
		{"through a file", "dir/file/x", api.CodeInvalidRequest, "", ""},
		{"fifo", "fifo", api.CodeInvalidRequest, "ok", api.CodeInvalidRequest},
		{"symlink inside is followed", "inside/file", "ok", "ok", api.CodeInvalidRequest},
	}
	check := func(t *testing.T, op string, err error, want api.Code) {
		t.Helper()
		if want == "ok" {
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			return
		}
		if got := api.CodeOf(err); got != want {
			t.Fatalf("%s: code %q (%v), want %q", op, got, err, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write, list := tt.write, tt.list
			if write == "" {
				write = tt.read
			}
			if list == "" {
				list = tt.read
			}
			_, err := a.ReadFile(ctx, "sbx_f", tt.path)
			check(t, "ReadFile", err, tt.read)
			_, err = a.ListFiles(ctx, "sbx_f", tt.path)
			check(t, "ListFiles", err, list)
			if write != "ok" { // writes that succeed would disturb later cases
				check(t, "WriteFile", a.WriteFile(ctx, "sbx_f", tt.path, []byte("pwned")), write)
			}
		})
	}
	// Nothing was written outside the sandbox.
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("a write escaped to %s: %v", outside, entries)
	}
	if data, _ := a.ReadFile(ctx, "sbx_sibling", "secret"); string(data) != "sibling's" {
		t.Fatalf("sibling's file changed: %q", data)
	}
	_, err = os.Stat(filepath.Join(fs, "..", "x"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a write escaped to the sandbox directory: %v", err)
	}

	_, err = a.ReadFile(ctx, "sbx_missing", "x")
	wantCode(t, err, api.CodeNotFound)
	wantCode(t, a.WriteFile(ctx, "sbx_missing", "x", nil), api.CodeNotFound)
	_, err = a.ListFiles(ctx, "sbx_missing", "")
	wantCode(t, err, api.CodeNotFound)
}

func TestFilesSizeLimits(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_big", nil)
	sparse := filepath.Join(a.fsDir("sbx_big"), "sparse")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, api.MaxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	_, err := a.ReadFile(ctx, "sbx_big", "sparse")
	wantCode(t, err, api.CodePayloadTooLarge)

	// Exactly the limit is still allowed.
	if err := os.Truncate(sparse, api.MaxFileBytes); err != nil {
		t.Fatal(err)
	}
	if data, err := a.ReadFile(ctx, "sbx_big", "sparse"); err != nil || len(data) != api.MaxFileBytes {
		t.Fatalf("ReadFile at the limit: %d bytes, %v", len(data), err)
	}

	big := make([]byte, api.MaxFileBytes+1)
	wantCode(t, a.WriteFile(ctx, "sbx_big", "big", big), api.CodePayloadTooLarge)
	if _, err := os.Stat(filepath.Join(a.fsDir("sbx_big"), "big")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an oversized write left a file: %v", err)
	}
}

func TestFilesOnStoppedInstance(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_s", nil)
	if err := a.Stop(ctx, "sbx_s"); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "sbx_s", "f", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if data, err := a.ReadFile(ctx, "sbx_s", "f"); err != nil || !bytes.Equal(data, []byte("kept")) {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if list, err := a.ListFiles(ctx, "sbx_s", ""); err != nil || len(list) != 1 {
		t.Fatalf("ListFiles = %+v, %v", list, err)
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in        string
		allowRoot bool
		want      string // "" means an error
	}{
		{"a", false, "a"},
		{"a/b/../c", false, "a/c"},
		{"./a//b/", false, "a/b"},
		{"..a", false, "..a"},
		{"a/..", false, ""},
		{"a/..", true, "."},
		{"", true, "."},
		{"", false, ""},
		{"..", true, ""},
		{"../a", true, ""},
		{"/a", true, ""},
		{"a\x00", true, ""},
		// Absolute paths inside the tree, as its commands see them.
		{"/data/sbx/fs/a/b", false, "a/b"},
		{"/data/sbx/fs/a/../b/", false, "b"},
		{"/data/sbx/fs", true, "."},
		{"/data/sbx/fs", false, ""},
		{"/data/sbx/fs/../other", true, ""},
		{"/data/sbx/fsx/a", true, ""},
		{"/data/sbx", true, ""},
	}
	const fsDir = "/data/sbx/fs"
	for _, tt := range tests {
		got, err := cleanPath(fsDir, tt.in, tt.allowRoot)
		if tt.want == "" {
			if err == nil || api.CodeOf(err) != api.CodeInvalidRequest {
				t.Errorf("cleanPath(%q, %v) = %q, %v; want invalid_request", tt.in, tt.allowRoot, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("cleanPath(%q, %v) = %q, %v; want %q", tt.in, tt.allowRoot, got, err, tt.want)
		}
	}
}

// fsError must keep the codes stable whatever the wrapping.
func TestFSErrorCodes(t *testing.T) {
	tests := []struct {
		err  error
		want api.Code
	}{
		{&os.PathError{Op: "openat", Path: "x", Err: syscall.ENOENT}, api.CodeNotFound},
		{&os.PathError{Op: "openat", Path: "x", Err: syscall.ENOTDIR}, api.CodeInvalidRequest},
		{&os.PathError{Op: "openat", Path: "x", Err: syscall.EACCES}, api.CodeInvalidRequest},
		{&os.PathError{Op: "openat", Path: "x", Err: errors.New(errEscapeText)}, api.CodeInvalidRequest},
		{&os.PathError{Op: "read", Path: "x", Err: syscall.EIO}, api.CodeInternal},
	}
	for _, tt := range tests {
		if got := api.CodeOf(fsError("op", "x", tt.err)); got != tt.want {
			t.Errorf("fsError(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}
