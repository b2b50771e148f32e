package pools

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/netpolicy"
	"github.com/different-ai/differently/server/store"
)

// TestEndpointPolicy: with loopback denied, a pool naming a loopback address is
// refused when it is checked, naming the key; one naming a host that resolves there
// is refused too; and a pool that gets past the checks (a name the check could not
// see through, stored before the policy) is built but never connects: its dials are
// refused, for every kind that calls a backend, and the backend sees no request.
func TestEndpointPolicy(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		adapterhttp.Handler(fake.New(fake.Config{}), "tok").ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	reg := DefaultRegistry(false)
	reg.SetEndpointPolicy(&netpolicy.Policy{
		Denied: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "plugin.internal" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.7")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
	})
	ctx := t.Context()
	for _, tc := range []struct {
		kind string
		cfg  map[string]any
		key  string
	}{
		{"remote", map[string]any{"endpoint": srv.URL}, "endpoint"},
		{"remote", map[string]any{"endpoint": "http://plugin.internal:" + port}, "endpoint"},
		{"remote", map[string]any{"endpoint": "http://[::1]:" + port}, "endpoint"},
		{"opensandbox", map[string]any{"apiURL": srv.URL + "/v1"}, "apiURL"},
		{"daytona", map[string]any{"apiURL": srv.URL}, "apiURL"},
		{"freestyle", map[string]any{"apiURL": "http://plugin.internal"}, "apiURL"},
	} {
		err := reg.CheckConfig(ctx, tc.kind, tc.cfg)
		if e := api.AsError(err); e == nil || e.Code != api.CodeInvalidRequest || e.Details["key"] != tc.key ||
			!strings.Contains(e.Message, "127.0.0.0/8") && !strings.Contains(e.Message, "::1/128") {
			t.Errorf("%s %v: CheckConfig = %v, want invalid_request on %q naming the network", tc.kind, tc.cfg, err, tc.key)
		}
	}
	if err := reg.CheckConfig(ctx, "remote", map[string]any{"endpoint": "https://plugin.example.invalid"}); err != nil {
		t.Errorf("a name that does not resolve: %v", err)
	}

	// Stored before the policy: an address is refused by Build, before the
	// credential is read; a name is built, and its dials are refused.
	env := Env{Getenv: func(string) string { return "tok" }}
	if _, err := reg.Build(ctx, store.Pool{Name: "lit", Adapter: "remote", Config: map[string]any{"endpoint": srv.URL}}, env); err == nil ||
		!strings.Contains(err.Error(), "127.0.0.0/8") {
		t.Errorf("Build of a loopback address: %v", err)
	}
	for _, p := range []store.Pool{
		{Name: "remote", Adapter: "remote", CredentialsEnv: "TOK", Config: map[string]any{"endpoint": "http://localhost:" + port}},
		{Name: "remote-timeout", Adapter: "remote", CredentialsEnv: "TOK", Config: map[string]any{"endpoint": "http://localhost:" + port, "timeoutSeconds": 30}},
		{Name: "oss", Adapter: "opensandbox", CredentialsEnv: "TOK", Config: map[string]any{"apiURL": "http://localhost:" + port + "/v1"}},
		{Name: "dtn", Adapter: "daytona", CredentialsEnv: "TOK", Config: map[string]any{"apiURL": "http://localhost:" + port}},
		{Name: "fs", Adapter: "freestyle", CredentialsEnv: "TOK", Config: map[string]any{"apiURL": "http://localhost:" + port}},
	} {
		a, err := reg.Build(ctx, p, env)
		if err != nil {
			t.Fatalf("%s: Build: %v", p.Name, err)
		}
		if err := a.Health(ctx); err == nil || !strings.Contains(err.Error(), "denies pool endpoints") {
			t.Errorf("%s: Health = %v, want the dial refused by the policy", p.Name, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback backend got %d requests", n)
	}
}

// TestProductionDeniesLinkLocal: a production daemon's default policy refuses the
// metadata address when the pool is checked, without a lookup or a dial.
func TestProductionDeniesLinkLocal(t *testing.T) {
	reg := DefaultRegistry(false)
	reg.SetEndpointPolicy(&netpolicy.Policy{Denied: netpolicy.LinkLocal, Resolve: func(context.Context, string) ([]netip.Addr, error) {
		t.Error("an address was looked up")
		return nil, nil
	}})
	for _, u := range []string{"http://169.254.169.254/latest", "http://[fe80::1]:80", "http://[::ffff:169.254.169.254]/"} {
		if err := reg.CheckConfig(t.Context(), "remote", map[string]any{"endpoint": u}); err == nil {
			t.Errorf("%s: allowed", u)
		}
	}
}
