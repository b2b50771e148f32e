package httpapi_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/netpolicy"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// TestAdminPoolConfigChecked: a pool's adapter config that its adapter would refuse
// to build from is refused when it is written, with 400 invalid_request naming the
// key, on create, replace and patch alike; a good config of every kind is stored.
func TestAdminPoolConfigChecked(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		reg := pools.DefaultRegistry(true)
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			o.AdapterKinds, o.CheckPoolConfig, o.Dev = reg.Kinds, reg.CheckConfig, true
		})
		root := t.TempDir()
		good := map[string]map[string]any{
			"remote":      {"endpoint": "http://127.0.0.1:1", "timeoutSeconds": 5},
			"opensandbox": {"apiURL": "https://opensandbox.example/v1", "portURLSeconds": 600},
			"daytona":     {"apiURL": "https://daytona.example/api", "class": "container"},
			"freestyle":   {"apiURL": "https://freestyle.example", "egress": "public"},
			"fake":        {"totalCPU": 4, "templates": []any{"base"}},
			"devhost":     {"root": root},
		}
		for _, tc := range []struct {
			kind, name string
			config     map[string]any
			key        string
		}{
			{"remote", "empty", map[string]any{}, "endpoint"},
			{"remote", "unknown key", map[string]any{"endpoint": "http://127.0.0.1:1", "endpiont": "x"}, "endpiont"},
			{"remote", "ftp", map[string]any{"endpoint": "ftp://plugin.example/"}, "endpoint"},
			{"remote", "no host", map[string]any{"endpoint": "http://"}, "endpoint"},
			{"remote", "string timeout", map[string]any{"endpoint": "http://127.0.0.1:1", "timeoutSeconds": "5"}, "timeoutSeconds"},
			{"remote", "number endpoint", map[string]any{"endpoint": 8080}, "endpoint"},
			{"opensandbox", "missing apiURL", map[string]any{"image": "ubuntu"}, "apiURL"},
			{"opensandbox", "unknown key", map[string]any{"apiURL": "http://o.example/v1", "apiUrl": "x"}, "apiUrl"},
			{"opensandbox", "ftp", map[string]any{"apiURL": "ftp://o.example/v1"}, "apiURL"},
			{"opensandbox", "string number", map[string]any{"apiURL": "http://o.example/v1", "portURLSeconds": "600"}, "portURLSeconds"},
			{"daytona", "unknown key", map[string]any{"region": "eu"}, "region"},
			{"daytona", "ftp", map[string]any{"apiURL": "ftp://daytona.example/api"}, "apiURL"},
			{"daytona", "wrong type", map[string]any{"snapshot": 3}, "snapshot"},
			{"daytona", "credentials in url", map[string]any{"apiURL": "https://user:pw@daytona.example/api"}, "apiURL"},
			{"freestyle", "unknown key", map[string]any{"egres": "none"}, "egres"},
			{"freestyle", "file url", map[string]any{"apiURL": "file:///etc/passwd"}, "apiURL"},
			{"freestyle", "wrong type", map[string]any{"egress": true}, "egress"},
			{"fake", "unknown key", map[string]any{"totalCpu": 4}, "totalCpu"},
			{"fake", "string number", map[string]any{"totalCPU": "4"}, "totalCPU"},
			{"devhost", "missing root", map[string]any{}, "root"},
			{"devhost", "unknown key", map[string]any{"root": root, "rot": "x"}, "rot"},
			{"devhost", "wrong type", map[string]any{"root": 1}, "root"},
		} {
			t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
				e.t = t
				check := func(r response) {
					t.Helper()
					got := r.want(t, http.StatusBadRequest, api.CodeInvalidRequest).apiError(t)
					if !strings.Contains(got.Message, `"`+tc.key+`"`) {
						t.Errorf("message %q does not name the key %q", got.Message, tc.key)
					}
					if k, _ := got.Details["key"].(string); k != tc.key && !strings.Contains(got.Message, "unknown") {
						t.Errorf("details %v: want key %q", got.Details, tc.key)
					}
				}
				name := strings.ToLower(tc.kind + "-" + strings.ReplaceAll(tc.name, " ", "-"))
				check(e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": name, "adapter": tc.kind, "config": tc.config}))
				e.do(e.admin, "GET", "/v1/admin/pools/"+name, nil).want(t, http.StatusNotFound, api.CodeNotFound)

				// A good pool of the kind is stored, then neither replace nor patch may
				// give it the bad config.
				e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": name, "adapter": tc.kind, "config": good[tc.kind]}).
					want(t, http.StatusCreated)
				check(e.do(e.admin, "PUT", "/v1/admin/pools/"+name, map[string]any{"name": name, "adapter": tc.kind, "config": tc.config}))
				check(e.do(e.admin, "PATCH", "/v1/admin/pools/"+name, map[string]any{"config": tc.config}))
				var p httpapi.Pool
				e.do(e.admin, "GET", "/v1/admin/pools/"+name, nil).want(t, http.StatusOK).decode(t, &p)
				if len(p.Config) != len(good[tc.kind]) {
					t.Errorf("stored config %v, want the good one %v", p.Config, good[tc.kind])
				}
				e.do(e.admin, "DELETE", "/v1/admin/pools/"+name, nil).want(t, http.StatusNoContent)
			})
		}
	})
}

// TestAdminPoolEndpointNetworks: with the operator's policy denying loopback, a
// pool pointed at a loopback address is refused when it is written, naming the key,
// and nothing is stored; the metadata address is refused by the production default
// without a lookup or a dial.
func TestAdminPoolEndpointNetworks(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		reg := pools.DefaultRegistry(false)
		policy := &netpolicy.Policy{Denied: append([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, netpolicy.LinkLocal...)}
		reg.SetEndpointPolicy(policy)
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.AdapterKinds, o.CheckPoolConfig = reg.Kinds, reg.CheckConfig })
		for _, tc := range []struct {
			kind   string
			config map[string]any
			key    string
		}{
			{"remote", map[string]any{"endpoint": "http://127.0.0.1:9"}, "endpoint"},
			{"opensandbox", map[string]any{"apiURL": "http://169.254.169.254/v1"}, "apiURL"},
			{"daytona", map[string]any{"apiURL": "http://[fe80::1]/api"}, "apiURL"},
		} {
			got := e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "p", "adapter": tc.kind, "config": tc.config}).
				want(t, http.StatusBadRequest, api.CodeInvalidRequest).apiError(t)
			if got.Details["key"] != tc.key || !strings.Contains(got.Message, "denies pool endpoints") {
				t.Errorf("%s: %+v, want the key %q and the policy named", tc.kind, got, tc.key)
			}
			e.do(e.admin, "GET", "/v1/admin/pools/p", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		}
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "p", "adapter": "remote", "config": map[string]any{"endpoint": "http://10.0.0.1:9"}}).
			want(t, http.StatusCreated)
		got := e.do(e.admin, "PATCH", "/v1/admin/pools/p", map[string]any{"config": map[string]any{"endpoint": "http://127.0.0.2:9"}}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest).apiError(t)
		if got.Details["key"] != "endpoint" {
			t.Errorf("patch: %+v", got)
		}
	})
}
