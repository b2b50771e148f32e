package envd

import (
	"io"
	"testing"

	"github.com/different-ai/differently/api"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// An upload is refused past api.MaxFileBytes, as the native API refuses it, and taken
// up to it.
func TestUploadLimit(t *testing.T) {
	for _, tc := range []struct {
		size int64
		code api.Code
	}{
		{api.MaxFileBytes, ""},
		{api.MaxFileBytes + 1, api.CodePayloadTooLarge},
	} {
		c := &content{r: io.LimitReader(zeros{}, tc.size)}
		n, err := io.Copy(io.Discard, c.Stream())
		if derr := c.Done(err != nil); api.CodeOf(derr) != tc.code || api.CodeOf(err) != tc.code {
			t.Fatalf("%d bytes: copied %d, %v, done %v; want %q", tc.size, n, err, derr, tc.code)
		}
	}
}
