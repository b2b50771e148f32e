package provider

import (
	"testing"

	"github.com/different-ai/differently/api"
)

// The profile's arguments are checked at plan time with the daemon's bounds.
func TestProfileValidators(t *testing.T) {
	checkValidators(t, newProfileResource(), []validatorCase{
		{"name", "ci", true},
		{"name", "CI", false},
		{"resources.cpu", 0.0, true},
		{"resources.cpu", float64(api.MaxCPU), true},
		{"resources.cpu", -0.5, false},
		{"resources.cpu", float64(api.MaxCPU) + 0.5, false},
		{"resources.memory_mib", int64(api.MaxMemoryMiB), true},
		{"resources.memory_mib", int64(api.MaxMemoryMiB + 1), false},
		{"resources.memory_mib", int64(-1), false},
		{"resources.disk_gib", int64(api.MaxDiskGiB + 1), false},
		{"resources.disk_gib", int64(-1), false},
		{"ttl_seconds", int64(0), true},
		{"ttl_seconds", int64(api.MaxTTLSeconds), true},
		{"ttl_seconds", int64(api.MaxTTLSeconds + 1), false},
		{"ttl_seconds", int64(-1), false},
	})
}
