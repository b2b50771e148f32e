package conformance_test

import (
	"os"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/conformance"
	"github.com/different-ai/differently/adapters/local"
)

// newLocal fails, rather than skips, on a host that cannot run bwrap, unless
// DIFFERENTLY_SKIP_LOCAL=1 says that is expected.
func newLocal(t *testing.T) adapters.ExecutionAdapter {
	a, err := local.New(t.Context(), local.Config{Root: t.TempDir()})
	if err != nil {
		if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
			t.Skipf("DIFFERENTLY_SKIP_LOCAL=1: %v", err)
		}
		t.Fatalf("local adapter: %v (set DIFFERENTLY_SKIP_LOCAL=1 to skip on a host without bwrap)", err)
	}
	return a
}

func TestLocal(t *testing.T) {
	t.Parallel()
	conformance.Test(t, newLocal(t), conformance.Options{})
}

func TestLocalOverHTTP(t *testing.T) {
	t.Parallel()
	conformance.Test(t, overHTTP(t, newLocal(t)), conformance.Options{})
}
