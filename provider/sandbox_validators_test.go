package provider

import (
	"testing"

	"github.com/different-ai/differently/api"
)

// The sandbox's arguments are checked at plan time with the daemon's bounds.
func TestSandboxValidators(t *testing.T) {
	checkValidators(t, newSandboxResource(), []validatorCase{
		{"resources.cpu", 0.5, true},
		{"resources.cpu", float64(api.MaxCPU) + 1, false},
		{"resources.cpu", -1.0, false},
		{"resources.memory_mib", int64(api.MaxMemoryMiB), true},
		{"resources.memory_mib", int64(api.MaxMemoryMiB + 1), false},
		{"resources.disk_gib", int64(api.MaxDiskGiB + 1), false},
		{"resources.disk_gib", int64(-1), false},
		{"ttl_seconds", int64(0), true},
		{"ttl_seconds", int64(api.MaxTTLSeconds), true},
		{"ttl_seconds", int64(api.MaxTTLSeconds + 1), false},
		{"ttl_seconds", int64(-5), false},
		{"state", "running", true},
		{"state", "stopped", true},
		{"state", "paused", true},
		{"state", "terminated", false},
		{"timeouts.create", "30s", true},
		{"timeouts.create", "0s", false},
		{"timeouts.create", "soon", false},
		{"timeouts.update", "5m", true},
		{"timeouts.update", "5", false},
		{"timeouts.delete", "10m", true},
		{"timeouts.delete", "-1m", false},
	})
}
