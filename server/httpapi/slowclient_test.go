package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
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

// recordingListener notes, in order, each connection it accepts and each one closed.
type recordingListener struct {
	net.Listener
	mu     sync.Mutex
	events []string
}

func (l *recordingListener) note(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.note("accept " + c.RemoteAddr().String())
	return &recordingConn{Conn: c, l: l}, nil
}

type recordingConn struct {
	net.Conn
	l    *recordingListener
	once sync.Once
}

func (c *recordingConn) Close() error {
	c.once.Do(func() { c.l.note("close " + c.RemoteAddr().String()) })
	return c.Conn.Close()
}

// At most MaxConnections connections are open at once: with a bound of one, a
// second client is accepted only after the first one's connection closed, and is
// then served.
func TestConnectionLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingListener{Listener: ln}
	srv := httpapi.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}), httpapi.ConnOptions{}, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(httpapi.LimitListener(rec, httpapi.ConnOptions{MaxConnections: 1})) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	send := func(c net.Conn, path string) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path)
	}
	read := func(c net.Conn, br *bufio.Reader, path string) {
		t.Helper()
		// A guard against a hang, not a wait for state.
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != path {
			t.Fatalf("GET %s: %q", path, body)
		}
	}
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	send(a, "/a")
	read(a, bufio.NewReader(a), "/a")
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	send(b, "/b")
	a.Close()
	read(b, bufio.NewReader(b), "/b")
	b.Close()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []string{"accept " + a.LocalAddr().String(), "close " + a.LocalAddr().String(), "accept " + b.LocalAddr().String()}
	if len(rec.events) < 3 || !slices.Equal(rec.events[:3], want) {
		t.Fatalf("events %q, want %q first", rec.events, want)
	}
}

func TestDefaultMaxConnections(t *testing.T) {
	if n := httpapi.DefaultMaxConnections(); n < 16 || n > 4096 {
		t.Fatalf("DefaultMaxConnections() = %d", n)
	}
}

// A request target or header fields too large for the API are refused with the
// error envelope (414, 431), before authentication, and the connection closed.
func TestOversizedRequestHeadGetsTheEnvelope(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		long := strings.Repeat("a", httpapi.MaxURLBytes)
		big := strings.Repeat("b", httpapi.MaxHeaderFieldBytes)
		for _, c := range []struct {
			head   string
			status int
		}{
			{"GET /v1/sandboxes/" + long + " HTTP/1.1\r\nHost: test", http.StatusRequestURITooLong},
			{"GET /healthz?x=" + long + " HTTP/1.1\r\nHost: test", http.StatusRequestURITooLong},
			{"GET /v1/sandboxes HTTP/1.1\r\nHost: test\r\nX-Big: " + big, http.StatusRequestHeaderFieldsTooLarge},
			{"GET /v1/sandboxes HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + e.admin + "\r\nX-Big: " + big, http.StatusRequestHeaderFieldsTooLarge},
		} {
			resp, body, closed := rawRequest(t, e.url, c.head)
			r := response{status: resp.StatusCode, header: resp.Header, body: body}
			r.want(t, c.status, api.CodeInvalidRequest)
			if !closed {
				t.Fatalf("%d: connection left open", c.status)
			}
		}
		// Just under both limits, the request is the API's as usual: here, a sandbox
		// that does not exist.
		r := e.request(e.admin, "GET", "/v1/sandboxes/"+strings.Repeat("a", httpapi.MaxURLBytes-100), nil,
			http.Header{"X-Big": {strings.Repeat("b", httpapi.MaxHeaderFieldBytes-1000)}})
		if r.status != http.StatusNotFound {
			t.Fatalf("just under the limits: status %d", r.status)
		}
	})
}

// Callers without a token cannot take the connections from everyone else: a 401
// closes its connection, so with a bound of two, two such callers that keep their
// connections open still leave room for a probe of /healthz.
func TestUnauthenticatedCallersDoNotHoldConnections(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		o := httpapi.ConnOptions{MaxConnections: 2}
		srv := httpapi.NewHTTPServer(e.handler, o, nil)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(httpapi.LimitListener(ln, o)) }()
		t.Cleanup(func() {
			srv.Close()
			<-served
		})
		for i := range 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			// The client never closes its side before the test ends.
			defer c.Close()
			// A guard against a hang, not a wait for state.
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Fatalf("client %d: status %d, Connection %q; want 401 closing the connection",
					i, resp.StatusCode, resp.Header.Get("Connection"))
			}
		}
		// A guard against a hang, not a timing: before, the probe waited for the
		// idle timeout of two minutes.
		hc := &http.Client{Timeout: 20 * time.Second}
		resp, err := hc.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			t.Fatalf("/healthz after two callers without a token: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: status %d", resp.StatusCode)
		}
	})
}
