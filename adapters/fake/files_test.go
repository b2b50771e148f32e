package fake

import (
	"reflect"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestFiles(t *testing.T) {
	a := New(Config{})
	ref := mustCreate(t, a, req("s")).Ref
	for p, data := range map[string]string{
		"/work/a.txt":     "aa",
		"work/sub/b.txt":  "bbb", // relative paths start at /
		"//work//c.txt":   "c",
		"/work/./d/e.txt": "",
		"/top":            "t",
	} {
		if err := a.WriteFile(bg, ref, p, []byte(data)); err != nil {
			t.Fatalf("WriteFile(%q): %v", p, err)
		}
	}

	reads := []struct {
		path string
		want string
		code api.Code
	}{
		{"/work/a.txt", "aa", ""},
		{"work/a.txt", "aa", ""},
		{"/work/sub/b.txt", "bbb", ""},
		{"/work/c.txt", "c", ""},
		{"/work/d/e.txt", "", ""},
		{"/work/missing", "", api.CodeNotFound},
		{"/work", "", api.CodeInvalidRequest},
		{"/", "", api.CodeInvalidRequest},
		{"/work/../etc/passwd", "", api.CodeInvalidRequest},
		{"..", "", api.CodeInvalidRequest},
		{"/work/a\x00", "", api.CodeInvalidRequest},
	}
	for _, tt := range reads {
		data, err := a.ReadFile(bg, ref, tt.path)
		if tt.code != "" {
			if api.CodeOf(err) != tt.code {
				t.Errorf("ReadFile(%q) = %v, want %s", tt.path, err, tt.code)
			}
			continue
		}
		if err != nil || string(data) != tt.want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", tt.path, data, err, tt.want)
		}
	}

	// A returned slice is a copy.
	data, _ := a.ReadFile(bg, ref, "/work/a.txt")
	data[0] = 'X'
	if again, _ := a.ReadFile(bg, ref, "/work/a.txt"); string(again) != "aa" {
		t.Errorf("ReadFile shares its buffer: %q", again)
	}

	writes := []struct {
		path string
		size int
		code api.Code
	}{
		{"/work", 1, api.CodeInvalidRequest},      // a directory
		{"/", 1, api.CodeInvalidRequest},          // the root
		{"/top/under", 1, api.CodeInvalidRequest}, // parent is a file
		{"/a/../b", 1, api.CodeInvalidRequest},    // ..
		{"/x\x00y", 1, api.CodeInvalidRequest},    // NUL
		{"/big", api.MaxFileBytes + 1, api.CodePayloadTooLarge},
	}
	for _, tt := range writes {
		err := a.WriteFile(bg, ref, tt.path, make([]byte, tt.size))
		if api.CodeOf(err) != tt.code {
			t.Errorf("WriteFile(%q, %d bytes) = %v, want %s", tt.path, tt.size, err, tt.code)
		}
	}

	names := func(list []adapters.FileInfo) []string {
		var out []string
		for _, f := range list {
			out = append(out, f.Name)
		}
		return out
	}
	root, err := a.ListFiles(bg, ref, "/")
	if err != nil || !reflect.DeepEqual(names(root), []string{"top", "work"}) {
		t.Fatalf("ListFiles(/) = %+v, %v", root, err)
	}
	if f := root[0]; f.Path != "/top" || f.IsDir || f.Size != 1 || f.ModTime.IsZero() {
		t.Errorf("entry /top = %+v", f)
	}
	if d := root[1]; d.Path != "/work" || !d.IsDir {
		t.Errorf("entry /work = %+v", d)
	}
	work, err := a.ListFiles(bg, ref, "work/")
	if err != nil || !reflect.DeepEqual(names(work), []string{"a.txt", "c.txt", "d", "sub"}) {
		t.Errorf("ListFiles(work/) = %+v, %v", work, err)
	}
	if work[0].Path != "/work/a.txt" || work[0].Size != 2 || !work[2].IsDir {
		t.Errorf("ListFiles(work/) entries = %+v", work)
	}
	_, err = a.ListFiles(bg, ref, "/nowhere")
	wantCode(t, err, api.CodeNotFound)
	_, err = a.ListFiles(bg, ref, "/top")
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = a.ListFiles(bg, ref, "/../x")
	wantCode(t, err, api.CodeInvalidRequest)

	empty := mustCreate(t, a, req("empty")).Ref
	if list, err := a.ListFiles(bg, empty, ""); err != nil || list == nil || len(list) != 0 {
		t.Errorf("ListFiles of an empty root = %#v, %v", list, err)
	}

	_, err = a.ReadFile(bg, "fake_missing", "/x")
	wantCode(t, err, api.CodeNotFound)
	_ = a.Stop(bg, ref)
	_, err = a.ReadFile(bg, ref, "/top")
	wantCode(t, err, api.CodeInvalidState)
	wantCode(t, a.WriteFile(bg, ref, "/x", nil), api.CodeInvalidState)
	_, err = a.ListFiles(bg, ref, "/")
	wantCode(t, err, api.CodeInvalidState)
}

func TestFilesConcurrent(t *testing.T) {
	a := New(Config{})
	ref := mustCreate(t, a, req("s")).Ref
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			p := "/d/" + string(rune('a'+i))
			for range 50 {
				if err := a.WriteFile(bg, ref, p, []byte{byte(i)}); err != nil {
					t.Error(err)
				}
				if _, err := a.ReadFile(bg, ref, p); err != nil {
					t.Error(err)
				}
				if _, err := a.ListFiles(bg, ref, "/d"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if list, _ := a.ListFiles(bg, ref, "/d"); len(list) != 8 {
		t.Errorf("ListFiles = %d entries", len(list))
	}
}
