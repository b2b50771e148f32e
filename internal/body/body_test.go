package body

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAll(t *testing.T) {
	const n = 3<<20 + 17
	data := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
	cases := []struct {
		name     string
		r        io.Reader
		declared int64
		want     []byte
		maxCap   int
		err      error
	}{
		{"declared, exact", bytes.NewReader(data), n, data, n, nil},
		{"declared, one byte at a time", iotest.OneByteReader(bytes.NewReader(data[:70000])), 70000, data[:70000], 70000, nil},
		{"undeclared", bytes.NewReader(data), -1, data, 2 * n, nil},
		{"empty, declared", strings.NewReader(""), 0, []byte{}, 0, nil},
		{"empty, undeclared", strings.NewReader(""), -1, []byte{}, firstChunk, nil},
		// A client that declares 100 MiB and sends ten bytes costs what it sent.
		{"declared far more than sent", strings.NewReader("ten bytes!"), 100 << 20, []byte("ten bytes!"), firstChunk, nil},
		{"longer than declared", bytes.NewReader(data[:100]), 99, nil, 0, ErrLonger},
		{"reader error", iotest.TimeoutReader(bytes.NewReader(data)), n, nil, 0, iotest.ErrTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadAll(c.r, c.declared)
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if c.err != nil {
				return
			}
			if !bytes.Equal(got, c.want) {
				t.Fatalf("read %d bytes, want %d", len(got), len(c.want))
			}
			if cap(got) > c.maxCap {
				t.Fatalf("buffer of %d bytes for %d read, want at most %d", cap(got), len(got), c.maxCap)
			}
		})
	}
}

// Through net/http's server, with its size limit: the limit's error comes back as it is.
func TestReadAllOverLimit(t *testing.T) {
	var got error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, got = ReadAll(http.MaxBytesReader(w, r.Body, 1000), r.ContentLength)
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/octet-stream", bytes.NewReader(make([]byte, 1001)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, ok := errors.AsType[*http.MaxBytesError](got); !ok {
		t.Fatalf("error %v, want *http.MaxBytesError", got)
	}
}
