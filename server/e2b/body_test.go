package e2b

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// noSandboxes is a Sandboxes that no test here reaches: the requests fail first.
type noSandboxes struct{ Sandboxes }

// A create whose body never comes is answered once the body timeout passes, and its
// connection is closed, rather than held for as long as the client likes.
func TestUnsentBodyIsAnsweredAtTheBodyTimeout(t *testing.T) {
	h, err := NewHandler(Options{
		Sandboxes: noSandboxes{},
		Authenticate: func(context.Context, string) (sandboxes.Caller, error) {
			return sandboxes.Caller{Org: "o", Project: "p"}, nil
		},
		Await: func(context.Context, sandboxes.Caller, string, []store.State, time.Duration, *store.Sandbox, <-chan store.Sandbox) (store.Sandbox, bool, error) {
			return store.Sandbox{}, false, nil
		},
		Secret:      []byte("0123456789abcdef0123456789abcdef"),
		BodyTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The test's own deadline bounds the wait should the timeout not work.
	if dl, ok := t.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "POST /v2/sandboxes HTTP/1.1\r\nHost: test\r\nX-API-KEY: k\r\n"+
		"Content-Type: application/json\r\nContent-Length: 10\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Fatalf("status %d, close %v; want 400 and a closed connection", resp.StatusCode, resp.Close)
	}
}
