package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/client"
)

// TestTokenFileNewline: a token read straight from a file ends in the file's own
// newline; New takes the token without it, and sends exactly the token, while a token
// with a line break inside is still refused.
func TestTokenFileNewline(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, sandboxJSON)
	}))
	t.Cleanup(srv.Close)
	for _, tok := range []string{"s3cret\n", "s3cret\r\n", " s3cret \n\n", "s3cret"} {
		c, err := client.New(srv.URL, tok)
		if err != nil {
			t.Fatalf("New with token %q: %v", tok, err)
		}
		if _, err := c.GetSandbox(t.Context(), "sbx_1"); err != nil {
			t.Fatal(err)
		}
		if h := got.Load(); h != "Bearer s3cret" {
			t.Fatalf("token %q sent Authorization %q", tok, h)
		}
	}
	for _, bad := range []string{"s3c\nret", "s3c\r\nret", "a\rb\n"} {
		if _, err := client.New(srv.URL, bad); err == nil {
			t.Errorf("token %q with an inner line break accepted", bad)
		}
	}
}
