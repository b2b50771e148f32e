package daemon_test

import (
	"testing"
)

// The development devhost pool takes resources for quota and cost without applying
// them, as its config says: the provider's examples and a newcomer's first sandbox ask
// for cpu and memory, and must run on it rather than fail.
func TestDevHostPoolAcceptsResources(t *testing.T) {
	r := start(t, t.TempDir(), "")
	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{
		"resources": map[string]any{"cpu": 2, "memoryMiB": 4096},
		"placement": map[string]any{"allowedPools": []string{"devhost"}},
	}, 202, &sb)
	sb = r.waitState(sb.ID, "running")
	if res := r.exec(sb.ID, "echo hi"); res.ExitCode != 0 {
		t.Fatalf("exec: %+v", res)
	}

	var pool struct {
		Config map[string]any `json:"config"`
	}
	r.call("GET", "/v1/admin/pools/devhost", nil, 200, &pool)
	if pool.Config["ignoreResources"] != true {
		t.Fatalf("the dev pool's config does not show ignoreResources: %v", pool.Config)
	}
}
