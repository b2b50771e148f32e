package fake

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestParseConfigKeys(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want Config
	}{
		{"empty", nil, Config{}},
		{"totalCPU float", map[string]any{"totalCPU": 2.5}, Config{TotalCPU: 2.5}},
		{"totalCPU int", map[string]any{"totalCPU": 4}, Config{TotalCPU: 4}},
		{"totalCPU json.Number", map[string]any{"totalCPU": json.Number("1.5")}, Config{TotalCPU: 1.5}},
		{"totalMemoryMiB int", map[string]any{"totalMemoryMiB": 2048}, Config{TotalMemoryMiB: 2048}},
		{"totalMemoryMiB int64", map[string]any{"totalMemoryMiB": int64(2048)}, Config{TotalMemoryMiB: 2048}},
		{"totalMemoryMiB integral float", map[string]any{"totalMemoryMiB": 2048.0}, Config{TotalMemoryMiB: 2048}},
		{"totalMemoryMiB json.Number", map[string]any{"totalMemoryMiB": json.Number("2048")}, Config{TotalMemoryMiB: 2048}},
		{"totalMemoryMiB json.Number exponent", map[string]any{"totalMemoryMiB": json.Number("2e3")}, Config{TotalMemoryMiB: 2000}},
		{"totalMemoryMiB uint64", map[string]any{"totalMemoryMiB": uint64(7)}, Config{TotalMemoryMiB: 7}},
		{"createLatencyMs", map[string]any{"createLatencyMs": 250}, Config{CreateLatency: 250 * time.Millisecond}},
		{"createErrors", map[string]any{"createErrors": []any{"insufficient_capacity", "sandbox_failed", "provider_unavailable", "invalid_request", "internal"}},
			Config{CreateErrors: []api.Code{api.CodeInsufficientCapacity, api.CodeSandboxFailed, api.CodeProviderUnavailable, api.CodeInvalidRequest, api.CodeInternal}}},
		{"createErrors []string", map[string]any{"createErrors": []string{"internal"}}, Config{CreateErrors: []api.Code{api.CodeInternal}}},
		{"dropCreateResponses", map[string]any{"dropCreateResponses": 2.0}, Config{DropCreateResponses: 2}},
		{"listError", map[string]any{"listError": true}, Config{ListError: true}},
		{"healthError", map[string]any{"healthError": true}, Config{HealthError: true}},
		{"faultSeed", map[string]any{"faultSeed": json.Number("42")}, Config{FaultSeed: 42}},
		{"rates", map[string]any{"createErrorRate": 0.25, "dropCreateResponseRate": 1, "deleteErrorRate": json.Number("0.5"), "listErrorRate": 0},
			Config{CreateErrorRate: 0.25, DropCreateResponseRate: 1, DeleteErrorRate: 0.5}},
		{"createLatencyJitterMs", map[string]any{"createLatencyMs": 100, "createLatencyJitterMs": 50},
			Config{CreateLatency: 100 * time.Millisecond, CreateLatencyJitter: 50 * time.Millisecond}},
		{"createErrorCodes", map[string]any{"createErrorCodes": []any{"invalid_request", "sandbox_failed"}},
			Config{CreateErrorCodes: []api.Code{api.CodeInvalidRequest, api.CodeSandboxFailed}}},
		{"deleteErrorCodes", map[string]any{"deleteErrorCodes": []any{"internal"}}, Config{DeleteErrorCodes: []api.Code{api.CodeInternal}}},
		{"exec faults", map[string]any{"execErrorRate": 0.2, "execErrorCodes": []any{"not_found", "invalid_state"}},
			Config{ExecErrorRate: 0.2, ExecErrorCodes: []api.Code{api.CodeNotFound, api.CodeInvalidState}}},
		{"execStreamDropRate", map[string]any{"execStreamDropRate": json.Number("0.05")}, Config{ExecStreamDropRate: 0.05}},
		{"execStreamDropRate bounds", map[string]any{"execStreamDropRate": 1}, Config{ExecStreamDropRate: 1}},
		{"execStreamDropRate zero", map[string]any{"execStreamDropRate": 0.0}, Config{}},
		{"features", map[string]any{"features": []any{"exec", "gpu", "isolation.none"}}, Config{Features: []string{"exec", "gpu", "isolation.none"}}},
		{"features empty", map[string]any{"features": []any{}}, Config{Features: []string{}}},
		{"templates", map[string]any{"templates": []any{"python", "node"}}, Config{Templates: []string{"python", "node"}}},
		{"regions", map[string]any{"regions": []any{"eu-1", "us-1"}}, Config{Regions: []string{"eu-1", "us-1"}}},
		{"maxCPU", map[string]any{"maxCPU": 8}, Config{MaxCPU: 8}},
		{"maxMemoryMiB", map[string]any{"maxMemoryMiB": int32(16384)}, Config{MaxMemoryMiB: 16384}},
		{"maxDiskGiB", map[string]any{"maxDiskGiB": json.Number("100")}, Config{MaxDiskGiB: 100}},
		{"region", map[string]any{"region": "eu-1"}, Config{Region: "eu-1"}},
		{"zero values", map[string]any{"totalCPU": 0, "maxDiskGiB": 0.0}, Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.in)
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		key  string
		val  any
	}{
		{"unknown key", "totalCpu", 1},
		{"trust is the pool's", "trust", "private"},
		{"cpu string", "totalCPU", "2"},
		{"cpu negative", "totalCPU", -1.0},
		{"cpu NaN", "totalCPU", math.NaN()},
		{"cpu Inf", "maxCPU", math.Inf(1)},
		{"cpu bad json.Number", "maxCPU", json.Number("x")},
		{"memory fractional", "totalMemoryMiB", 1.5},
		{"memory fractional json.Number", "totalMemoryMiB", json.Number("1.5")},
		{"memory negative", "totalMemoryMiB", -1},
		{"memory negative int64", "maxMemoryMiB", int64(-3)},
		{"memory too large uint64", "maxMemoryMiB", uint64(math.MaxUint64)},
		{"memory too large float", "maxMemoryMiB", 1e19},
		{"memory bool", "maxDiskGiB", true},
		{"memory null", "maxDiskGiB", nil},
		{"latency string", "createLatencyMs", "100ms"},
		{"latency overflow", "createLatencyMs", int64(math.MaxInt64)},
		{"drops fractional", "dropCreateResponses", 0.5},
		{"drops huge", "dropCreateResponses", int64(1) << 40},
		{"listError string", "listError", "true"},
		{"healthError int", "healthError", 1},
		{"createErrors unknown code", "createErrors", []any{"not_found"}},
		{"faultSeed negative", "faultSeed", -1},
		{"faultSeed fractional", "faultSeed", 1.5},
		{"createErrorRate over 1", "createErrorRate", 1.5},
		{"createErrorRate negative", "createErrorRate", -0.1},
		{"createErrorRate string", "createErrorRate", "10%"},
		{"dropCreateResponseRate over 1", "dropCreateResponseRate", json.Number("2")},
		{"deleteErrorRate NaN", "deleteErrorRate", math.NaN()},
		{"listErrorRate bool", "listErrorRate", true},
		{"jitter negative", "createLatencyJitterMs", -5},
		{"jitter overflow", "createLatencyJitterMs", int64(math.MaxInt64)},
		{"createErrorCodes empty", "createErrorCodes", []any{}},
		{"createErrorCodes unknown", "createErrorCodes", []any{"not_found"}},
		{"createErrorCodes not a list", "createErrorCodes", "internal"},
		{"deleteErrorCodes not a delete code", "deleteErrorCodes", []any{"sandbox_failed"}},
		{"deleteErrorCodes empty", "deleteErrorCodes", []any{}},
		{"execErrorCodes not an exec code", "execErrorCodes", []any{"invalid_request"}},
		{"execErrorCodes empty", "execErrorCodes", []any{}},
		{"execErrorRate over 1", "execErrorRate", 1.5},
		{"execStreamDropRate over 1", "execStreamDropRate", 1.01},
		{"execStreamDropRate negative", "execStreamDropRate", -0.5},
		{"execStreamDropRate NaN", "execStreamDropRate", math.NaN()},
		{"execStreamDropRate Inf", "execStreamDropRate", math.Inf(1)},
		{"execStreamDropRate string", "execStreamDropRate", "5%"},
		{"execStreamDropRate bool", "execStreamDropRate", true},
		{"createErrors not a list", "createErrors", "internal"},
		{"createErrors non-string item", "createErrors", []any{1}},
		{"features unknown", "features", []any{"exec", "teleport"}},
		{"features not strings", "features", []any{true}},
		{"templates string", "templates", "python"},
		{"regions map", "regions", map[string]any{}},
		{"region list", "region", []any{"eu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(map[string]any{tt.key: tt.val})
			e := api.AsError(err)
			if e == nil || e.Code != api.CodeInvalidRequest {
				t.Fatalf("got %v, want invalid_request", err)
			}
			if e.Details["key"] != tt.key {
				t.Errorf("details.key = %v, want %q (%v)", e.Details["key"], tt.key, err)
			}
		})
	}
}

func TestParseConfigRejectsClearly(t *testing.T) {
	tests := []struct {
		in   map[string]any
		key  string
		want string
	}{
		{map[string]any{"createErrorRate": 1.5}, "createErrorRate", "not a probability: want a number from 0 to 1"},
		{map[string]any{"execStreamDropRate": 2}, "execStreamDropRate", "not a probability: want a number from 0 to 1"},
		{map[string]any{"deleteErrorCodes": []any{}}, "deleteErrorCodes", "name at least one code"},
		{map[string]any{"deleteErrorCodes": []any{"not_found"}}, "deleteErrorCodes", `"not_found" is not one of [provider_unavailable internal]`},
		{map[string]any{"createLatencyMs": int64(math.MaxInt64 / int64(time.Millisecond)), "createLatencyJitterMs": int64(math.MaxInt64 / int64(time.Millisecond))},
			"createLatencyJitterMs", "too long"},
	}
	for _, tt := range tests {
		_, err := ParseConfig(tt.in)
		e := api.AsError(err)
		if e == nil || e.Details["key"] != tt.key || !strings.Contains(e.Message, tt.want) {
			t.Errorf("ParseConfig(%v) = %v, want key %s and %q", tt.in, err, tt.key, tt.want)
		}
	}
}

func TestParseConfigFeaturesKeepsUnknownDetail(t *testing.T) {
	_, err := ParseConfig(map[string]any{"features": []any{"teleport"}})
	e := api.AsError(err)
	if e == nil || !reflect.DeepEqual(e.Details["unknown"], []string{"teleport"}) {
		t.Fatalf("got %#v, want details.unknown = [teleport]", e)
	}
}

func TestFromConfigApplies(t *testing.T) {
	a, err := FromConfig(map[string]any{
		"totalCPU": 4, "totalMemoryMiB": 4096,
		"features":  []any{"exec", "files"},
		"templates": []any{"python"}, "regions": []any{"eu-1", "us-1"},
		"maxCPU": 2.0, "maxMemoryMiB": 2048, "maxDiskGiB": 10,
		"listError": true, "healthError": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	caps, _ := a.Capabilities(ctx)
	want := adapters.Capabilities{Features: []string{"exec", "files"}, MaxCPU: 2, MaxMemoryMiB: 2048, MaxDiskGiB: 10,
		Templates: []string{"python"}, Regions: []string{"eu-1", "us-1"}}
	if !reflect.DeepEqual(caps, want) {
		t.Errorf("Capabilities = %+v, want %+v", caps, want)
	}
	capy, _ := a.Capacity(ctx)
	if wantC := (adapters.Capacity{Bounded: true, FreeCPU: 4, FreeMemoryMiB: 4096, LargestFreeCPU: 4, LargestFreeMemoryMiB: 4096}); capy != wantC {
		t.Errorf("Capacity = %+v, want %+v", capy, wantC)
	}
	if !api.IsCode(a.Health(ctx), api.CodeProviderUnavailable) {
		t.Error("healthError not applied")
	}
	if _, err := a.List(ctx, "inst_1"); !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Error("listError not applied")
	}
	// region defaults to the first of regions.
	a.SetListError(false)
	inst, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "inst_1"})
	if err != nil || inst.Region != "eu-1" {
		t.Errorf("Create = %+v, %v; want region eu-1", inst, err)
	}

	if _, err := FromConfig(map[string]any{"bogus": 1}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("FromConfig with a bad key = %v", err)
	}
}

func TestDefaults(t *testing.T) {
	a := New(Config{})
	info := a.Info()
	if info.Kind != Kind || info.Trust != api.TrustPrivate || info.Protocol != adapters.ProtocolVersion {
		t.Errorf("Info = %+v", info)
	}
	if New(Config{Trust: api.TrustExternal}).Info().Trust != api.TrustExternal {
		t.Error("Trust not applied")
	}
	caps, _ := a.Capabilities(context.Background())
	if err := adapters.ValidateDeclaredFeatures(caps.Features); err != nil {
		t.Fatal(err)
	}
	// Every default feature must survive EffectiveFeatures, or the fake lies about
	// what it implements.
	if eff := adapters.EffectiveFeatures(a, caps.Features); len(eff) != len(DefaultFeatures()) {
		t.Errorf("effective %v, declared %v", eff, caps.Features)
	}
	if c, _ := a.Capacity(context.Background()); c.Bounded {
		t.Errorf("zero config capacity = %+v, want unbounded", c)
	}
	if err := a.Health(context.Background()); err != nil {
		t.Error(err)
	}
	if caps, _ := New(Config{Features: []string{}}).Capabilities(context.Background()); len(caps.Features) != 0 {
		t.Errorf("explicit empty features = %v", caps.Features)
	}
}
