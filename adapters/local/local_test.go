package local_test

import (
	"os"
	"testing"

	"github.com/different-ai/differently/adapters/local"
)

// newLocal builds an adapter in a fresh root, or fails the test when this host
// cannot run bwrap. Set DIFFERENTLY_SKIP_LOCAL=1 to skip instead (a host without
// bubblewrap or user namespaces); CI installs bubblewrap and must not skip.
func newLocal(t *testing.T, cfg local.Config) *local.Adapter {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	a, err := local.New(t.Context(), cfg)
	if err != nil {
		if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
			t.Skipf("DIFFERENTLY_SKIP_LOCAL=1 and this host cannot run local sandboxes: %v", err)
		}
		t.Fatalf("local adapter: %v (set DIFFERENTLY_SKIP_LOCAL=1 to skip on a host without bwrap)", err)
	}
	return a
}
