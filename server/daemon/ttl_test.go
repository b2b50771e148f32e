package daemon_test

import (
	"net/http/httptest"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/internal/pgtest"
)

// withoutRenewal hides the fake's TTLRenewer, as a plugin whose backend keeps no
// expiry of its own.
type withoutRenewal struct{ adapters.ExecutionAdapter }

// An extended TTL reaches the backend of a remote pool: PATCH ttlSeconds goes
// through the daemon, the remote adapter and the plugin's handler to the adapter
// behind it. A plugin that does not declare TTL renewal is left alone, and the PATCH
// still succeeds.
func TestRemotePoolRenewsTheBackendTTL(t *testing.T) {
	renewing := fake.New(fake.Config{})
	plain := fake.New(fake.Config{})
	r := start(t, t.TempDir(), pgtest.SchemaURL(t))
	for name, a := range map[string]adapters.ExecutionAdapter{"renewing": renewing, "plain": withoutRenewal{plain}} {
		srv := httptest.NewServer(adapterhttp.Handler(a, ""))
		t.Cleanup(srv.Close)
		r.call("POST", "/v1/admin/pools", map[string]any{
			"name": name, "adapter": "remote", "trust": "private",
			"config": map[string]any{"endpoint": srv.URL},
		}, 201, nil)
	}

	refs := map[string]string{}
	for _, pool := range []string{"renewing", "plain"} {
		var sb struct {
			ID         string `json:"id"`
			BackendRef string `json:"backendRef"`
		}
		r.call("POST", "/v1/sandboxes", map[string]any{
			"ttlSeconds": 600,
			"placement":  map[string]any{"allowedPools": []string{pool}},
		}, 202, &sb)
		r.waitState(sb.ID, "running")
		r.call("PATCH", "/v1/sandboxes/"+sb.ID, map[string]any{"ttlSeconds": 7200}, 200, &sb)
		refs[pool] = sb.BackendRef
	}

	v, err := renewing.Inspect(refs["renewing"])
	if err != nil {
		t.Fatal(err)
	}
	if v.TTLSeconds != 7200 || v.TTLRenewals != 1 {
		t.Fatalf("renewing plugin's instance: ttl %d after %d renewals, want 7200 after 1", v.TTLSeconds, v.TTLRenewals)
	}
	v, err = plain.Inspect(refs["plain"])
	if err != nil {
		t.Fatal(err)
	}
	if v.TTLSeconds != 600 || v.TTLRenewals != 0 {
		t.Fatalf("plain plugin's instance: ttl %d after %d renewals, want 600 untouched", v.TTLSeconds, v.TTLRenewals)
	}
}
