package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// watchedFS is a devhost adapter that counts how much of an upload it has taken
// from the handler, and how much of a download the handler has taken from it.
type watchedFS struct {
	*devhost.Adapter
	taken *atomic.Int64
}

func (w watchedFS) WriteFileFrom(ctx context.Context, ref, p string, content io.Reader) error {
	return w.Adapter.WriteFileFrom(ctx, ref, p, &countingReader{r: content, n: w.taken})
}

func (w watchedFS) OpenFile(ctx context.Context, ref, p string) (io.ReadCloser, int64, error) {
	f, size, err := w.Adapter.OpenFile(ctx, ref, p)
	if err != nil {
		return nil, 0, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&countingReader{r: f, n: w.taken}, f}, size, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// slack is how far a transfer may run ahead of the side that takes it: about one
// read buffer, never the file.
const slack = 1 << 20

// pacedBody is an upload's body that fails when asked for more while the adapter has
// not taken what it was given: a handler that held the body whole would read ahead
// of the adapter by all of it.
type pacedBody struct {
	left, given int64
	taken       *atomic.Int64
	ahead       error
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if b.given-b.taken.Load() > slack {
		b.ahead = fmt.Errorf("the handler read %d bytes of the body while the adapter had taken %d", b.given, b.taken.Load())
		return 0, b.ahead
	}
	n := int(min(int64(len(p)), b.left))
	for i := range p[:n] {
		p[i] = byte((b.given + int64(i)) % 251)
	}
	b.left -= int64(n)
	b.given += int64(n)
	return n, nil
}

// pacedWriter is a download's receiver that checks the handler hands bytes on as the
// adapter yields them.
type pacedWriter struct {
	*httptest.ResponseRecorder
	taken    *atomic.Int64
	received int64
	ahead    error
	sum      byte
}

func (w *pacedWriter) Write(p []byte) (int, error) {
	w.received += int64(len(p))
	if w.taken.Load()-w.received > slack && w.ahead == nil {
		w.ahead = fmt.Errorf("the adapter had yielded %d bytes while the client had %d", w.taken.Load(), w.received)
	}
	for _, c := range p {
		w.sum ^= c
	}
	return len(p), nil
}

// TestFileTransfersStream: a 64 MiB upload reaches the adapter as it arrives, and a
// 64 MiB download reaches the client as the adapter reads it: at no point does the
// daemon hold more than a buffer of either, which is what kept six parallel 100 MiB
// uploads from taking a gigabyte of its memory. The body and the receiver check
// this as the transfer goes, against what the adapter has taken or yielded.
func TestFileTransfersStream(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		dh, err := devhost.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var taken atomic.Int64
		e.addPool("watched", watchedFS{Adapter: dh, taken: &taken})
		sb := e.running(e.admin, "watched")
		target := "/v1/sandboxes/" + sb.ID + "/files/content?path=big.bin"

		const size = 64 << 20
		body := &pacedBody{left: size, taken: &taken}
		req := httptest.NewRequest("PUT", target, body)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		if body.ahead != nil {
			t.Fatal(body.ahead)
		}
		if rec.Code != http.StatusNoContent {
			t.Fatalf("upload: status %d: %s", rec.Code, rec.Body)
		}
		if taken.Load() != size {
			t.Fatalf("the adapter took %d bytes, want %d", taken.Load(), size)
		}

		taken.Store(0)
		req = httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		w := &pacedWriter{ResponseRecorder: httptest.NewRecorder(), taken: &taken}
		e.handler.ServeHTTP(w, req)
		if w.ahead != nil {
			t.Fatal(w.ahead)
		}
		if w.Code != http.StatusOK || w.received != size {
			t.Fatalf("download: status %d, %d bytes", w.Code, w.received)
		}
		if got := w.Header().Get("Content-Length"); got != strconv.Itoa(size) {
			t.Fatalf("Content-Length %q", got)
		}
		var want byte
		for i := range size {
			want ^= byte(i % 251)
		}
		if w.sum != want {
			t.Fatal("the downloaded content differs from the uploaded")
		}
	})
}

// TestStreamedUploadOverTheLimit: a chunked upload that goes past api.MaxFileBytes
// while being streamed to devhost answers 413 and leaves the file as it was.
func TestStreamedUploadOverTheLimit(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		sb := e.running(e.admin, "devhost")
		base := "/v1/sandboxes/" + sb.ID + "/files/content?path="
		e.do(e.admin, "PUT", base+"kept.txt", "original").want(t, http.StatusNoContent)
		over := io.MultiReader(io.LimitReader(zeros{}, api.MaxFileBytes+1))
		e.request(e.admin, "PUT", base+"kept.txt", over, nil).want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
		if got := e.do(e.admin, "GET", base+"kept.txt", nil).want(t, http.StatusOK); string(got.body) != "original" {
			t.Fatalf("the file now holds %d bytes", len(got.body))
		}
		// A body that breaks off is the client's failure, and writes nothing either.
		req := httptest.NewRequest("PUT", base+"kept.txt", io.MultiReader(bytes.NewReader(make([]byte, 3<<20)), errReader{}))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("broken body: status %d: %s", rec.Code, rec.Body)
		}
		if got := e.do(e.admin, "GET", base+"kept.txt", nil).want(t, http.StatusOK); string(got.body) != "original" {
			t.Fatalf("the file now holds %d bytes", len(got.body))
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// blockingFS is a fake whose uploads hold their slot until their body ends, and
// say when they have begun (all but those of /small).
type blockingFS struct {
	*fake.Adapter
	began chan string
}

func (b blockingFS) WriteFileFrom(ctx context.Context, ref, p string, content io.Reader) error {
	if p != "/small" {
		b.began <- p
	}
	return b.Adapter.WriteFileFrom(ctx, ref, p, content)
}

// TestTransferLimit: large transfers beyond the per-project bound, then beyond the
// daemon's, answer 503 provider_unavailable with Retry-After and the bound in the
// details; small ones pass; a slot is free again once its transfer has ended. Each
// upload in flight is held by a body the test has not finished writing.
func TestTransferLimit(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			o.MaxTransfers, o.MaxProjectTransfers, o.LargeTransferBytes = 3, 2, 1000
		})
		bl := blockingFS{Adapter: fake.New(fake.Config{}), began: make(chan string, 8)}
		e.addPool("slow", bl)
		tokA, tokB := e.projectToken("acme", "a"), e.projectToken("acme", "b")
		sbA, sbB := e.running(tokA, "slow"), e.running(tokB, "slow")
		url := func(sb store.Sandbox, name string) string {
			return "/v1/sandboxes/" + sb.ID + "/files/content?path=/" + name
		}

		type held struct {
			w    *io.PipeWriter
			done chan response
		}
		start := func(tok string, sb store.Sandbox, name string) held {
			pr, pw := io.Pipe()
			// Ends the upload should the test fail first: the server's Close waits
			// for it.
			t.Cleanup(func() { _ = pw.CloseWithError(errors.New("test over")) })
			h := held{w: pw, done: make(chan response, 1)}
			go func() {
				req, _ := http.NewRequest("PUT", e.url+url(sb, name), pr)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					h.done <- response{status: -1, body: []byte(err.Error())}
					return
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				h.done <- response{status: resp.StatusCode, header: resp.Header, body: raw}
			}()
			// Part of the body, so the upload is under way at the adapter.
			if _, err := pw.Write([]byte("first part")); err != nil {
				t.Fatal(err)
			}
			// Only a hang guard: an upload that never reaches the adapter is a
			// handler that reads the body before writing, and the test fails.
			select {
			case got := <-bl.began:
				if got != "/"+name {
					t.Fatalf("began %s, want /%s", got, name)
				}
			case <-time.After(time.Minute):
				t.Fatalf("upload %s never reached the adapter's WriteFileFrom", name)
			}
			return h
		}
		refused := func(r response, limit string) {
			t.Helper()
			r.want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
			if r.header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
			if got := r.apiError(t).Details["limit"]; got != limit {
				t.Fatalf("details.limit %v, want %s: %s", got, limit, r.body)
			}
		}
		chunked := func(s string) io.Reader { return io.MultiReader(bytes.NewReader([]byte(s))) }

		a1, a2 := start(tokA, sbA, "a1"), start(tokA, sbA, "a2")
		refused(e.request(tokA, "PUT", url(sbA, "a3"), chunked("x"), nil), "files.maxProjectTransfers")
		// A small upload, of a declared length under the bound, is not counted.
		e.do(tokA, "PUT", url(sbA, "small"), "small").want(t, http.StatusNoContent)
		b1 := start(tokB, sbB, "b1")
		refused(e.request(tokB, "PUT", url(sbB, "b2"), chunked("x"), nil), "files.maxTransfers")
		// Downloads count too: this file is over the bound.
		e.do(tokA, "PUT", url(sbA, "small"), string(make([]byte, 999))).want(t, http.StatusNoContent)
		big := make([]byte, 4000)
		if err := bl.Adapter.WriteFile(t.Context(), sbA.BackendRef, "/big", big); err != nil {
			t.Fatal(err)
		}
		refused(e.do(tokA, "GET", url(sbA, "big"), nil), "files.maxTransfers")
		e.do(tokA, "GET", url(sbA, "small"), nil).want(t, http.StatusOK)

		for _, h := range []held{a1, a2, b1} {
			_ = h.w.Close()
			(<-h.done).want(t, http.StatusNoContent)
		}
		// Every slot is free again.
		if got := e.do(tokA, "GET", url(sbA, "big"), nil).want(t, http.StatusOK); len(got.body) != len(big) {
			t.Fatalf("download of %d bytes", len(got.body))
		}
		e.request(tokA, "PUT", url(sbA, "a3"), chunked("after"), nil).want(t, http.StatusNoContent)
		<-bl.began
	})
}
