package daemon_test

import (
	"io"
	"strings"
	"testing"
	"time"
)

// One registry serves every part's metrics: the scheduler's, the reconciler's and
// the pool manager's appear on /metrics beside the HTTP ones.
func TestMetricsShareOneRegistry(t *testing.T) {
	r := start(t, t.TempDir(), "")
	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}}, 202, &sb)
	r.waitState(sb.ID, "running")
	want := []string{
		`differently_http_requests_total{`,
		`differently_sandboxes{state="running"} 1`,
		`differently_create_attempts_total{code="ok",pool="fake"} 1`,
		`differently_provision_seconds_count{pool="fake"} 1`,
		`differently_pool_healthy{pool="fake"} 1`,
		"differently_reconcile_leader ", // 0 or 1: the reconciler may not have taken the lease yet
		"go_goroutines ",
		"process_resident_memory_bytes ",
		"go_build_info{",
	}
	// The queue depth is published by a housekeeping pass; the first one to start
	// after the sandbox ran may still be ahead. Look again after every pass.
	deadline := time.After(30 * time.Second)
	for {
		resp := r.do("GET", "/metrics", nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var missing []string
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return
		}
		select {
		case <-r.passes:
		case <-deadline:
			t.Fatalf("/metrics lacks %v after 30 s:\n%s", missing, body)
		}
	}
}
