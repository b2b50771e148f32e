package provider

import (
	"testing"

	"github.com/different-ai/differently/api"
)

// The project's quota is checked at plan time with the daemon's bounds.
func TestProjectValidators(t *testing.T) {
	checkValidators(t, newProjectResource(), []validatorCase{
		{"quota.sandboxes", int64(0), true},
		{"quota.sandboxes", int64(api.MaxQuotaSandboxes), true},
		{"quota.sandboxes", int64(api.MaxQuotaSandboxes + 1), false},
		{"quota.sandboxes", int64(-1), false},
		{"quota.cpu", float64(api.MaxQuotaCPU), true},
		{"quota.cpu", float64(api.MaxQuotaCPU) + 1, false},
		{"quota.cpu", -1.0, false},
		{"quota.memory_mib", int64(api.MaxQuotaMemoryMiB + 1), false},
		{"quota.memory_mib", int64(-1), false},
		{"quota.disk_gib", int64(api.MaxQuotaDiskGiB), true},
		{"quota.disk_gib", int64(api.MaxQuotaDiskGiB + 1), false},
	})
}
