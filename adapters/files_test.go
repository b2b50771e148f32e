package adapters_test

import (
	"io"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestCapFile: a file of exactly api.MaxFileBytes reads whole; one byte more fails
// with payload_too_large instead of ending, so a grown file is never passed on cut.
func TestCapFile(t *testing.T) {
	exact := adapters.CapFile(io.NopCloser(io.LimitReader(zeros{}, api.MaxFileBytes)), "f")
	if n, err := io.Copy(io.Discard, exact); err != nil || n != api.MaxFileBytes {
		t.Fatalf("exact: %d bytes, %v", n, err)
	}
	over := adapters.CapFile(io.NopCloser(io.LimitReader(zeros{}, api.MaxFileBytes+1)), "file f")
	n, err := io.Copy(io.Discard, over)
	if api.CodeOf(err) != api.CodePayloadTooLarge || !strings.Contains(err.Error(), "file f") || n != api.MaxFileBytes {
		t.Fatalf("over: %d bytes, %v", n, err)
	}
	if _, err := adapters.ReadCapped(io.LimitReader(zeros{}, api.MaxFileBytes+1), "x"); api.CodeOf(err) != api.CodePayloadTooLarge {
		t.Fatalf("ReadCapped over the limit: %v", err)
	}
}
