package netpolicy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func prefixes(t *testing.T, list ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range list {
		p, err := ParsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestCheckAddr(t *testing.T) {
	p := &Policy{Allowed: prefixes(t, "10.0.0.0/8", "fd00::/8", "169.254.0.0/16"), Denied: prefixes(t, "169.254.169.254", "fe80::/10")}
	for addr, ok := range map[string]bool{
		"10.1.2.3":                true,
		"fd00::1":                 true,
		"169.254.1.1":             true,
		"169.254.169.254":         false, // denied wins over allowed
		"::ffff:169.254.169.254":  false, // an IPv4 address written as IPv6
		"fe80::1%eth0":            false,
		"192.168.1.1":             false, // in no allowed network
		"127.0.0.1":               false,
		"::ffff:10.0.0.1":         true,
		"2001:db8::1":             false,
		"::ffff:192.168.1.1":      false,
		"fd00::ffff:169.254.1.1":  true,
		"fe80::ffff:169.254.1.1":  false,
		"169.254.169.253":         true,
		"::1":                     false,
		"0.0.0.0":                 false,
		"10.255.255.255":          true,
		"11.0.0.0":                false,
		"fc00::1":                 false,
		"fdff:ffff:ffff:ffff::1":  true,
		"::ffff:169.254.169.253":  true,
		"::ffff:127.0.0.1":        false,
		"fe80::a:b:c:d%en0":       false,
		"169.254.0.0":             true,
		"169.254.255.255":         true,
		"2001:db8::ffff:10.0.0.1": false,
		"::ffff:0a00:0001":        true,
		"fe80::":                  false,
		"febf:ffff::1":            false,
		"fec0::1":                 false,
	} {
		err := p.CheckAddr(netip.MustParseAddr(addr))
		var d *DeniedError
		if ok != (err == nil) || (err != nil && !errors.As(err, &d)) {
			t.Errorf("CheckAddr(%s) = %v, want allowed %v", addr, err, ok)
		}
	}
	var none *Policy
	if none.Active() || none.CheckAddr(netip.MustParseAddr("169.254.169.254")) != nil || (&Policy{}).Active() {
		t.Error("no policy refused something")
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.0/8": "10.0.0.0/8", "10.1.2.3/8": "10.0.0.0/8", " 169.254.169.254 ": "169.254.169.254/32",
		"fe80::/10": "fe80::/10", "::1": "::1/128", "::ffff:1.2.3.4": "1.2.3.4/32"} {
		if p, err := ParsePrefix(in); err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "10.0.0.0/33", "example.com", "10.0.0/8", "::ffff:1.2.3.4/104"} {
		if _, err := ParsePrefix(in); err == nil {
			t.Errorf("ParsePrefix(%q) accepted", in)
		}
	}
}

// TestCheckHost: names are held to the policy by the addresses they resolve to (a
// table here: no lookup leaves the machine), every one of them; an address is
// checked without any lookup; a name that does not resolve passes.
func TestCheckHost(t *testing.T) {
	lookups := 0
	p := &Policy{Denied: LinkLocal, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups++
		switch host {
		case "metadata.internal":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("169.254.169.254")}, nil
		case "plugin.internal":
			return []netip.Addr{netip.MustParseAddr("10.0.0.2")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}}
	ctx := t.Context()
	if err := p.CheckHost(ctx, "metadata.internal"); err == nil || !strings.Contains(err.Error(), "metadata.internal (169.254.169.254) is in 169.254.0.0/16") {
		t.Errorf("metadata.internal: %v", err)
	}
	if err := p.CheckHost(ctx, "plugin.internal"); err != nil {
		t.Errorf("plugin.internal: %v", err)
	}
	if err := p.CheckHost(ctx, "gone.internal"); err != nil {
		t.Errorf("a name that does not resolve: %v", err)
	}
	n := lookups
	for _, host := range []string{"169.254.169.254", "[fe80::1]", "fe80::1"} {
		if err := p.CheckHost(ctx, host); err == nil {
			t.Errorf("%s passed", host)
		}
	}
	if lookups != n {
		t.Error("an address was looked up")
	}
}

// TestControlRefusesTheDial: a dial held to a policy that denies loopback does not
// connect to a loopback listener; without the policy it does.
func TestControlRefusesTheDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	deny := &Policy{Denied: prefixes(t, "127.0.0.0/8", "::1")}
	d := &net.Dialer{Control: deny.Control}
	_, err = d.DialContext(t.Context(), "tcp", ln.Addr().String())
	var denied *DeniedError
	if !errors.As(err, &denied) || denied.Network.String() != "127.0.0.0/8" {
		t.Fatalf("dial under the policy: %v, want it refused for 127.0.0.0/8", err)
	}
	resp, err := deny.Client(0).Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("the policy's client reached the listener")
	}
	if !errors.As(err, &denied) {
		t.Fatalf("client error %v, want the policy's", err)
	}
	select {
	case <-accepted:
		t.Fatal("a refused dial connected")
	default:
	}
	c, err := (&net.Dialer{Control: (&Policy{Denied: LinkLocal}).Control}).DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial allowed by the policy: %v", err)
	}
	c.Close()
	<-accepted
	ln.Close()
	<-done
}

// TestUnspecifiedRefused: 0.0.0.0/8 and :: reach the host itself on Linux, so an
// active policy refuses them at check and at dial time, even when a list allows
// them; no policy refuses nothing.
func TestUnspecifiedRefused(t *testing.T) {
	for _, p := range []*Policy{{Denied: LinkLocal}, {Allowed: prefixes(t, "0.0.0.0/0", "::/0")}} {
		for _, addr := range []string{"0.0.0.0", "0.1.2.3", "::", "::ffff:0.0.0.0"} {
			var d *DeniedError
			if err := p.CheckAddr(netip.MustParseAddr(addr)); !errors.As(err, &d) || !d.Unspecified {
				t.Errorf("%+v: CheckAddr(%s) = %v, want refused as unspecified", p, addr, err)
			}
			if err := p.CheckHost(t.Context(), addr); err == nil {
				t.Errorf("%+v: CheckHost(%s) passed", p, addr)
			}
		}
		if err := p.Control("tcp", "0.0.0.0:80", nil); err == nil {
			t.Errorf("%+v: a dial to 0.0.0.0 passed", p)
		}
		if err := p.Control("tcp6", "[::]:80", nil); err == nil {
			t.Errorf("%+v: a dial to :: passed", p)
		}
	}
	if (*Policy)(nil).CheckAddr(netip.MustParseAddr("0.0.0.0")) != nil {
		t.Error("no policy refused 0.0.0.0")
	}
}

// TestCheckHostNumericForms: a host written as a number in a form other than a
// canonical address (which Go does not resolve but C resolvers and proxies read as
// an address) is refused without a lookup; canonical addresses are checked as
// addresses; names with digits, or with a trailing dot, are names.
func TestCheckHostNumericForms(t *testing.T) {
	looked := map[string]bool{}
	p := &Policy{Denied: prefixes(t, "169.254.0.0/16"), Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		looked[host] = true
		return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
	}}
	for _, tc := range []struct {
		host  string
		ok    bool
		asked bool // whether the resolver is asked
	}{
		{"2130706434", false, false},
		{"0177.0.0.2", false, false},
		{"127.0.0.2.", false, false},
		{"0x7f.1", false, false},
		{"0X7F.0.0.1", false, false},
		{"0x7f000001", false, false},
		{"127.1", false, false},
		{"127.000.0.1", false, false},
		{"10.0.0.1.", false, false},
		{"0x", false, false},
		{"1..2", false, false},
		{".", false, false},
		{"2852039166", false, false}, // 169.254.169.254
		{"10.0.0.1", true, false},
		{"[::1]", true, false},
		{"169.254.169.254", false, false},
		{"1e100.net", true, true},
		{"0xdead.example", true, true},
		{"123.example.", true, true},
		{"x10.0.0.1", true, true},
		{"example.com.", true, true},
	} {
		err := p.CheckHost(t.Context(), tc.host)
		if tc.ok != (err == nil) {
			t.Errorf("CheckHost(%q) = %v, want allowed %v", tc.host, err, tc.ok)
		}
		if looked[tc.host] != tc.asked {
			t.Errorf("CheckHost(%q): looked up %v, want %v", tc.host, looked[tc.host], tc.asked)
		}
		var h *HostError
		if err != nil && !tc.ok && !tc.asked && tc.host != "169.254.169.254" && !errors.As(err, &h) {
			t.Errorf("CheckHost(%q) = %v, want a HostError", tc.host, err)
		}
		// CheckLiteral decides the same without a lookup, and lets every name pass.
		delete(looked, tc.host)
		if err := p.CheckLiteral(tc.host); (err == nil) != (tc.ok || tc.asked) || looked[tc.host] {
			t.Errorf("CheckLiteral(%q) = %v (looked up %v), want allowed %v", tc.host, err, looked[tc.host], tc.ok || tc.asked)
		}
	}
}

// TestProxyTargetsChecked: behind a forward proxy (here one on loopback that answers
// every request itself, so nothing leaves the machine), the dial reaches only the
// proxy, so the policy checks the request's target before handing it over: an
// address, a number read as one, a name resolving to a denied address and a name
// that does not resolve never reach the proxy; an allowed name does.
func TestProxyTargetsChecked(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Host)
		mu.Unlock()
		if r.Method == http.MethodConnect {
			w.WriteHeader(http.StatusForbidden) // no tunnel: nothing leaves the machine
			return
		}
		_, _ = io.WriteString(w, "proxied")
	}))
	defer proxy.Close()
	proxyURL, _ := url.Parse(proxy.URL)
	p := &Policy{
		// The proxy is at 127.0.0.1; what it could reach for us is 127.0.0.2.
		Denied: prefixes(t, "127.0.0.2/32", "169.254.0.0/16"),
		Proxy:  http.ProxyURL(proxyURL),
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "metadata.internal":
				return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.2")}, nil
			case "plugin.internal":
				return []netip.Addr{netip.MustParseAddr("10.0.0.2")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
	}
	client := p.Client(0)
	for _, target := range []string{
		"http://127.0.0.2:8080/",
		"http://2130706434:8080/",
		"http://0x7f.0.0.2/",
		"http://metadata.internal/",
		"https://metadata.internal/",
		"http://gone.internal/",
		"http://0.0.0.0:8080/",
		"http://[::]:8080/",
		"http://169.254.169.254/latest",
	} {
		resp, err := client.Get(target)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: reached the proxy (%s)", target, resp.Status)
			continue
		}
		var d *DeniedError
		var h *HostError
		if !errors.As(err, &d) && !errors.As(err, &h) {
			t.Errorf("%s: %v, want the policy's refusal", target, err)
		}
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Errorf("the proxy got %v", seen)
	}
	mu.Unlock()
	resp, err := client.Get("http://plugin.internal:8080/x")
	if err != nil {
		t.Fatalf("an allowed name: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if string(body) != "proxied" || len(seen) != 1 || seen[0] != "GET plugin.internal:8080" {
		t.Errorf("an allowed name: %q, the proxy saw %v", body, seen)
	}
}
