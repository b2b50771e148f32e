package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/store"
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

// The development local pool runs sandboxes in bwrap: a sandbox there works, takes
// the resources a first try asks for, and cannot read the admin token that a
// devhost sandbox could. CI installs bubblewrap; DIFFERENTLY_SKIP_LOCAL=1 skips
// this on a host without it.
func TestDevLocalPoolIsolates(t *testing.T) {
	if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
		t.Skip("DIFFERENTLY_SKIP_LOCAL=1")
	}
	dataDir := t.TempDir()
	r := start(t, dataDir, "")
	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{
		"resources": map[string]any{"cpu": 1, "memoryMiB": 512},
		"placement": map[string]any{"allowedPools": []string{"local"}},
	}, 202, &sb)
	sb = r.waitState(sb.ID, "running")
	token := filepath.Join(dataDir, daemon.AdminTokenFile)
	if res := r.exec(sb.ID, "echo hi; cat "+token); res.Stdout != "hi\n" || res.ExitCode == 0 {
		t.Fatalf("exec on local: %+v; want hi and no admin token", res)
	}
}

// Dev mode says which of its pools isolates sandboxes and which does not.
func TestDevModeLogsIsolation(t *testing.T) {
	if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
		t.Skip("DIFFERENTLY_SKIP_LOCAL=1")
	}
	var log logBuffer
	boot(t, t.TempDir(), "", "", &log, func(st store.Store) {
		if p := getPool(t, st, "local"); p.Adapter != "local" || p.Config["ignoreResources"] != true {
			t.Errorf("local dev pool: %+v", p)
		}
	})
	for _, want := range []string{"pool local is isolated", "pool devhost is not isolated"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log.String())
		}
	}
}
