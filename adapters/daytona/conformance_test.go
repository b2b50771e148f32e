package daytona

import (
	"testing"

	"github.com/different-ai/differently/adapters/conformance"
)

// The suite runs once per class: they differ in pause/resume and memory snapshots.
// Expected skips: exec/stderr (combined output, documented in Info.Description),
// exec/stdin (unsupported_operation), exec.stream and fork (not declared).
func TestConformanceContainer(t *testing.T) {
	a, _ := setup(t, ClassContainer)
	conformance.Test(t, a, conformance.Options{})
}

func TestConformanceLinuxVM(t *testing.T) {
	a, _ := setup(t, ClassLinuxVM)
	conformance.Test(t, a, conformance.Options{})
}
