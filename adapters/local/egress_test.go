package local

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// TestMain lets this test binary be the egress bridge, as differently-server is.
func TestMain(m *testing.M) {
	if code, ok := RunBridge(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestAllowRules(t *testing.T) {
	tests := []struct {
		rule string
		host string
		port int
		want bool
	}{
		{"pypi.org", "pypi.org", 443, true},
		{"pypi.org", "PyPI.org.", 80, true},
		{"pypi.org", "pypi.org", 8080, false},
		{"pypi.org", "files.pypi.org", 443, false},
		{"pypi.org", "evilpypi.org", 443, false},
		{"*.github.com", "api.github.com", 443, true},
		{"*.github.com", "a.b.github.com", 443, true},
		{"*.github.com", "github.com", 443, false},
		{"*.github.com", "api.github.com.evil.io", 443, false},
		{"*.github.com:8443", "api.github.com", 8443, true},
		{"*.github.com:8443", "api.github.com", 443, false},
		{"10.0.0.7:8080", "10.0.0.7", 8080, true},
		{"10.0.0.7:8080", "10.0.0.8", 8080, false},
		{"10.0.0.7", "10.0.0.7", 443, true},
		{"10.0.0.7", "10.0.0.7", 22, false},
		{"[::1]:9", "::1", 9, true},
		{"[::1]:9", "[::1]", 9, true},
		{"::ffff:10.0.0.7", "10.0.0.7", 80, true},
		{"10.0.0.7", "ten.example", 80, false},
		{"pypi.org", "151.101.0.223", 443, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s:%d", tt.rule, tt.host, tt.port), func(t *testing.T) {
			r, err := parseAllowRule(tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.allows(tt.host, tt.port); got != tt.want {
				t.Errorf("allows = %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "*", "*.com", "http://pypi.org", "pypi.org/simple", "pypi.org:0", "pypi.org:x",
		"-bad.org", "a..b", "fe80::1%eth0", "pypi.org:443:1"} {
		if _, err := parseAllowRule(bad); err == nil {
			t.Errorf("parseAllowRule(%q) accepted", bad)
		}
	}
}

// upstreams are loopback servers named upstream.test (plain HTTP) and
// tls.upstream.test (TLS) through dial, which the proxies of these tests use.
type upstreams struct {
	plain, tls *httptest.Server
	plainPort  string
	tlsPort    string
}

func startUpstreams(t *testing.T) *upstreams {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream %s, proxy headers: %q", r.URL.Path, r.Header.Get("Proxy-Authorization"))
	})
	u := &upstreams{plain: httptest.NewServer(h), tls: httptest.NewTLSServer(h)}
	t.Cleanup(u.plain.Close)
	t.Cleanup(u.tls.Close)
	_, u.plainPort, _ = net.SplitHostPort(u.plain.Listener.Addr().String())
	_, u.tlsPort, _ = net.SplitHostPort(u.tls.Listener.Addr().String())
	return u
}

// dial resolves the tests' names to loopback and refuses any other: nothing
// leaves the machine, whatever a bug lets through.
func (u *upstreams) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	switch host {
	case "upstream.test", "tls.upstream.test", "127.0.0.1":
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	return nil, fmt.Errorf("test dialer: %s is not a test upstream", addr)
}

// proxyClient is an HTTP client whose proxy is the egress server on socket.
func proxyClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true,
	}}
}

func TestEgressProxy(t *testing.T) {
	u := startUpstreams(t)
	var rules []allowRule
	for _, e := range []string{"upstream.test:" + u.plainPort, "*.upstream.test:" + u.tlsPort, "169.254.169.254:80"} {
		r, err := parseAllowRule(e)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	socket := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveEgress(newEgressProxy(rules, u.dial), ln)
	t.Cleanup(srv.close)
	c := proxyClient(socket)

	tests := []struct {
		name, url string
		status    int
		body      string
	}{
		{"plain HTTP, allowed", "http://upstream.test:" + u.plainPort + "/a", 200, "hello from upstream /a"},
		{"TLS through CONNECT, allowed by a wildcard", "https://tls.upstream.test:" + u.tlsPort + "/b", 200, "hello from upstream /b"},
		{"plain HTTP, another port", "http://upstream.test:" + u.tlsPort + "/", 403, "upstream.test:" + u.tlsPort + " is not in the pool's egressAllow"},
		{"plain HTTP, another host", "http://other.test:" + u.plainPort + "/", 403, "other.test:" + u.plainPort},
		{"an address for an allowed name", "http://127.0.0.1:" + u.plainPort + "/", 403, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tt.url, nil)
			req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.body) {
				t.Fatalf("%d %q, want %d containing %q", resp.StatusCode, body, tt.status, tt.body)
			}
			// Inside a TLS tunnel the header is the client's to send; on plain
			// HTTP it is the proxy's to drop.
			if tt.status == 200 && strings.HasPrefix(tt.url, "http:") && strings.Contains(string(body), "c2VjcmV0") {
				t.Errorf("the proxy passed the client's Proxy-Authorization on: %q", body)
			}
		})
	}

	// A CONNECT refused: curl and the SDKs show the status.
	_, err = c.Get("https://other.test:" + u.tlsPort + "/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT to a host not allowed: %v", err)
	}

	// Allowed by a rule, but cloud metadata: the real dialer never connects.
	real := serveEgressOn(t, newEgressProxy(rules, nil))
	resp, err := proxyClient(real).Get("http://169.254.169.254/latest/meta-data/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "169.254.169.254") {
		t.Errorf("metadata: %d %q, want 502 naming the address", resp.StatusCode, body)
	}
}

func serveEgressOn(t *testing.T, p *egressProxy) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveEgress(p, ln)
	t.Cleanup(srv.close)
	return socket
}

// close ends open tunnels: the command that had them is gone.
func TestEgressCloseEndsTunnels(t *testing.T) {
	// An upstream that accepts and never speaks or hangs up.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	held := make(chan net.Conn, 1)
	go func() {
		c, err := up.Accept()
		if err == nil {
			held <- c
		}
	}()
	_, port, _ := net.SplitHostPort(up.Addr().String())
	r, _ := parseAllowRule("127.0.0.1:" + port)
	socket := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveEgress(newEgressProxy([]allowRule{r}, nil), ln)

	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	upConn := <-held
	defer upConn.Close()

	srv.close() // returns only once the tunnel's goroutines are done
	if _, err := br.ReadByte(); err == nil {
		t.Error("the tunnel is still open after close")
	}
	if _, err := net.Dial("unix", socket); err == nil {
		t.Error("the socket still accepts after close")
	}
}

// newEgressAdapter is a local adapter whose sandboxes may reach u's servers only.
func newEgressAdapter(t *testing.T, u *upstreams) *Adapter {
	t.Helper()
	a, err := New(t.Context(), Config{Root: t.TempDir(), Egress: EgressAllowlist,
		EgressAllow: []string{"upstream.test:" + u.plainPort, "tls.upstream.test:" + u.tlsPort}, Dial: u.dial})
	if err != nil {
		if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
			t.Skipf("DIFFERENTLY_SKIP_LOCAL=1: %v", err)
		}
		t.Fatalf("local adapter: %v (set DIFFERENTLY_SKIP_LOCAL=1 to skip on a host without bwrap)", err)
	}
	return a
}

// A sandbox of an allow-list pool reaches the allowed hosts through the proxy its
// environment names, by HTTP and HTTPS, and nothing else: other hosts are refused
// by the proxy, and without the proxy there is no network.
func TestEgressFromASandbox(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Fatal("this test runs curl inside a sandbox; install it (Debian: apt-get install curl)")
	}
	u := startUpstreams(t)
	a := newEgressAdapter(t, u)
	caps, err := a.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(caps.Features, " "), adapters.FeatureEgressControl) {
		t.Errorf("features %v lack %s", caps.Features, adapters.FeatureEgressControl)
	}
	if d := a.Info().Description; !strings.Contains(d, "upstream.test:"+u.plainPort) {
		t.Errorf("the description does not say what is allowed: %s", d)
	}
	ref := create(t, a, nil)
	tests := []struct {
		name, command string
		exit          int
		stdout        string
	}{
		{"plain HTTP", "curl -sS http://upstream.test:" + u.plainPort + "/p", 0, "hello from upstream /p"},
		{"HTTPS", "curl -sSk https://tls.upstream.test:" + u.tlsPort + "/s", 0, "hello from upstream /s"},
		{"a host not allowed", "curl -sS -o /dev/null -w '%{http_code}' http://other.test:" + u.plainPort + "/", 0, "403"},
		{"HTTPS to a host not allowed", "curl -sSk https://other.test:" + u.tlsPort + "/; echo exit=$?", 0, "exit=56"},
		{"around the proxy", "curl -sS --noproxy '*' --connect-timeout 5 http://127.0.0.1:" + u.plainPort + "/; echo exit=$?", 0, "exit=7"},
		{"the environment", "echo $HTTPS_PROXY $http_proxy $NO_PROXY", 0, "http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1"},
		{"the command's exit code", "exit 3", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: tt.command, TimeoutSeconds: 60})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.exit || !strings.Contains(res.Stdout, tt.stdout) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout containing %q", res.ExitCode, res.Stdout, res.Stderr, tt.exit, tt.stdout)
			}
		})
	}
	// Each command's socket goes with it.
	if left, _ := filepath.Glob(filepath.Join(a.Root(), "egress", "*.sock")); len(left) != 0 {
		t.Errorf("sockets left behind: %v", left)
	}
}

// A conversation over stdin reaches the command through bwrap, and through the
// egress bridge too.
func TestExecStdinThroughTheJail(t *testing.T) {
	t.Parallel()
	u := startUpstreams(t)
	for name, a := range map[string]*Adapter{"plain": newAdapter(t), "egress bridge": newEgressAdapter(t, u)} {
		t.Run(name, func(t *testing.T) {
			ref := create(t, a, nil)
			stdin := make(chan []byte, 1)
			stdin <- []byte("a\n")
			var out []string
			st, err := a.ExecStdin(t.Context(), ref, api.ExecRequest{Command: `while read l; do echo "got $l"; done; echo bye`}, stdin,
				func(_ string, data []byte) error {
					out = append(out, string(data))
					switch string(data) {
					case "got a\n":
						stdin <- []byte("b\n")
					case "got b\n":
						close(stdin)
					}
					return nil
				})
			if err != nil || st.Code != 0 || strings.Join(out, "") != "got a\ngot b\nbye\n" {
				t.Fatalf("ExecStdin = %+v, %v; output %q", st, err, out)
			}
		})
	}
}
