package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
)

// Requests net/http refuses itself, before any handler runs (a request line and
// headers over MaxHeaderBytes, a malformed request line, an unknown transfer coding),
// are answered in the error envelope like every other refusal, on the daemon's own
// server and listener; answers of the handler pass unchanged.
func TestRefusalsBeforeTheHandlerGetTheEnvelope(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "the handler's own")
	})
	srv := httpapi.NewHTTPServer(handler, httpapi.ConnOptions{MaxConnections: 8}, log.New(io.Discard, "", 0))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(httpapi.LimitListener(ln, httpapi.ConnOptions{MaxConnections: 8})) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	addr := ln.Addr().String()

	for _, c := range []struct {
		name, request string
		status        int
		message       string
	}{
		{"request line over MaxHeaderBytes",
			"GET /v1/sandboxes/" + strings.Repeat("a", 2<<20) + " HTTP/1.1\r\nHost: test\r\n\r\n", 431, "over 1048576 bytes"},
		{"headers over MaxHeaderBytes",
			"GET / HTTP/1.1\r\nHost: test\r\nX-Big: " + strings.Repeat("b", 2<<20) + "\r\n\r\n", 431, "over 1048576 bytes"},
		{"malformed request line", "GARBAGE\r\n\r\n", 400, "malformed HTTP request"},
		{"unknown transfer coding",
			"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: rot13\r\n\r\n", 501, "Unsupported transfer encoding"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := send(t, addr, c.request)
			var env api.ErrorEnvelope
			if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
				t.Fatalf("status %d, body %.200q: not the error envelope (%v)", resp.StatusCode, body, err)
			}
			if resp.StatusCode != c.status || env.Error.Code != api.CodeInvalidRequest ||
				!strings.Contains(env.Error.Message, c.message) {
				t.Fatalf("got %d %s %q, want %d invalid_request containing %q",
					resp.StatusCode, env.Error.Code, env.Error.Message, c.status, c.message)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}

	resp, body := send(t, addr, "GET / HTTP/1.1\r\nHost: test\r\n\r\n")
	if resp.StatusCode != http.StatusTeapot || string(body) != "the handler's own" {
		t.Fatalf("the handler's answer changed: %d %q", resp.StatusCode, body)
	}
}

// send writes request from its own goroutine (net/http stops reading an oversized
// request and answers while the client may still be writing) and reads one answer.
func send(t *testing.T, addr, request string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		io.WriteString(conn, request) // may fail once the server has answered and closed
	}()
	defer func() {
		conn.Close()
		<-wrote
	}()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // a guard, not a timing
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, body
}
