package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// rawRequest sends head (a request line and headers, without the blank line that
// ends them) on a fresh loopback connection, and no body whatever the headers
// declare. It returns the answer and whether the server closed the connection
// after it. The deadline guards against a hang; nothing waits for it to pass.
func rawRequest(t *testing.T, url, head string) (*http.Response, []byte, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s\r\n\r\n", head); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	// The server closes: the next read ends at once, not at the guard's deadline.
	_, err = br.ReadByte()
	closed := errors.Is(err, io.EOF)
	if err != nil && !closed {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			closed = true // a reset is a close too
		}
	}
	return resp, body, closed
}

// A request that declares a body and never sends it is answered without waiting
// for it, and its connection is closed: without a token (401), on a public route,
// on an unknown one, and over the size limit. Nothing holds such a connection
// until a deadline passes, so a caller without a token cannot pile them up.
func TestUnsentBodyIsNotWaitedFor(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		for _, c := range []struct {
			head   string
			status int
			code   api.Code
		}{
			{"POST /v1/sandboxes HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 10", http.StatusUnauthorized, api.CodeUnauthenticated},
			{"POST /v1/sandboxes HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer nope\r\nContent-Length: 10", http.StatusUnauthorized, api.CodeUnauthenticated},
			{"POST /v1/sandboxes HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked", http.StatusUnauthorized, api.CodeUnauthenticated},
			{"GET /healthz HTTP/1.1\r\nHost: test\r\nContent-Length: 10", http.StatusOK, ""},
			{"GET /readyz HTTP/1.1\r\nHost: test\r\nContent-Length: 10", http.StatusOK, ""},
			{"GET /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 10", http.StatusOK, ""},
			{"POST /v1/nothing HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + e.admin + "\r\nContent-Length: 10", http.StatusNotFound, api.CodeNotFound},
			{"POST /v1/sandboxes HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + e.admin + "\r\nContent-Length: 99999999", http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge},
		} {
			line := strings.SplitN(c.head, "\r\n", 2)[0]
			resp, body, closed := rawRequest(t, e.url, c.head)
			if resp.StatusCode != c.status {
				t.Fatalf("%s: status %d, want %d: %s", line, resp.StatusCode, c.status, body)
			}
			if c.code != "" {
				r := response{status: resp.StatusCode, header: resp.Header, body: body}
				if got := r.apiError(t).Code; got != c.code {
					t.Fatalf("%s: code %s, want %s", line, got, c.code)
				}
			}
			if !closed {
				t.Fatalf("%s: the connection was left open for the body", line)
			}
		}
	})
}

// A request whose body did come is answered on a connection that stays open for
// the next request: only a body left unread closes it.
func TestReadBodyKeepsTheConnection(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		r := e.request(e.admin, "POST", "/v1/admin/tokens", strings.NewReader(`{"scope":"admin"}`), nil).want(t, http.StatusCreated)
		if r.header.Get("Connection") == "close" {
			t.Fatal("a request whose body was read closed its connection")
		}
		r = e.request(e.admin, "POST", "/v1/admin/tokens", strings.NewReader(`{"scope":"nope"}`), nil).want(t, http.StatusBadRequest)
		if r.header.Get("Connection") == "close" {
			t.Fatal("a refused body that was read closed its connection")
		}
	})
}
