package httpapi_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/server/store"
)

// Over HTTP/2 (the daemon's with TLS), an answer that would close an HTTP/1.x
// connection (given before the body was read, to a caller without a token, to a
// target over the limit) ends only its own stream: Go's server reads Connection:
// close as a GOAWAY for the whole connection, which would cut or move every other
// request on it. Every request here goes over the one connection.
func TestHTTP2RefusalsKeepTheConnection(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		srv := httptest.NewUnstartedServer(e.handler)
		var conns atomic.Int64
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.EnableHTTP2 = true
		srv.StartTLS()
		defer srv.Close()
		c := srv.Client()
		tr := c.Transport.(*http.Transport)
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		tr.ForceAttemptHTTP2 = true
		do := func(method, path, body, tok string, want int) {
			t.Helper()
			reused := false
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
			var rb io.Reader
			if body != "" {
				rb = strings.NewReader(body)
			}
			req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, rb)
			if err != nil {
				t.Fatal(err)
			}
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != want {
				t.Fatalf("%s %.40s: %s %d, want HTTP/2 %d", method, path, resp.Proto, resp.StatusCode, want)
			}
			// Only the first request opens the connection.
			if conns.Load() != 1 || reused != (path != "/healthz") {
				t.Fatalf("%s %.40s: %d connections, reused %v: the one connection was not kept", method, path, conns.Load(), reused)
			}
		}
		do("GET", "/healthz", "", "", http.StatusOK)
		// Refused before the body is read.
		do("POST", "/v1/sandboxes/sb_nope/exec?stream=yes", `{"command":"true"}`, e.admin, http.StatusBadRequest)
		do("GET", "/v1/sandboxes", "", e.admin, http.StatusOK)
		do("POST", "/v1/sandboxes", `{}`, "", http.StatusUnauthorized)
		do("GET", "/v1/sandboxes", "", e.admin, http.StatusOK)
		do("GET", "/v1/sandboxes?x="+strings.Repeat("a", 40<<10), "", e.admin, http.StatusRequestURITooLong)
		do("GET", "/v1/sandboxes", "", e.admin, http.StatusOK)
		do("GET", "/v1/sandboxes", "", e.admin, http.StatusOK)
	})
}
