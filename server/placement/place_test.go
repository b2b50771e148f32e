package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

var anAdapter = fake.New(fake.Config{})

// pool is a healthy, unbounded, private pool offering the fake's default features.
func pool(name string, opts ...func(*pools.View)) pools.View {
	v := pools.View{
		Pool:         store.Pool{Name: name, Adapter: "fake", Trust: api.TrustPrivate},
		Adapter:      anAdapter,
		Capabilities: adapters.Capabilities{Features: fake.DefaultFeatures()},
		Trust:        api.TrustPrivate,
		Healthy:      true,
	}
	for _, o := range opts {
		o(&v)
	}
	return v
}

func withFeatures(f ...string) func(*pools.View) {
	return func(v *pools.View) { v.Capabilities.Features = f }
}

func withTemplates(t ...string) func(*pools.View) {
	return func(v *pools.View) { v.Capabilities.Templates = t }
}

func withRegion(r string) func(*pools.View) { return func(v *pools.View) { v.Pool.Region = r } }

func withCapRegions(r ...string) func(*pools.View) {
	return func(v *pools.View) { v.Capabilities.Regions = r }
}

func external(v *pools.View) { v.Trust = api.TrustExternal }

func unhealthy(msg string) func(*pools.View) {
	return func(v *pools.View) { v.Healthy, v.LastError = false, msg }
}

func noAdapter(msg string) func(*pools.View) {
	return func(v *pools.View) { v.Adapter, v.Healthy, v.LastError = nil, false, msg }
}

func kindMissing(v *pools.View) { v.KindMissing = true }

func withTrialsFull(v *pools.View) { v.Breaker.TrialsFull = true }

func breakerIn(state pools.BreakerState) func(*pools.View) {
	return func(v *pools.View) {
		v.Breaker = pools.BreakerStatus{State: state, ConsecutiveFailures: 3}
		if state == pools.BreakerOpen {
			v.Breaker.OpenUntil = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		}
	}
}

// awaitingProbe is a pool just built: no capabilities known yet, not yet healthy.
func awaitingProbe(v *pools.View) {
	v.AwaitingProbe, v.Healthy, v.Capabilities = true, false, adapters.Capabilities{}
}

func maxConcurrency(n int) func(*pools.View) {
	return func(v *pools.View) { v.Pool.MaxConcurrency = n }
}

func bounded(freeCPU float64) func(*pools.View) {
	return func(v *pools.View) {
		v.Capacity = adapters.Capacity{Bounded: true, FreeCPU: freeCPU, FreeMemoryMiB: 1 << 20}
	}
}

func limits(cpu float64, mem, disk int64) func(*pools.View) {
	return func(v *pools.View) {
		v.Capabilities.MaxCPU, v.Capabilities.MaxMemoryMiB, v.Capabilities.MaxDiskGiB = cpu, mem, disk
	}
}

// features adds declared features to a pool's capabilities.
func features(f ...string) func(*pools.View) {
	return func(v *pools.View) { v.Capabilities.Features = append(v.Capabilities.Features, f...) }
}

func costs(cpuHour, memGiBHour float64) func(*pools.View) {
	return func(v *pools.View) { v.Pool.CostModel = store.CostModel{CPUHour: cpuHour, MemoryGiBHour: memGiBHour} }
}

func TestPlaceFilters(t *testing.T) {
	cpu2 := adapters.Resources{CPU: 2}
	tests := []struct {
		name   string
		req    Request
		views  []pools.View
		policy store.Policy
		active map[string]int
		// want is the ranked pools; rejected maps a pool to a substring of its reason.
		want     []string
		rejected map[string]string
	}{
		{
			name:  "no filter applies",
			views: []pools.View{pool("a")},
			want:  []string{"a"},
		},
		{
			name:     "allowedPools",
			req:      Request{Placement: store.Placement{AllowedPools: []string{"b"}}},
			views:    []pools.View{pool("a"), pool("b")},
			want:     []string{"b"},
			rejected: map[string]string{"a": "not in allowedPools"},
		},
		{
			name:     "snapshot pool",
			req:      Request{SnapshotPool: "a"},
			views:    []pools.View{pool("a"), pool("b")},
			want:     []string{"a"},
			rejected: map[string]string{"b": "snapshot to restore is on pool a"},
		},
		{
			name:     "adapter missing",
			views:    []pools.View{pool("a", noAdapter(`adapter kind "x" is not built in`)), pool("b")},
			want:     []string{"b"},
			rejected: map[string]string{"a": "adapter not available"},
		},
		{
			name:     "capabilities",
			req:      Request{Capabilities: []string{"gpu", "exec"}},
			views:    []pools.View{pool("a"), pool("b", withFeatures("exec", "gpu"))},
			want:     []string{"b"},
			rejected: map[string]string{"a": "missing capabilities: gpu"},
		},
		{
			name:     "template",
			req:      Request{Template: "py"},
			views:    []pools.View{pool("a", withTemplates("go")), pool("b", withTemplates("py")), pool("c")},
			want:     []string{"b", "c"},
			rejected: map[string]string{"a": `template "py" not offered`},
		},
		{
			name: "limits",
			req:  Request{Resources: adapters.Resources{CPU: 2, MemoryMiB: 4096, DiskGiB: 20}},
			views: []pools.View{pool("cpu", limits(1, 0, 0)), pool("mem", limits(0, 2048, 0)),
				pool("disk", limits(0, 0, 10)), pool("ok", limits(2, 4096, 20))},
			want: []string{"ok"},
			rejected: map[string]string{"cpu": "cpu 2 is over the pool's limit of 1",
				"mem": "memoryMiB 4096", "disk": "diskGiB 20"},
		},
		{
			name: "regions",
			req:  Request{Placement: store.Placement{Regions: []string{"eu", "us"}}},
			views: []pools.View{pool("a", withRegion("ap")), pool("b", withCapRegions("us")),
				pool("c", withRegion("eu")), pool("d")},
			want:     []string{"c", "b"},
			rejected: map[string]string{"a": "not in regions eu, us", "d": "not in regions"},
		},
		{
			name:     "external pool without policy",
			views:    []pools.View{pool("ext", external), pool("b")},
			want:     []string{"b"},
			rejected: map[string]string{"ext": "does not allow external placement"},
		},
		{
			name:     "external pool allowed but not listed",
			views:    []pools.View{pool("ext", external), pool("b")},
			policy:   store.Policy{AllowExternal: true, ExternalPools: []string{"other"}},
			want:     []string{"b"},
			rejected: map[string]string{"ext": "not listed in the policy's externalPools"},
		},
		{
			name:   "external pool allowed and listed",
			views:  []pools.View{pool("ext", external)},
			policy: store.Policy{AllowExternal: true, ExternalPools: []string{"ext"}},
			want:   []string{"ext"},
		},
		{
			name:     "health",
			views:    []pools.View{pool("a", unhealthy("connection refused")), pool("b")},
			want:     []string{"b"},
			rejected: map[string]string{"a": "unhealthy"},
		},
		{
			name:     "maxConcurrency",
			views:    []pools.View{pool("a", maxConcurrency(2)), pool("b", maxConcurrency(3))},
			active:   map[string]int{"a": 2, "b": 2},
			want:     []string{"b"},
			rejected: map[string]string{"a": "at maxConcurrency (2)"},
		},
		{
			name:     "capacity",
			req:      Request{Resources: cpu2},
			views:    []pools.View{pool("a", bounded(1)), pool("b", bounded(2))},
			want:     []string{"b"},
			rejected: map[string]string{"a": "no capacity"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Place(tt.req, tt.views, tt.policy, tt.active)
			if !slices.Equal(d.Pools, tt.want) || d.Wait || d.Code != "" || d.Reason != "" {
				t.Fatalf("decision = %+v, want pools %v", d, tt.want)
			}
			if len(d.Rejected) != len(tt.rejected) {
				t.Errorf("rejected = %v, want %d entries", d.Rejected, len(tt.rejected))
			}
			for p, sub := range tt.rejected {
				if !strings.Contains(d.Rejected[p], sub) {
					t.Errorf("rejected[%s] = %q, want it to contain %q", p, d.Rejected[p], sub)
				}
			}
		})
	}
}

func TestPlaceRanking(t *testing.T) {
	req := Request{Resources: adapters.Resources{CPU: 1, MemoryMiB: 2048}}
	tests := []struct {
		name   string
		req    Request
		views  []pools.View
		active map[string]int
		want   []string
	}{
		{
			name:  "name breaks ties",
			req:   req,
			views: []pools.View{pool("c"), pool("a"), pool("b")},
			want:  []string{"a", "b", "c"},
		},
		{
			name: "preferred region beats room and cost",
			req:  Request{Resources: req.Resources, Placement: store.Placement{Regions: []string{"eu", "us"}}},
			views: []pools.View{pool("us-cheap", withRegion("us")),
				pool("eu-small", withRegion("eu"), bounded(1), costs(10, 10))},
			want: []string{"eu-small", "us-cheap"},
		},
		{
			name:  "unbounded before bounded, more free CPU first",
			req:   req,
			views: []pools.View{pool("small", bounded(2)), pool("big", bounded(8)), pool("unbounded")},
			want:  []string{"unbounded", "big", "small"},
		},
		{
			name:   "fewer active relative to maxConcurrency",
			req:    req,
			views:  []pools.View{pool("a", maxConcurrency(4)), pool("b", maxConcurrency(10))},
			active: map[string]int{"a": 2, "b": 3},
			want:   []string{"b", "a"},
		},
		{
			name:  "a half-open pool that can take a trial ranks as a closed one",
			req:   req,
			views: []pools.View{pool("a", breakerIn(pools.BreakerHalfOpen)), pool("b", bounded(2)), pool("c", breakerIn(pools.BreakerClosed))},
			want:  []string{"a", "c", "b"},
		},
		{
			name:  "a half-open pool with its trial in flight goes after the others",
			req:   req,
			views: []pools.View{pool("a", breakerIn(pools.BreakerHalfOpen), withTrialsFull), pool("b", bounded(2)), pool("c", breakerIn(pools.BreakerClosed))},
			want:  []string{"c", "b", "a"},
		},
		{
			name:  "an open breaker leaves the pool out",
			req:   req,
			views: []pools.View{pool("a", breakerIn(pools.BreakerOpen)), pool("b")},
			want:  []string{"b"},
		},
		{
			name: "cheaper first",
			req:  req,
			// a: 1*1 + 2*1 = 3; b: 1*2 + 2*0.25 = 2.5.
			views: []pools.View{pool("a", costs(1, 1)), pool("b", costs(2, 0.25))},
			want:  []string{"b", "a"},
		},
		{
			name: "among equals, a pool that isolates first",
			req:  req,
			views: []pools.View{pool("devhost", features(adapters.FeatureIsolationNone)), pool("fake"),
				pool("local", features(adapters.FeatureContainer)), pool("vm", features(adapters.FeatureMicroVM))},
			want: []string{"local", "vm", "devhost", "fake"},
		},
		{
			name:   "isolation only breaks ties: load and cost come first",
			req:    req,
			views:  []pools.View{pool("local", features(adapters.FeatureContainer), maxConcurrency(10)), pool("devhost", maxConcurrency(10)), pool("vm", features(adapters.FeatureMicroVM), maxConcurrency(10), costs(1, 1))},
			active: map[string]int{"local": 1, "vm": 1},
			want:   []string{"devhost", "local", "vm"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Place(tt.req, tt.views, store.Policy{}, tt.active)
			if !slices.Equal(d.Pools, tt.want) {
				t.Fatalf("pools = %v, want %v (rejected %v)", d.Pools, tt.want, d.Rejected)
			}
		})
	}
}

func TestPlaceWaitOrFail(t *testing.T) {
	gpu := []string{adapters.FeatureGPU}
	tests := []struct {
		name   string
		req    Request
		views  []pools.View
		active map[string]int
		wait   bool
		code   api.Code
		reason string
	}{
		{
			name:   "no pools",
			code:   api.CodeInvalidRequest,
			reason: "no pools are registered",
		},
		{
			name:   "only transient failures wait",
			views:  []pools.View{pool("a", maxConcurrency(1)), pool("b", unhealthy("connection refused"))},
			active: map[string]int{"a": 1},
			wait:   true,
			reason: "waiting for capacity: pool a: at maxConcurrency (1); pool b: unhealthy",
		},
		{
			name: "a pool that could take it later beats pools that never can",
			req:  Request{Capabilities: gpu},
			views: []pools.View{pool("a", withFeatures("gpu"), unhealthy("down")),
				pool("b")},
			wait:   true,
			reason: "waiting for capacity: pool a: unhealthy",
		},
		{
			name:   "gpu on devhost and fake is unsupported_capability",
			req:    Request{Capabilities: gpu},
			views:  []pools.View{pool("devhost"), pool("fake")},
			code:   api.CodeUnsupportedCapability,
			reason: "no pool can place this sandbox: pool devhost: missing capabilities: gpu; pool fake: missing capabilities: gpu",
		},
		{
			name:   "gpu and a template nobody has is invalid_request",
			req:    Request{Capabilities: gpu, Template: "x"},
			views:  []pools.View{pool("devhost", withTemplates("y")), pool("fake", withTemplates("z"))},
			code:   api.CodeInvalidRequest,
			reason: "pool devhost: missing capabilities: gpu; pool fake: missing capabilities: gpu",
		},
		{
			name: "capabilities the only reason for one pool is enough",
			req:  Request{Capabilities: gpu, Template: "x"},
			views: []pools.View{pool("a", withTemplates("y")),
				pool("b", withTemplates("x"))},
			code: api.CodeUnsupportedCapability,
		},
		{
			name: "pools outside allowedPools do not count",
			req: Request{Capabilities: gpu, Resources: adapters.Resources{CPU: 1},
				Placement: store.Placement{AllowedPools: []string{"a"}}},
			views:  []pools.View{pool("a", limits(0.5, 0, 0)), pool("b")},
			code:   api.CodeInvalidRequest,
			reason: "pool a: missing capabilities: gpu; pool b: not in allowedPools",
		},
		{
			name:   "a kind this build lacks is not a capability problem",
			req:    Request{Capabilities: gpu},
			views:  []pools.View{pool("a", noAdapter("kind x is not built in"), kindMissing)},
			code:   api.CodeInvalidRequest,
			reason: "pool a: adapter not available",
		},
		{
			// A credential unset, a config being fixed: what the pool offers is not
			// known, and the sandbox waits for the adapter rather than fail.
			name:   "an adapter not built for now: wait",
			req:    Request{Capabilities: gpu},
			views:  []pools.View{pool("a", noAdapter("credentials variable K is not set or empty"))},
			wait:   true,
			reason: "waiting for capacity: pool a: adapter not available yet",
		},
		{
			name:   "a pool not probed yet: wait, whatever it may offer",
			req:    Request{Capabilities: gpu, Template: "ubuntu"},
			views:  []pools.View{pool("a", awaitingProbe)},
			wait:   true,
			reason: "waiting for capacity: pool a: not probed yet",
		},
		{
			name:   "a pool not probed yet still refuses what its definition does",
			req:    Request{Placement: store.Placement{AllowedPools: []string{"b"}}},
			views:  []pools.View{pool("a", awaitingProbe), pool("b", kindMissing, noAdapter("gone"))},
			code:   api.CodeInvalidRequest,
			reason: "pool a: not in allowedPools; pool b: adapter not available",
		},
		{
			name:   "an open breaker: wait, saying until when",
			views:  []pools.View{pool("a", breakerIn(pools.BreakerOpen))},
			wait:   true,
			reason: "waiting for capacity: pool a: paused after 3 failed creates in a row, until 2026-01-02T03:04:05Z",
		},
		{
			name:   "a typo in the only pool named",
			req:    Request{Placement: store.Placement{AllowedPools: []string{"devhots"}}},
			views:  []pools.View{pool("devhost"), pool("fake")},
			code:   api.CodeInvalidRequest,
			reason: `allowedPools names a pool that does not exist: "devhots" (did you mean "devhost"?)`,
		},
		{
			name:   "no pool named exists, none near",
			req:    Request{Placement: store.Placement{AllowedPools: []string{"gpu-large", "zz"}}},
			views:  []pools.View{pool("devhost"), pool("fake")},
			code:   api.CodeInvalidRequest,
			reason: `allowedPools names pools that do not exist: "gpu-large", "zz"`,
		},
		{
			name:   "one pool named exists: the unknown one is mentioned",
			req:    Request{Placement: store.Placement{AllowedPools: []string{"devhost", "fkae"}}},
			views:  []pools.View{pool("devhost", unhealthy("down")), pool("fake")},
			wait:   true,
			reason: `waiting for capacity: pool devhost: unhealthy; allowedPools also names a pool that does not exist: "fkae" (did you mean "fake"?)`,
		},
		{
			name:   "external pool refused by policy",
			views:  []pools.View{pool("ext", external)},
			code:   api.CodeInvalidRequest,
			reason: "pool ext: external pool",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Place(tt.req, tt.views, store.Policy{}, tt.active)
			if len(d.Pools) != 0 || d.Wait != tt.wait || d.Code != tt.code {
				t.Fatalf("decision = %+v, want wait %v code %q", d, tt.wait, tt.code)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason = %q, want it to contain %q", d.Reason, tt.reason)
			}
		})
	}
}

func TestUnknownPoolsDoNotStopAPlaceablePool(t *testing.T) {
	d := Place(Request{Placement: store.Placement{AllowedPools: []string{"fake", "devhots"}}},
		[]pools.View{pool("devhost"), pool("fake")}, store.Policy{}, nil)
	if !slices.Equal(d.Pools, []string{"fake"}) || d.Code != "" {
		t.Fatalf("decision = %+v, want pool fake", d)
	}
}

// Names are the caller's: however long and many, the reason stays short.
func TestUnknownPoolsAreQuotedWithinBounds(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	names := []string{long}
	for i := range 20 {
		names = append(names, fmt.Sprintf("p%d", i))
	}
	d := Place(Request{Placement: store.Placement{AllowedPools: names}}, []pools.View{pool("devhost")}, store.Policy{}, nil)
	if d.Code != api.CodeInvalidRequest || len(d.Reason) > 1000 || !strings.Contains(d.Reason, "and 16 more") {
		t.Fatalf("decision: code %q, reason of %d bytes: %.300s", d.Code, len(d.Reason), d.Reason)
	}
}

func TestNearestPoolName(t *testing.T) {
	views := []pools.View{pool("devhost"), pool("fake"), pool("gpu-eu"), pool("gpu-us")}
	for name, want := range map[string]string{
		"devhots": "devhost", // two letters swapped
		"devhos":  "devhost",
		"DevHost": "devhost",
		"fak":     "fake",
		"gpu-ue":  "gpu-eu", // as near to gpu-us: the first in order wins
		"gpu":     "",
		"x":       "",
		"ci":      "",
	} {
		if got := nearest(name, views); got != want {
			t.Errorf("nearest(%q) = %q, want %q", name, got, want)
		}
	}
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"devhots", "devhost", 1}, {"héllo", "hello", 1}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
