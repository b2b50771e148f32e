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
