package provider

import (
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
)

// The pool's arguments are checked at plan time with the daemon's rules and bounds.
func TestPoolValidators(t *testing.T) {
	checkValidators(t, newPoolResource(), []validatorCase{
		{"name", "ci-pool", true},
		{"name", "a", true},
		{"name", "CI_Pool", false},
		{"name", "-x", false},
		{"name", "x-", false},
		{"name", "", false},
		{"name", strings.Repeat("a", 63), true},
		{"name", strings.Repeat("a", 64), false},
		{"trust", "private", true},
		{"trust", "external", true},
		{"trust", "public", false},
		{"max_concurrency", int64(0), true},
		{"max_concurrency", int64(-1), false},
		{"max_starting", int64(8), true},
		{"max_starting", int64(-1), false},
		{"cost_model.cpu_hour", 0.04, true},
		{"cost_model.cpu_hour", -0.01, false},
		{"cost_model.memory_gib_hour", -1.0, false},
		{"credentials_env", "LAB_ADAPTER_TOKEN", true},
		{"credentials_env", "1TOKEN", false},
		{"credentials_env", "DIFFERENTLY_DATABASE_URL", false},
		{"credentials_env", "differently_x", false},
		{"credentials_env", "PGPASSWORD", false},
		{"warm.size", int64(0), true},
		{"warm.size", int64(1000), true},
		{"warm.size", int64(1001), false},
		{"warm.size", int64(-1), false},
		{"warm.max_age_seconds", int64(0), true},
		{"warm.max_age_seconds", int64(59), false},
		{"warm.max_age_seconds", int64(60), true},
		{"warm.max_age_seconds", int64(api.MaxTTLSeconds + 1), false},
		{"warm.template", strings.Repeat("t", api.MaxTemplateBytes), true},
		{"warm.template", strings.Repeat("t", api.MaxTemplateBytes+1), false},
		{"warm.profile", "gpu", true},
		{"warm.profile", "GPU", false},
		{"warm.resources.cpu", float64(api.MaxCPU), true},
		{"warm.resources.cpu", float64(api.MaxCPU) + 1, false},
		{"warm.resources.memory_mib", int64(api.MaxMemoryMiB + 1), false},
		{"warm.resources.disk_gib", int64(-1), false},
	})
	// The name pattern is the daemon's, case by case.
	for _, s := range []string{"ci-pool", "a", "CI_Pool", "-x", "x-", "", strings.Repeat("a", 64), "a--b", "0"} {
		ok, _, _ := runValidators(t, schemaAttrOf(t, newPoolResource(), "name"), s)
		if ok != api.ValidName(s) {
			t.Errorf("name %q: plan-time %v, daemon %v", s, ok, api.ValidName(s))
		}
	}
}
