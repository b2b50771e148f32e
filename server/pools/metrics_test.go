package pools

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/store"
)

func TestPoolHealthyGauge(t *testing.T) {
	h := &handles{cfg: fake.Config{HealthError: true}}
	reg := NewRegistry(false)
	reg.Register("held", h.factory, false)
	e := newEnv(t, reg, nil)
	prom := prometheus.NewRegistry()
	e.m = NewManager(e.st, reg, e.clk, Options{Metrics: prom})
	e.create(t, store.Pool{Name: "p", Adapter: "held"})
	e.create(t, store.Pool{Name: "gone", Adapter: "nosuchkind"})

	healthy := func(pool string) (float64, bool) {
		t.Helper()
		s, ok, err := metrics.Get(prom, "differently_pool_healthy", map[string]string{"pool": pool})
		if err != nil {
			t.Fatal(err)
		}
		return s.Value, ok
	}
	want := func(pool string, v float64) {
		t.Helper()
		if got, ok := healthy(pool); !ok || got != v {
			t.Errorf("pool_healthy{pool=%s} = %v (present %v), want %v", pool, got, ok, v)
		}
	}

	e.refresh(t)
	want("p", 0)
	want("gone", 0)
	h.last().SetHealthError(false)
	e.refresh(t)
	want("p", 1)
	e.m.MarkUnhealthy("p", adapters.Unavailable("backend down"))
	want("p", 0)
	e.refresh(t)
	want("p", 1)

	if err := e.st.DeletePool(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	if _, ok := healthy("gone"); ok {
		t.Errorf("a removed pool keeps its series")
	}
}

// The breaker's series exist at 0 for every pool from the first refresh, follow its
// openings, and go with the pool.
func TestPoolBreakerMetrics(t *testing.T) {
	h := &handles{}
	reg := NewRegistry(false)
	reg.Register("held", h.factory, false)
	e := newEnv(t, reg, nil)
	prom := prometheus.NewRegistry()
	e.m = NewManager(e.st, reg, e.clk, Options{Metrics: prom})
	e.create(t, store.Pool{Name: "p", Adapter: "held"})
	value := func(name string) (float64, bool) {
		t.Helper()
		s, ok, err := metrics.Get(prom, name, map[string]string{"pool": "p"})
		if err != nil {
			t.Fatal(err)
		}
		return s.Value, ok
	}
	want := func(name string, v float64) {
		t.Helper()
		if got, ok := value(name); !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, v)
		}
	}

	e.refresh(t)
	want("differently_pool_breaker_state", 0)
	want("differently_pool_breaker_opens_total", 0)
	for range DefaultBreakerThreshold {
		tk, _ := e.m.BeginCreate("p")
		e.m.EndCreate(tk, CreateOutage, adapters.Unavailable("down"))
	}
	want("differently_pool_breaker_state", 2)
	want("differently_pool_breaker_opens_total", 1)
	e.clk.Advance(DefaultBreakerCoolDown)
	e.refresh(t)
	want("differently_pool_breaker_state", 1)

	if err := e.st.DeletePool(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	for _, name := range []string{"differently_pool_breaker_state", "differently_pool_breaker_opens_total"} {
		if _, ok := value(name); ok {
			t.Errorf("a removed pool keeps its %s series", name)
		}
	}
}
