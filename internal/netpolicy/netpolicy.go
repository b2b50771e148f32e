// Package netpolicy holds pool endpoints to the networks the operator allows. An
// admin token can point a pool at any URL, and the daemon then calls it with the
// pool's credential from inside the operator's network: at a cloud metadata service
// (169.254.169.254), say, or at an internal service. A Policy names the networks
// endpoints may (Allowed) and may not (Denied) be in.
//
// It is applied twice: when a pool is written, to the addresses its endpoints' host
// names resolve to (CheckHost), so that the admin hears why at once; and at every
// connection, by a net.Dialer Control function (Control, Transport), to the address
// actually dialled, so that a name that resolves to an allowed address when checked
// and to a denied one later (DNS rebinding) still cannot reach it.
package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// LinkLocal are IPv4 and IPv6 link-local, where most cloud metadata services answer.
var LinkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// Metadata are cloud metadata services outside link-local: AWS's IPv6 instance
// metadata endpoint and Alibaba Cloud's.
var Metadata = []netip.Prefix{netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("100.100.100.200/32")}

// DefaultDenied are the networks a production daemon denies when its operator names
// none: LinkLocal and Metadata.
var DefaultDenied = append(slices.Clone(LinkLocal), Metadata...)

// Policy says which networks endpoints may be in. The zero value and nil allow all.
type Policy struct {
	// Allowed, when not empty, are the only networks allowed.
	Allowed []netip.Prefix
	// Denied are refused even when Allowed holds them.
	Denied []netip.Prefix
	// Resolve looks up a host name's addresses for CheckHost; the system resolver
	// when nil. Tests give a table, so that no lookup leaves the machine.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Proxy picks the proxy a Transport's request goes through, as
	// http.Transport.Proxy; http.ProxyFromEnvironment (HTTP_PROXY, HTTPS_PROXY,
	// NO_PROXY) when nil. Tests give a loopback proxy.
	Proxy func(*http.Request) (*url.URL, error)
}

// Active reports whether the policy refuses anything.
func (p *Policy) Active() bool { return p != nil && (len(p.Allowed) > 0 || len(p.Denied) > 0) }

// DeniedError says that an address is outside the networks endpoints may be in.
type DeniedError struct {
	// Host is the name as written, when the address is one it resolved to.
	Host string
	Addr netip.Addr
	// Network is the denied network the address is in; invalid when the address
	// is refused for being in no allowed network.
	Network netip.Prefix
	// Unspecified is set when the address is refused for being in 0.0.0.0/8 or
	// being ::, whatever the lists say.
	Unspecified bool
}

func (e *DeniedError) Error() string {
	what := e.Addr.String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (%s)", e.Host, what)
	}
	if e.Unspecified {
		return fmt.Sprintf("%s is an unspecified address, which reaches the daemon's own host; no pool endpoint may be one", what)
	}
	if e.Network.IsValid() {
		return fmt.Sprintf("%s is in %s, a network the daemon's operator denies pool endpoints (poolEndpoints.deniedNetworks)", what, e.Network)
	}
	return fmt.Sprintf("%s is outside the networks the daemon's operator allows pool endpoints (poolEndpoints.allowedNetworks)", what)
}

// thisNetwork is 0.0.0.0/8: Linux connects 0.0.0.0 to the host itself, as it does
// ::, so either would reach the daemon's loopback services past a list that denies
// only 127.0.0.0/8 and ::1.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// CheckAddr refuses an address outside the policy's networks. An IPv4 address
// written as IPv6 (::ffff:169.254.169.254) is held to the IPv4 networks. An active
// policy always refuses the unspecified addresses (0.0.0.0/8, ::), even when
// Allowed holds them.
func (p *Policy) CheckAddr(a netip.Addr) error {
	if !p.Active() {
		return nil
	}
	a = a.Unmap().WithZone("")
	if a.IsUnspecified() || thisNetwork.Contains(a) {
		return &DeniedError{Addr: a, Unspecified: true}
	}
	for _, n := range p.Denied {
		if n.Contains(a) {
			return &DeniedError{Addr: a, Network: n}
		}
	}
	if len(p.Allowed) > 0 && !slices.ContainsFunc(p.Allowed, func(n netip.Prefix) bool { return n.Contains(a) }) {
		return &DeniedError{Addr: a}
	}
	return nil
}

// HostError says a host is refused for how it is written, before any address.
type HostError struct {
	Host   string
	Reason string
}

func (e *HostError) Error() string { return fmt.Sprintf("host %q %s", e.Host, e.Reason) }

// literal reads host as URLs write an address (10.0.0.1, [::1], ::1): ok is false
// for a name. A host written only with numbers, dots and 0x forms that is not an
// address in canonical form (2130706434, 0177.0.0.1, 0x7f.1, 127.0.0.1.) is an
// error: Go reads it as a name that does not resolve, but C resolvers and proxies
// read it as an address, which the policy would then never have seen. A trailing
// dot is taken off before that test, so that it cannot hide the number.
func literal(host string) (a netip.Addr, ok bool, err error) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a, true, nil
	}
	if numeric(strings.TrimSuffix(h, ".")) {
		return netip.Addr{}, false, &HostError{Host: host, Reason: "is written as a number but not as an IP address in canonical form (d.d.d.d without leading zeros or a trailing dot); write the address"}
	}
	return netip.Addr{}, false, nil
}

// numeric reports whether every dot-separated label of h is empty, decimal digits
// or a 0x hexadecimal number: what inet_aton and its kin may read as an address.
func numeric(h string) bool {
	for label := range strings.SplitSeq(h, ".") {
		digits, hex := label, false
		if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
			digits, hex = label[2:], true
		}
		for _, c := range digits {
			if !('0' <= c && c <= '9' || hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')) {
				return false
			}
		}
	}
	return true
}

// CheckLiteral is CheckHost without a lookup: an address, or a number that is not
// one in canonical form, is checked as CheckHost does, and a name passes, left to
// Control at the dial. For callers that must not wait on DNS.
func (p *Policy) CheckLiteral(host string) error {
	if !p.Active() || host == "" {
		return nil
	}
	a, ok, err := literal(host)
	if err != nil || !ok {
		return err
	}
	return p.CheckAddr(a)
}

// CheckHost refuses a host (an address, or a name whose addresses are looked up)
// when any of its addresses is outside the policy's networks, and a number that is
// not an address in canonical form (literal). A name that cannot be resolved passes:
// it may exist later, and Control refuses what it turns out to be.
func (p *Policy) CheckHost(ctx context.Context, host string) error {
	return p.checkHost(ctx, host, false)
}

// checkHost is CheckHost; strict refuses a name that does not resolve, or resolves
// to no address, instead of letting it pass.
func (p *Policy) checkHost(ctx context.Context, host string, strict bool) error {
	if !p.Active() || host == "" {
		return nil
	}
	if _, ok, err := literal(host); err != nil || ok {
		return p.CheckLiteral(host)
	}
	resolve := p.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := resolve(ctx, host)
	if strict && (err != nil || len(addrs) == 0) {
		reason := "resolves to no address"
		if err != nil {
			reason = "does not resolve (" + err.Error() + ")"
		}
		return &HostError{Host: host, Reason: reason + " from the daemon, which refuses to send a request for a name it cannot check to a proxy"}
	}
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := p.CheckAddr(a); err != nil {
			var d *DeniedError
			if errors.As(err, &d) {
				d.Host = host
			}
			return err
		}
	}
	return nil
}

// Control is a net.Dialer Control function refusing connections to addresses
// outside the policy's networks. It sees the address about to be connected to, after
// any name was resolved.
func (p *Policy) Control(_, address string, _ syscall.RawConn) error {
	if !p.Active() {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP connection (a Unix socket has no address to hold to a network).
		return nil
	}
	return p.CheckAddr(ap.Addr())
}

// Transport is http.DefaultTransport's configuration with dials held to the policy.
//
// Behind a proxy (HTTPS_PROXY, or Proxy), what is dialled, and so checked by
// Control, is the proxy, which then connects wherever the request names. So, under
// an active policy, a request is handed to a proxy only once its target host passed
// the check too: an address is checked as it is; a name is looked up (Resolve) and
// every address it resolves to is checked; a name that does not resolve from the
// daemon is refused, since the addresses the proxy would reach cannot be known. The
// proxy looks the name up again, so a name that resolves differently there (split
// DNS, rebinding between the two lookups) is beyond this check.
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	t.DialContext = d.DialContext
	if p != nil && p.Proxy != nil {
		t.Proxy = p.Proxy
	}
	if p.Active() && t.Proxy != nil {
		proxy := t.Proxy
		t.Proxy = func(req *http.Request) (*url.URL, error) {
			u, err := proxy(req)
			if err != nil || u == nil {
				// No proxy: the dial itself is checked.
				return u, err
			}
			if err := p.checkHost(req.Context(), req.URL.Hostname(), true); err != nil {
				return nil, err
			}
			return u, nil
		}
	}
	return t
}

// Client is an http.Client whose connections are held to the policy, with the given
// overall timeout (0 for none: calls are bounded by their context) and without
// following redirects, as the adapters' own clients: a redirect would resend the
// credential somewhere the operator did not configure.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     p.Transport(),
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ParsePrefix reads a network as CIDR ("10.0.0.0/8", "fd00::/8") or a single
// address ("169.254.169.254", a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a network in CIDR notation (10.0.0.0/8, fd00::/8)", s)
		}
		if p.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("%q: write IPv4 networks in IPv4 notation", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a network in CIDR notation (10.0.0.0/8) nor an address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
