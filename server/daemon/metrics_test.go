package daemon_test

import (
	"io"
	"strings"
	"testing"
)

// One registry serves every part's metrics: the scheduler's, the reconciler's and
// the pool manager's appear on /metrics beside the HTTP ones.
func TestMetricsShareOneRegistry(t *testing.T) {
	r := start(t, t.TempDir(), "")
	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}}, 202, &sb)
	r.waitState(sb.ID, "running")
	// waitState returns on a scheduler pass; wait for the next housekeeping pass, which
	// publishes the queue depth.
	for res := range r.passes {
		if res.Pass == "terminate" {
			break
		}
	}
	resp := r.do("GET", "/metrics", nil)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`differently_http_requests_total{`,
		`differently_sandboxes{state="running"} 1`,
		`differently_create_attempts_total{code="ok",pool="fake"} 1`,
		`differently_provision_seconds_count{pool="fake"} 1`,
		`differently_pool_healthy{pool="fake"} 1`,
		"differently_reconcile_leader ", // 0 or 1: the reconciler may not have taken the lease yet
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
