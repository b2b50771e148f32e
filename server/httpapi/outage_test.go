package httpapi_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store/postgres"
)

// cuttableProxy forwards loopback TCP connections to a PostgreSQL server until cut,
// which closes the listener and every connection: the database goes away without
// touching the shared server.
type cuttableProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, upstream string) *cuttableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(u, c); u.Close() })
			p.wg.Go(func() { io.Copy(c, u); c.Close() })
		}
	})
	t.Cleanup(p.cut)
	return p
}

func (p *cuttableProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// While the database cannot be reached, the API answers 503 provider_unavailable
// with Retry-After, which clients retry, rather than 500 internal, which they
// must not.
func TestDatabaseOutageIsUnavailable(t *testing.T) {
	u, err := url.Parse(pgtest.SchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := postgres.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, st)
	e.do(e.admin, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)

	proxy.cut()
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/sandboxes"},
		{"POST", "/v1/sandboxes"},
		{"GET", "/v1/sandboxes/sbx_nope"},
		{"GET", "/v1/admin/pools"},
	} {
		var body any
		if req.method == "POST" {
			body = map[string]any{"template": "base"}
		}
		r := e.do(e.admin, req.method, req.path, body).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", req.method, req.path)
		}
	}
}
