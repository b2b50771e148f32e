package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// The admin API shows a pool's circuit breaker: why it is open and until when, and
// closed (with no reason) for a pool whose Creates succeed.
func TestPoolViewShowsTheBreaker(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		m := pools.NewManager(st, pools.DefaultRegistry(true), clk, pools.Options{})
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.Pools = m })
		if err := m.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		for range pools.DefaultBreakerThreshold {
			ticket, ok := m.BeginCreate("fake")
			if !ok {
				t.Fatal("a closed breaker refused a create")
			}
			m.EndCreate(ticket, pools.CreateOutage, api.Errorf(api.CodeProviderUnavailable, "backend unreachable"))
		}

		var p httpapi.Pool
		e.do(e.admin, "GET", "/v1/admin/pools/fake", nil).want(t, http.StatusOK).decode(t, &p)
		b := p.Breaker
		if b == nil || b.State != httpapi.BreakerOpen || b.ConsecutiveFailures != pools.DefaultBreakerThreshold ||
			b.Reason == nil || *b.Reason != "backend unreachable" ||
			b.OpenUntil == nil || !b.OpenUntil.Equal(clk.Now().Add(pools.DefaultBreakerCoolDown)) {
			t.Fatalf("breaker of fake: %+v", b)
		}
		if p.Healthy == nil || !*p.Healthy {
			t.Fatal("the breaker made the pool unhealthy: they are apart")
		}

		e.do(e.admin, "GET", "/v1/admin/pools/devhost", nil).want(t, http.StatusOK).decode(t, &p)
		if b := p.Breaker; b == nil || b.State != httpapi.BreakerClosed || b.ConsecutiveFailures != 0 || b.Reason != nil || b.OpenUntil != nil {
			t.Fatalf("breaker of devhost: %+v", b)
		}
	})
}
