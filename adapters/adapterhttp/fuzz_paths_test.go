package adapterhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
)

// pathRecorder is a file system that records the ref and path each call arrives
// with and answers from memory.
type pathRecorder struct {
	*fake.Adapter
	mu        sync.Mutex
	ref, path string
	data      []byte
}

func (p *pathRecorder) record(ref, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ref, p.path = ref, path
}

func (p *pathRecorder) seen() (string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ref, p.path
}

func (p *pathRecorder) ReadFile(_ context.Context, ref, path string) ([]byte, error) {
	p.record(ref, path)
	return []byte(path), nil
}

func (p *pathRecorder) WriteFile(_ context.Context, ref, path string, data []byte) error {
	p.record(ref, path)
	p.mu.Lock()
	p.data = bytes.Clone(data)
	p.mu.Unlock()
	return nil
}

func (p *pathRecorder) ListFiles(_ context.Context, ref, path string) ([]adapters.FileInfo, error) {
	p.record(ref, path)
	return []adapters.FileInfo{{Name: "n", Path: path}}, nil
}

// FuzzFilePathsOverTheProtocol sends arbitrary refs and file paths from the client
// through the protocol to a Handler: whatever bytes they hold (slashes, dots, NUL,
// %-escapes, invalid UTF-8, query syntax), the adapter receives exactly the ref and
// path the client was given, or the client refuses an empty one locally; nothing
// panics and nothing is answered 500.
func FuzzFilePathsOverTheProtocol(f *testing.F) {
	for _, s := range []struct{ ref, path string }{
		{"r", "a.txt"}, {"r", "/etc/passwd"}, {"r", "../../x"}, {"a/b", "dir/"}, {"../admin", "x"},
		{"r", "a?b=c&d"}, {"r", "a#frag"}, {"r", "%2e%2e/%2F"}, {"r", "a\x00b"}, {"r", "\xff\xfe"},
		{"r", "a+b c"}, {"r", "path=x"}, {"%00", "."}, {"r/../..", "//"}, {"", "a"}, {"r", ""},
		{"r", strings.Repeat("a/", 200)}, {"ref with spaces", "é/ü"}, {"r;x", "a;b"}, {"r", "\r\nX-Header: 1"},
	} {
		f.Add(s.ref, s.path)
	}
	rec := &pathRecorder{Adapter: fake.New(fake.Config{})}
	srv := httptest.NewServer(adapterhttp.Handler(rec, "tok"))
	f.Cleanup(srv.Close)
	c, err := adapterhttp.NewClient(srv.URL, "tok")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ref, path string) {
		if ref == "/" {
			// net/http's ServeMux cannot route a path segment that unescapes to
			// exactly "/" (the routing tree keeps "/" for a trailing slash), so the
			// Handler answers it 404. No backend names an instance "/".
			return
		}
		ctx := context.Background()
		check := func(op string, err error) bool {
			t.Helper()
			if err != nil {
				if ref == "" || path == "" {
					if !api.IsCode(err, api.CodeInvalidRequest) {
						t.Fatalf("%s(%q, %q): %v, want invalid_request", op, ref, path, err)
					}
					return false
				}
				t.Fatalf("%s(%q, %q): %v", op, ref, path, err)
			}
			if ref == "" || path == "" {
				t.Fatalf("%s(%q, %q) was sent", op, ref, path)
			}
			if gotRef, gotPath := rec.seen(); gotRef != ref || gotPath != path {
				t.Fatalf("%s(%q, %q) arrived as (%q, %q)", op, ref, path, gotRef, gotPath)
			}
			return true
		}
		data, err := c.ReadFile(ctx, ref, path)
		if check("ReadFile", err) && string(data) != path {
			t.Fatalf("ReadFile(%q) read %q", path, data)
		}
		content := []byte("w:" + path)
		if check("WriteFile", c.WriteFile(ctx, ref, path, content)) {
			rec.mu.Lock()
			got := rec.data
			rec.mu.Unlock()
			if !bytes.Equal(got, content) {
				t.Fatalf("WriteFile wrote %q", got)
			}
		}
		list, err := c.ListFiles(ctx, ref, path)
		// (JSON carries text: invalid UTF-8 in the echoed path comes back replaced.)
		if check("ListFiles", err) && (len(list) != 1 || utf8.ValidString(path) && list[0].Path != path) {
			t.Fatalf("ListFiles(%q) = %+v", path, list)
		}
	})
}

// The fake's streaming file calls would bypass the recording ones above.

func (p *pathRecorder) OpenFile(ctx context.Context, ref, path string) (io.ReadCloser, int64, error) {
	data, err := p.ReadFile(ctx, ref, path)
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), err
}

func (p *pathRecorder) WriteFileFrom(ctx context.Context, ref, path string, content io.Reader) error {
	data, err := io.ReadAll(content)
	if err != nil {
		return err
	}
	return p.WriteFile(ctx, ref, path, data)
}
