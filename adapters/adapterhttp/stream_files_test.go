package adapterhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/api"
)

// failingAfter yields n bytes of content, then fails.
type failingAfter struct {
	n   int
	err error
}

func (f *failingAfter) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

// TestFileStreamingOverTheProtocol: the client's WriteFileFrom and OpenFile carry
// file content through the protocol to a FileStreamer and back as a stream; a
// caller's reader that fails fails the write (with its error in the chain) and a
// body over the limit is payload_too_large, both leaving the file as it was.
func TestFileStreamingOverTheProtocol(t *testing.T) {
	ctx := context.Background()
	dh, err := devhost.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(adapterhttp.Handler(dh, "tok"))
	t.Cleanup(srv.Close)
	c, err := adapterhttp.NewClient(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := c.Create(ctx, adapters.CreateRequest{ID: "sbx_stream", Installation: "inst"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dh.Delete(ctx, in.Ref) })

	content := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	// A plain io.Reader, not a *bytes.Reader: the request has no length to go by.
	if err := c.WriteFileFrom(ctx, in.Ref, "big", io.MultiReader(bytes.NewReader(content))); err != nil {
		t.Fatal(err)
	}
	f, size, err := c.OpenFile(ctx, in.Ref, "big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil || size != int64(len(content)) || !bytes.Equal(got, content) {
		t.Fatalf("OpenFile: size %d, %d bytes, %v", size, len(got), err)
	}

	broken := errors.New("the caller's source broke")
	err = c.WriteFileFrom(ctx, in.Ref, "big", &failingAfter{n: 3 << 20, err: broken})
	if !errors.Is(err, broken) {
		t.Fatalf("WriteFileFrom of a failing reader = %v, want its error in the chain", err)
	}
	err = c.WriteFileFrom(ctx, in.Ref, "big", io.LimitReader(&failingAfter{n: api.MaxFileBytes + 1}, api.MaxFileBytes+1))
	if api.CodeOf(err) != api.CodePayloadTooLarge {
		t.Fatalf("WriteFileFrom over the limit = %v", err)
	}
	if got, err := c.ReadFile(ctx, in.Ref, "big"); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("after failed writes the file holds %d bytes, %v", len(got), err)
	}
	_, _, err = c.OpenFile(ctx, in.Ref, "missing")
	if api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("OpenFile of a missing file = %v", err)
	}
}
