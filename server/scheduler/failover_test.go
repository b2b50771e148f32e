package scheduler_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/sqlite"
)

// forEachStore runs fn on a fresh SQLite file and on a fresh PostgreSQL schema.
func forEachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.SchemaURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// Two pools may take a sandbox; the first in placement's order fails every Create
// with provider_unavailable while its probe passes. A sandbox that failed there is
// retried on the second pool, though the next probe calls the first healthy again;
// the first pool's breaker opens after three failed Creates in a row, shows on its
// view and in the metrics, stays open through passing probes, and after its
// cool-down lets a trial Create through, whose success closes it.
func TestCreatesFailOverToTheHealthyPool(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		clk := clock.NewManual(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
		fails := []any{}
		for range 5 {
			fails = append(fails, string(api.CodeProviderUnavailable))
		}
		r := newFailoverRig(t, st, clk,
			store.Pool{Name: "a-flaky", Adapter: "fake", Trust: api.TrustPrivate, Config: map[string]any{"createErrors": fails}},
			store.Pool{Name: "b-good", Adapter: "fake", Trust: api.TrustPrivate},
		)
		m, refresh := r.m, r.refresh
		provision := r.expectIgnoringClaimed
		create := func(allowed ...string) string {
			t.Helper()
			sb, _, err := st.CreateSandbox(ctx, clk.Now(), store.Sandbox{
				ID: ids.At("sbx", clk.Now()), Org: "org_1", Project: "prj_1", State: store.StateQueued,
				NextAttemptAt: clk.Now(), Placement: store.Placement{AllowedPools: allowed},
			})
			if err != nil {
				t.Fatal(err)
			}
			return sb.ID
		}
		wantOn := func(id string, state store.State, pool string) {
			t.Helper()
			sb, err := st.GetSandbox(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if sb.State != state || sb.Pool != pool {
				t.Fatalf("sandbox %s is %s on %q (%s), want %s on %q", id, sb.State, sb.Pool, sb.Reason, state, pool)
			}
		}
		breaker := func() pools.BreakerStatus {
			t.Helper()
			v, ok := m.View("a-flaky")
			if !ok {
				t.Fatal("no view of a-flaky")
			}
			return v.Breaker
		}
		metric := func(name string) float64 {
			t.Helper()
			sample, _, err := metrics.Get(r.reg, name, map[string]string{"pool": "a-flaky"})
			if err != nil {
				t.Fatal(err)
			}
			return sample.Value
		}

		// One sandbox: its Create fails on a-flaky, which its probe calls healthy
		// again before the backoff ends; the retry goes to b-good.
		first := create("a-flaky", "b-good")
		provision(scheduler.Result{Requeued: 1})
		refresh()
		if v, _ := m.View("a-flaky"); !v.Healthy {
			t.Fatalf("a-flaky's probe failed: %s", v.LastError)
		}
		clk.Advance(scheduler.Backoff(1))
		provision(scheduler.Result{Started: 1})
		wantOn(first, store.StateRunning, "b-good")
		if b := breaker(); b.State != pools.BreakerClosed || b.ConsecutiveFailures != 1 {
			t.Fatalf("breaker after one failure: %+v", b)
		}

		// Three more, placed together on a-flaky: the breaker opens at the third
		// failure in a row.
		more := []string{create("a-flaky", "b-good"), create("a-flaky", "b-good"), create("a-flaky", "b-good")}
		provision(scheduler.Result{Requeued: 3})
		b := breaker()
		if b.State != pools.BreakerOpen || b.ConsecutiveFailures != 4 || b.Reason == "" ||
			!b.OpenUntil.Equal(clk.Now().Add(pools.DefaultBreakerCoolDown)) {
			t.Fatalf("breaker after four failures: %+v", b)
		}
		if got := metric("differently_pool_breaker_opens_total"); got != 1 {
			t.Fatalf("opens_total = %v", got)
		}
		// A passing probe makes the pool healthy, not its breaker closed.
		refresh()
		if v, _ := m.View("a-flaky"); !v.Healthy || v.Breaker.State != pools.BreakerOpen {
			t.Fatalf("after a passing probe: healthy %v, breaker %+v", v.Healthy, v.Breaker)
		}
		if got := metric("differently_pool_breaker_state"); got != 2 {
			t.Fatalf("breaker_state = %v, want 2 (open)", got)
		}
		// A new sandbox, which no failure of its own steers away from a-flaky, is
		// kept off it by the breaker.
		fresh := create("a-flaky", "b-good")
		clk.Advance(scheduler.Backoff(1))
		provision(scheduler.Result{Started: 4})
		for _, id := range append(more, fresh) {
			wantOn(id, store.StateRunning, "b-good")
		}

		// Only a-flaky may take this one. While the breaker is open it waits; after
		// the cool-down it is the trial, which fails and opens the breaker again for
		// twice as long; the next trial succeeds (the fake's injected failures are
		// used up) and closes it.
		only := create("a-flaky")
		provision(scheduler.Result{Requeued: 1})
		wantOn(only, store.StateQueued, "")
		clk.Advance(pools.DefaultBreakerCoolDown)
		refresh()
		if b := breaker(); b.State != pools.BreakerHalfOpen {
			t.Fatalf("breaker after the cool-down: %+v", b)
		}
		provision(scheduler.Result{Requeued: 1})
		if b := breaker(); b.State != pools.BreakerOpen || !b.OpenUntil.Equal(clk.Now().Add(2*pools.DefaultBreakerCoolDown)) {
			t.Fatalf("breaker after a failed trial: %+v", b)
		}
		if got := metric("differently_pool_breaker_opens_total"); got != 2 {
			t.Fatalf("opens_total = %v", got)
		}
		clk.Advance(2 * pools.DefaultBreakerCoolDown)
		refresh() // the failed trial marked the pool unhealthy until a probe passes
		provision(scheduler.Result{Started: 1})
		wantOn(only, store.StateRunning, "a-flaky")
		if b := breaker(); b.State != pools.BreakerClosed || b.ConsecutiveFailures != 0 {
			t.Fatalf("breaker after the trial succeeded: %+v", b)
		}
		if got := metric("differently_pool_breaker_state"); got != 0 {
			t.Fatalf("breaker_state = %v, want 0 (closed)", got)
		}
	})
}

// A pool whose breaker opened and then turned half-open gets its trial Create from
// the next sandbox that would have gone to it, though another pool has room; the
// trial's success closes the breaker. Were half-open pools ranked after every closed
// one, the recovered pool would wait, without traffic, as long as the other had room.
func TestHalfOpenPoolGetsItsTrialWhileOthersHaveRoom(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		clk := clock.NewManual(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
		fails := []any{}
		for range pools.DefaultBreakerThreshold {
			fails = append(fails, string(api.CodeProviderUnavailable))
		}
		r := newFailoverRig(t, st, clk,
			store.Pool{Name: "a", Adapter: "fake", Trust: api.TrustPrivate, Config: map[string]any{"createErrors": fails}},
			store.Pool{Name: "b", Adapter: "fake", Trust: api.TrustPrivate},
		)
		m, refresh := r.m, r.refresh
		provision := r.expectIgnoringClaimed
		create := func() string {
			t.Helper()
			sb, _, err := st.CreateSandbox(ctx, clk.Now(), store.Sandbox{
				ID: ids.At("sbx", clk.Now()), Org: "org_1", Project: "prj_1", State: store.StateQueued,
				NextAttemptAt: clk.Now(), Placement: store.Placement{AllowedPools: []string{"a", "b"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Millisecond) // distinct ids
			return sb.ID
		}
		pool := func(id string) string {
			t.Helper()
			sb, err := st.GetSandbox(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if sb.State != store.StateRunning {
				t.Fatalf("sandbox %s is %s (%s), want running", id, sb.State, sb.Reason)
			}
			return sb.Pool
		}

		// a ranks first (by name) and fails the first Creates: its breaker opens.
		for range pools.DefaultBreakerThreshold {
			create()
		}
		provision(scheduler.Result{Requeued: pools.DefaultBreakerThreshold})
		if v, _ := m.View("a"); v.Breaker.State != pools.BreakerOpen {
			t.Fatalf("a's breaker: %+v", v.Breaker)
		}
		clk.Advance(scheduler.Backoff(1))
		provision(scheduler.Result{Started: pools.DefaultBreakerThreshold})

		// After the cool-down, a new sandbox is a's trial, and a works again.
		clk.Advance(pools.DefaultBreakerCoolDown)
		refresh() // the failures marked a unhealthy until a probe passes
		if v, _ := m.View("a"); v.Breaker.State != pools.BreakerHalfOpen || v.Breaker.TrialsFull {
			t.Fatalf("a's breaker after the cool-down: %+v", v.Breaker)
		}
		next := create()
		provision(scheduler.Result{Started: 1})
		if got := pool(next); got != "a" {
			t.Fatalf("the sandbox after the cool-down went to %s, want a (its trial)", got)
		}
		if v, _ := m.View("a"); v.Breaker.State != pools.BreakerClosed {
			t.Fatalf("a's breaker after its trial succeeded: %+v", v.Breaker)
		}
	})
}

// In a deployment whose only pool has its breaker open, the waiting sandboxes are
// still placed, to be requeued with the reason saying until when the pool is paused,
// rather than left unclaimed with an older reason; after the cool-down they start.
func TestSandboxesOfAPausedOnlyPoolSayUntilWhen(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		clk := clock.NewManual(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
		fails := []any{}
		for range pools.DefaultBreakerThreshold {
			fails = append(fails, string(api.CodeProviderUnavailable))
		}
		p := store.Pool{Name: "only", Adapter: "fake", Trust: api.TrustPrivate, Config: map[string]any{"createErrors": fails}}
		r := newFailoverRig(t, st, clk, p)
		m, refresh := r.m, r.refresh
		provision := r.expect
		var queued []string
		for range pools.DefaultBreakerThreshold {
			sb, _, err := st.CreateSandbox(ctx, clk.Now(), store.Sandbox{
				ID: ids.At("sbx", clk.Now()), Org: "org_1", Project: "prj_1", State: store.StateQueued,
				NextAttemptAt: clk.Now(),
			})
			if err != nil {
				t.Fatal(err)
			}
			queued = append(queued, sb.ID)
			clk.Advance(time.Millisecond) // distinct ids
		}
		n := len(queued)
		provision(scheduler.Result{Claimed: n, Requeued: n})
		v, _ := m.View("only")
		if v.Breaker.State != pools.BreakerOpen {
			t.Fatalf("breaker: %+v", v.Breaker)
		}
		until := v.Breaker.OpenUntil.UTC().Format(time.RFC3339)
		refresh() // the failures marked the pool unhealthy until a probe passes
		clk.Advance(scheduler.Backoff(1))
		provision(scheduler.Result{Claimed: n, Requeued: n})
		for _, id := range queued {
			sb, err := st.GetSandbox(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if sb.State != store.StateQueued || !strings.Contains(sb.Reason, "paused") || !strings.Contains(sb.Reason, until) {
				t.Fatalf("sandbox %s is %s (%q), want queued, paused until %s", id, sb.State, sb.Reason, until)
			}
		}

		// After the cool-down one of them is the trial, which closes the breaker; the
		// others follow in the next pass.
		clk.Advance(pools.DefaultBreakerCoolDown)
		provision(scheduler.Result{Claimed: n, Started: 1, Requeued: n - 1})
		clk.Advance(scheduler.RequeueDelay)
		provision(scheduler.Result{Claimed: n - 1, Started: n - 1})
	})
}

// failoverRig is a pool manager and a scheduler over st, with the given pools stored
// and probed once.
type failoverRig struct {
	t   *testing.T
	m   *pools.Manager
	s   *scheduler.Scheduler
	reg *prometheus.Registry
}

func newFailoverRig(t *testing.T, st store.Store, clk *clock.Manual, ps ...store.Pool) *failoverRig {
	t.Helper()
	ctx := context.Background()
	for _, p := range ps {
		if _, err := st.CreatePool(ctx, clk.Now(), p); err != nil {
			t.Fatal(err)
		}
	}
	r := &failoverRig{t: t, reg: prometheus.NewRegistry()}
	r.m = pools.NewManager(st, pools.DefaultRegistry(true), clk, pools.Options{Metrics: r.reg})
	r.refresh()
	inst, err := st.InstallationID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.s, err = scheduler.New(st, r.m, clk, scheduler.Options{Installation: inst, ReplicaID: "r1"}); err != nil {
		t.Fatal(err)
	}
	return r
}

// refresh probes every pool, as the manager's loop does.
func (r *failoverRig) refresh() {
	r.t.Helper()
	if err := r.m.Refresh(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// expect runs one provisioning pass and fails unless it did what want says.
func (r *failoverRig) expect(want scheduler.Result) {
	r.t.Helper()
	got, err := r.s.ProvisionOnce(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	want.Pass = scheduler.PassProvision
	if got != want {
		r.t.Fatalf("pass: %+v, want %+v", got, want)
	}
}

// expectIgnoringClaimed is expect for passes whose claim count the test leaves open.
func (r *failoverRig) expectIgnoringClaimed(want scheduler.Result) {
	r.t.Helper()
	got, err := r.s.ProvisionOnce(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	want.Pass, want.Claimed = scheduler.PassProvision, got.Claimed
	if got != want {
		r.t.Fatalf("pass: %+v, want %+v", got, want)
	}
}
