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

// switchProxy forwards loopback TCP connections to an upstream that can be changed:
// switching closes the connections open so far, and new ones go to the new upstream.
type switchProxy struct {
	ln       net.Listener
	mu       sync.Mutex
	upstream string
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startSwitchProxy(t *testing.T, upstream string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, upstream: upstream}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			up := p.upstream
			p.mu.Unlock()
			u, err := net.Dial("tcp", up)
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
	t.Cleanup(func() {
		ln.Close()
		p.switchTo("")
		p.wg.Wait()
	})
	return p
}

func (p *switchProxy) switchTo(upstream string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = upstream
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A database that refuses connections, whatever it says while refusing (starting
// up, out of connection slots, not accepting connections to the database), is an
// outage: 503 provider_unavailable with Retry-After, which clients retry, not 500.
func TestRefusingDatabaseIsUnavailable(t *testing.T) {
	for _, code := range []string{"57P03", "53300", "55000"} {
		t.Run(code, func(t *testing.T) {
			u, err := url.Parse(pgtest.SchemaURL(t))
			if err != nil {
				t.Fatal(err)
			}
			proxy := startSwitchProxy(t, u.Host)
			u.Host = proxy.ln.Addr().String()
			q := u.Query()
			q.Set("pool_max_conns", "2")
			u.RawQuery = q.Encode()
			st, err := postgres.Open(context.Background(), u.String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			e := newEnv(t, st)
			e.do(e.admin, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)
			proxy.switchTo(pgtest.Refusing(t, code))
			// The first answers may come from the pool's connections that the switch
			// broke; the later ones from connection attempts the server refuses.
			for range 8 {
				r := e.do(e.admin, "GET", "/v1/admin/pools", nil).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
				if r.header.Get("Retry-After") == "" {
					t.Fatal("no Retry-After")
				}
			}
		})
	}
}
