package daemon_test

import (
	"testing"
)

// Changing a pool's limits through the API keeps its adapter: the fake pool holds its
// instances in memory, and a sandbox running there must still answer exec and stop
// after PATCH maxConcurrency. A change of config rebuilds the adapter, and the answer
// says so.
func TestPatchPoolKeepsTheInstances(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dataDir, dbURL string) {
		r := start(t, dataDir, dbURL)
		var sb sandbox
		r.call("POST", "/v1/sandboxes", map[string]any{
			"placement": map[string]any{"allowedPools": []string{"fake"}},
		}, 202, &sb)
		sb = r.waitState(sb.ID, "running")

		var pool struct {
			MaxConcurrency int   `json:"maxConcurrency"`
			AdapterRebuilt *bool `json:"adapterRebuilt"`
		}
		r.call("PATCH", "/v1/admin/pools/fake", map[string]any{"maxConcurrency": 10}, 200, &pool)
		if pool.MaxConcurrency != 10 || pool.AdapterRebuilt != nil {
			t.Fatalf("PATCH maxConcurrency answered maxConcurrency %d, adapterRebuilt %v", pool.MaxConcurrency, pool.AdapterRebuilt)
		}
		if res := r.exec(sb.ID, "echo hi"); res.ExitCode != 0 {
			t.Fatalf("exec after the PATCH: %+v", res)
		}
		r.call("POST", "/v1/sandboxes/"+sb.ID+"/stop", nil, 200, &sb)
		if sb.State != "stopped" {
			t.Fatalf("after stop: %s", sb.State)
		}

		r.call("PATCH", "/v1/admin/pools/fake", map[string]any{"config": map[string]any{"totalCPU": 64}}, 200, &pool)
		if pool.AdapterRebuilt == nil || !*pool.AdapterRebuilt {
			t.Fatalf("PATCH config did not say the adapter was rebuilt: %v", pool.AdapterRebuilt)
		}
	})
}
