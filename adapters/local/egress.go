package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/internal/netpolicy"
)

// Egress modes of a pool's config ("egress").
const (
	EgressNone      = "none"
	EgressAllowlist = "allowlist"
)

// egressPort is where, inside a sandbox of an allow-list pool, the bridge listens
// for the sandbox's HTTP clients; HTTP_PROXY and HTTPS_PROXY name it.
const egressPort = "3128"

// egressNoProxy is NO_PROXY inside the sandbox: its own loopback is its own, and
// the proxy could not reach it anyway.
const egressNoProxy = "localhost,127.0.0.1,::1"

// allowRule is one entry of egressAllow: a host name, a *.domain (any name below
// the domain, not the domain itself) or an IP address, and a port, or none for the
// web's two (80 and 443).
type allowRule struct {
	host     string // lower case, without a trailing dot; "*.example.com" for a wildcard
	addr     netip.Addr
	port     int // 0: 80 and 443
	wildcard bool
}

// parseAllowRule reads "host", "host:port", "*.domain[:port]", "1.2.3.4[:port]" or
// "[::1][:port]".
func parseAllowRule(s string) (allowRule, error) {
	host, portStr := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, portStr = h, p
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	var r allowRule
	if portStr != "" {
		p, err := strconv.Atoi(portStr)
		if err != nil || p < 1 || p > 65535 {
			return allowRule{}, fmt.Errorf("%q: the port must be from 1 to 65535", s)
		}
		r.port = p
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return allowRule{}, fmt.Errorf("%q: an address with a zone is not allowed", s)
		}
		r.addr = a.Unmap()
		return r, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := host
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.wildcard, name = true, rest
	}
	if !validHostName(name) || (r.wildcard && !strings.Contains(name, ".")) {
		return allowRule{}, fmt.Errorf("%q is not a host name, *.domain or IP address, with an optional :port", s)
	}
	r.host = name
	return r, nil
}

// validHostName accepts names of letters, digits, hyphens and underscores in dot-separated labels.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allows reports whether the rule lets a sandbox reach host (a name or an address,
// as the client wrote it) on port.
func (r allowRule) allows(host string, port int) bool {
	if r.port == 0 && port != 80 && port != 443 || r.port != 0 && port != r.port {
		return false
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return r.addr.IsValid() && a.Unmap() == r.addr
	}
	if r.addr.IsValid() {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if r.wildcard {
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

// egressProxy is the host side of an allow-list pool's egress: an HTTP proxy
// (CONNECT for TLS and anything else over TCP, absolute-URI requests for plain
// HTTP) that dials only what a rule allows. It listens on a Unix socket that a
// sandbox's bridge reaches from inside the sandbox's network namespace, which has
// no other way out. Names are resolved here, on the host; whatever they resolve
// to, cloud metadata and link-local addresses are never dialled.
type egressProxy struct {
	rules []allowRule
	// dial connects to an allowed address; tests give one that knows their names.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// metadataPolicy refuses cloud metadata and link-local addresses, whatever name
// resolved to them.
var metadataPolicy = &netpolicy.Policy{Denied: netpolicy.DefaultDenied}

// newEgressProxy holds dial (a net.Dialer's when nil) to rules.
func newEgressProxy(rules []allowRule, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *egressProxy {
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: metadataPolicy.Control}
		dial = d.DialContext
	}
	return &egressProxy{rules: rules, dial: dial}
}

// allowed reports whether hostport, as a client named it, is in the allow-list.
func (p *egressProxy) allowed(hostport, defaultPort string) (string, bool) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, defaultPort
	}
	n, err := strconv.Atoi(port)
	if err != nil || host == "" {
		return net.JoinHostPort(host, port), false
	}
	target := net.JoinHostPort(strings.Trim(host, "[]"), port)
	for _, r := range p.rules {
		if r.allows(host, n) {
			return target, true
		}
	}
	return target, false
}

// refuse answers a request the allow-list does not cover, naming what was asked so
// that the sandbox's user knows which entry is missing.
func refuse(w http.ResponseWriter, target string) {
	http.Error(w, "differently local egress: "+target+" is not in the pool's egressAllow", http.StatusForbidden)
}

// serve answers one request; a tunnel's two connections are handed to track, so
// that its owner can end them.
func (p *egressProxy) serve(w http.ResponseWriter, r *http.Request, track func(...net.Conn) (untrack func())) {
	if r.Method == http.MethodConnect {
		p.connect(w, r, track)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "differently local egress: this is a proxy: send absolute http:// URLs, or CONNECT for anything else", http.StatusBadRequest)
		return
	}
	target, ok := p.allowed(r.URL.Host, "80")
	if !ok {
		refuse(w, target)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	t := &http.Transport{
		// The allow-list was checked on the name; the dial goes to that name only.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return p.dial(ctx, network, target)
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	defer t.CloseIdleConnections()
	resp, err := t.RoundTrip(out)
	if err != nil {
		http.Error(w, "differently local egress: "+target+": "+errors.Unwrap(err).Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// hopHeaders belong to one connection, not to the request passed on.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *egressProxy) connect(w http.ResponseWriter, r *http.Request, track func(...net.Conn) (untrack func())) {
	target, ok := p.allowed(r.Host, "443")
	if !ok {
		refuse(w, target)
		return
	}
	up, err := p.dial(r.Context(), "tcp", target)
	if err != nil {
		http.Error(w, "differently local egress: "+target+": "+err.Error(), http.StatusBadGateway)
		return
	}
	rc := http.NewResponseController(w)
	conn, buf, err := rc.Hijack()
	if err != nil {
		_ = up.Close()
		http.Error(w, "differently local egress: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		_ = up.Close()
		return
	}
	// What the client sent after its CONNECT, before the answer, is the tunnel's.
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			_ = conn.Close()
			_ = up.Close()
			return
		}
	}
	defer track(conn, up)()
	splice(conn, up)
}

// splice copies both ways until either side is done, then closes both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Go(func() { half(a, b) })
	wg.Go(func() { half(b, a) })
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// egressServer is one command's egress proxy: it serves the command's socket
// until the command has ended, and close ends its tunnels too.
type egressServer struct {
	p      *egressProxy
	srv    *http.Server
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // tunnels' connections, which leave srv's books when hijacked
	active sync.WaitGroup        // requests being served, and Serve itself
}

func serveEgress(p *egressProxy, ln net.Listener) *egressServer {
	s := &egressServer{p: p, conns: map[net.Conn]struct{}{}}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		// A sandbox's client that hangs up early is not the daemon's problem.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	s.active.Go(func() { _ = s.srv.Serve(ln) })
	return s
}

func (s *egressServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	// Under mu and before closed is set, so close's Wait counts this request.
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()
	s.p.serve(w, r, s.track)
}

func (s *egressServer) track(cs ...net.Conn) (untrack func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		if s.closed {
			_ = c.Close()
		}
		s.conns[c] = struct{}{}
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range cs {
			delete(s.conns, c)
		}
	}
}

// close stops serving, ends every connection, tunnels included, and returns once
// every request has been answered.
func (s *egressServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	_ = s.srv.Close()
	s.active.Wait()
}
