package local

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		want    Config
		wantErr string
	}{
		{"root only", map[string]any{"root": "/r"}, Config{Root: "/r"}, ""},
		{"all keys, JSON numbers", map[string]any{"root": "/r", "ignoreResources": true, "pidsMax": float64(64)},
			Config{Root: "/r", IgnoreResources: true, PidsMax: 64}, ""},
		{"pidsMax from adapter serve", map[string]any{"root": "/r", "pidsMax": json.Number("32")}, Config{Root: "/r", PidsMax: 32}, ""},
		{"no root", map[string]any{}, Config{}, `"root": must be a directory path`},
		{"empty root", map[string]any{"root": " "}, Config{}, "directory path"},
		{"root not a string", map[string]any{"root": 3}, Config{}, `"root"`},
		{"ignoreResources not a bool", map[string]any{"root": "/r", "ignoreResources": "yes"}, Config{}, "ignoreResources"},
		{"pidsMax fractional", map[string]any{"root": "/r", "pidsMax": 1.5}, Config{}, "pidsMax"},
		{"pidsMax zero", map[string]any{"root": "/r", "pidsMax": 0}, Config{}, "whole number"},
		{"unknown key", map[string]any{"root": "/r", "rooot": "/x"}, Config{}, `unknown key "rooot"`},
		{"egress none", map[string]any{"root": "/r", "egress": "none"}, Config{Root: "/r", Egress: EgressNone}, ""},
		{"egress allowlist", map[string]any{"root": "/r", "egress": "allowlist", "egressAllow": []any{"pypi.org", "*.github.com:443", "10.0.0.7:8080", "[::1]:9"}},
			Config{Root: "/r", Egress: EgressAllowlist, EgressAllow: []string{"pypi.org", "*.github.com:443", "10.0.0.7:8080", "[::1]:9"}}, ""},
		{"egress public is not offered", map[string]any{"root": "/r", "egress": "public"}, Config{}, `"egress"`},
		{"allowlist without entries", map[string]any{"root": "/r", "egress": "allowlist"}, Config{}, "at least one entry"},
		{"entries without allowlist", map[string]any{"root": "/r", "egressAllow": []any{"pypi.org"}}, Config{}, "only with egress: allowlist"},
		{"a URL is not an entry", map[string]any{"root": "/r", "egress": "allowlist", "egressAllow": []any{"https://pypi.org/"}}, Config{}, "https://pypi.org/"},
		{"port out of range", map[string]any{"root": "/r", "egress": "allowlist", "egressAllow": []any{"pypi.org:70000"}}, Config{}, "port"},
		{"a bare wildcard", map[string]any{"root": "/r", "egress": "allowlist", "egressAllow": []any{"*.com"}}, Config{}, "*.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.cfg)
			if tt.wantErr != "" {
				if !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want invalid_request containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// What the host cannot enforce is refused, or accepted with ignoreResources; what
// it can is accepted either way.
func TestCheckResources(t *testing.T) {
	all := &cgroups{limits: map[string]string{"cpu": "/c", "memory": "/m", "pids": "/p"}}
	none := &cgroups{}
	tests := []struct {
		name    string
		cg      *cgroups
		accept  bool
		r       adapters.Resources
		refused string
	}{
		{"nothing asked", none, false, adapters.Resources{}, ""},
		{"enforced", all, false, adapters.Resources{CPU: 1, MemoryMiB: 256}, ""},
		{"disk is never enforced", all, false, adapters.Resources{DiskGiB: 1}, "diskGiB"},
		{"no controllers", none, false, adapters.Resources{CPU: 1, MemoryMiB: 256}, "cpu, memoryMiB"},
		{"no controllers, ignoreResources", none, true, adapters.Resources{CPU: 1, MemoryMiB: 256, DiskGiB: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &jail{cg: tt.cg, acceptUnenforced: tt.accept}
			err := j.CheckResources(tt.r)
			if tt.refused == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), tt.refused) {
				t.Fatalf("err = %v, want invalid_request naming %s", err, tt.refused)
			}
		})
	}
}

// The description claims no enforcement the host does not give.
func TestLimitsTextIsHonest(t *testing.T) {
	j := &jail{cg: &cgroups{why: []string{"no usable memory controller"}}, pidsMax: 10}
	if got := j.limitsText(); !strings.Contains(got, "enforced with cgroups: none") || !strings.Contains(got, "no usable memory controller") {
		t.Errorf("without cgroups: %q", got)
	}
	j.cg = &cgroups{limits: map[string]string{"memory": "/m", "pids": "/p"}}
	if got := j.limitsText(); !strings.Contains(got, "memoryMiB, at most 10 processes") || strings.Contains(got, "cpu") {
		t.Errorf("with memory and pids: %q", got)
	}
}

func TestLimitsFor(t *testing.T) {
	got := limitsFor(adapters.Resources{CPU: 0.5, MemoryMiB: 64}, 100)
	want := map[string]string{"pids.max": "100", "memory.max": "67108864", "memory.limit_in_bytes": "67108864",
		"cpu.max": "50000 100000", "cpu.cfs_quota_us": "50000"}
	seen := map[string]string{}
	for _, l := range got {
		seen[l.v1] = l.value
		seen[l.v2] = l.value
	}
	for file, v := range want {
		if seen[file] != v {
			t.Errorf("%s = %q, want %q", file, seen[file], v)
		}
	}
}
