package reconcile_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

// hookedList runs onList before each List: the tests move the clock or hand the lease
// to another replica there, as a slow List on a real backend would let happen.
type hookedList struct {
	*fake.Adapter
	onList func()
}

func (h *hookedList) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	if h.onList != nil {
		h.onList()
	}
	return h.Adapter.List(ctx, installation)
}

type leaseEnv struct {
	r   *reconcile.Reconciler
	a   *hookedList
	st  store.Store
	clk *clock.Manual
	reg *prometheus.Registry
}

const interval = 30 * time.Second

func newLeaseEnv(t *testing.T) *leaseEnv {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &leaseEnv{a: &hookedList{Adapter: fake.New(fake.Config{})}, st: st,
		clk: clock.NewManual(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), reg: prometheus.NewRegistry()}
	views := poolstest.New(
		pools.View{Pool: store.Pool{Name: "p", Adapter: "fake"}, Adapter: e.a, Healthy: true},
		pools.View{Pool: store.Pool{Name: "q", Adapter: "fake"}, Adapter: fake.New(fake.Config{ListError: true})},
	)
	e.r = reconcile.New(st, views, e.clk, reconcile.Options{Installation: installation, ReplicaID: "r1",
		Interval: interval, Metrics: e.reg})
	return e
}

func (e *leaseEnv) orphan(t *testing.T) adapters.Instance {
	t.Helper()
	inst, err := e.a.Create(t.Context(), adapters.CreateRequest{ID: "sbx_orphan", Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func (e *leaseEnv) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	s, ok, err := metrics.Get(e.reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return s.Value
}

func (e *leaseEnv) leader(t *testing.T) float64 {
	t.Helper()
	return e.value(t, "differently_reconcile_leader", nil)
}

func TestLeaderPassActsAndCounts(t *testing.T) {
	e := newLeaseEnv(t)
	orphan := e.orphan(t)
	rep, led, err := e.r.RunOnce(t.Context())
	if err != nil || !led {
		t.Fatalf("RunOnce: led %v, err %v", led, err)
	}
	if got := rep.Pools[1]; !slices.Equal(got.OrphansDeleted, []string{orphan.Ref}) {
		t.Fatalf("pool p: %+v", got)
	}
	if got := rep.Pools[0]; !strings.HasPrefix(got.Skipped, "list failed") {
		t.Fatalf("pool q: %+v", got)
	}
	if v := e.leader(t); v != 1 {
		t.Errorf("differently_reconcile_leader = %v, want 1", v)
	}
	if v := e.value(t, "differently_reconcile_findings_total", map[string]string{"pool": "p", "kind": "orphan_deleted"}); v != 1 {
		t.Errorf("orphan_deleted on p = %v, want 1", v)
	}
	if v := e.value(t, "differently_reconcile_findings_total", map[string]string{"pool": "q", "kind": "skipped"}); v != 1 {
		t.Errorf("skipped on q = %v, want 1", v)
	}

	// Another replica holds the lease: no pass, and the gauge says so.
	e.clk.Advance(3*interval + time.Second)
	if won, err := e.st.TryLease(t.Context(), reconcile.LeaseName, "r2", e.clk.Now(), 3*interval); err != nil || !won {
		t.Fatalf("r2 could not take the expired lease: %v %v", won, err)
	}
	e.orphan(t)
	if _, led, err := e.r.RunOnce(t.Context()); led || err != nil {
		t.Fatalf("RunOnce while r2 leads: led %v, err %v", led, err)
	}
	if v := e.leader(t); v != 0 {
		t.Errorf("differently_reconcile_leader = %v, want 0", v)
	}
	if n := e.a.Instances(); n != 1 {
		t.Errorf("a non-leader's pass deleted something: %d instances left", n)
	}
}

// A leader whose lease another replica took while its List ran must not act.
func TestPassStopsWhenTheLeaseIsLost(t *testing.T) {
	e := newLeaseEnv(t)
	e.orphan(t)
	e.a.onList = func() {
		e.clk.Advance(3*interval + time.Second) // r1's lease lapses meanwhile
		if won, err := e.st.TryLease(context.Background(), reconcile.LeaseName, "r2", e.clk.Now(), 3*interval); err != nil || !won {
			t.Errorf("r2 could not take the lapsed lease: %v %v", won, err)
		}
	}
	rep, led, err := e.r.RunOnce(t.Context())
	if !led || err == nil {
		t.Fatalf("RunOnce: led %v, err %v; want a pass stopped with an error", led, err)
	}
	if n := e.a.Instances(); n != 1 {
		t.Fatalf("the deposed leader deleted the orphan")
	}
	if got := rep.Pools[1]; !strings.HasPrefix(got.Skipped, "pass stopped") || len(got.OrphansDeleted) != 0 {
		t.Errorf("pool p: %+v", got)
	}
	if v := e.leader(t); v != 0 {
		t.Errorf("differently_reconcile_leader = %v after losing the lease, want 0", v)
	}
	if v := e.value(t, "differently_reconcile_findings_total", map[string]string{"pool": "p", "kind": "skipped"}); v != 1 {
		t.Errorf("skipped on p = %v, want 1", v)
	}
	// The stopped pass is recorded with why it stopped, and the pools it skipped.
	passes, _, err := e.st.ListReconcilePasses(t.Context(), store.ReconcilePassFilter{})
	if err != nil || len(passes) != 1 {
		t.Fatalf("recorded passes %+v, %v", passes, err)
	}
	if p := passes[0]; !strings.Contains(p.Error, "leadership lost") ||
		len(p.Pools) != 2 || !strings.HasPrefix(p.Pools[1].Skipped, "pass stopped") ||
		!p.EndedAt.Equal(p.StartedAt.Add(3*interval+time.Second)) {
		t.Errorf("recorded pass %+v", p)
	}
}

// A pass past its local deadline stops even though nobody took the lease yet: the
// deadline, two intervals, is kept shorter than the lease's three.
func TestPassStopsAtItsLocalDeadline(t *testing.T) {
	e := newLeaseEnv(t)
	e.orphan(t)
	e.a.onList = func() { e.clk.Advance(2 * interval) }
	rep, _, err := e.r.RunOnce(t.Context())
	if err == nil || e.a.Instances() != 1 {
		t.Fatalf("a pass past its deadline acted: err %v, %d instances", err, e.a.Instances())
	}
	if got := rep.Pools[1]; !strings.HasPrefix(got.Skipped, "pass stopped") {
		t.Errorf("pool p: %+v", got)
	}
}

// A slow List within the deadline is fine: the lease is renewed before acting, which
// also moves the deadline on.
func TestPassRenewsTheLeaseBeforeActing(t *testing.T) {
	e := newLeaseEnv(t)
	e.orphan(t)
	start := e.clk.Now()
	e.a.onList = func() { e.clk.Advance(interval + time.Second) }
	if _, led, err := e.r.RunOnce(t.Context()); !led || err != nil {
		t.Fatalf("RunOnce: led %v, err %v", led, err)
	}
	if n := e.a.Instances(); n != 0 {
		t.Fatalf("orphan not deleted")
	}
	// Renewed at start+31 s, so the lease holds past start+3 intervals.
	if won, _ := e.st.TryLease(t.Context(), reconcile.LeaseName, "r2", start.Add(3*interval+time.Second), 3*interval); won {
		t.Errorf("the lease was not renewed before acting")
	}
}

// Every pass that ran is counted once it gave the pass lease up, by what started
// it; a turn that ran no pass is not counted.
func TestPassesAreCountedByTrigger(t *testing.T) {
	e := newLeaseEnv(t)
	ctx := t.Context()
	passes := func(trigger string) float64 {
		return e.value(t, "differently_reconcile_passes_total", map[string]string{"trigger": trigger})
	}
	want := func(interval, request float64) {
		t.Helper()
		if got := passes("interval"); got != interval {
			t.Errorf("interval passes = %v, want %v", got, interval)
		}
		if got := passes("request"); got != request {
			t.Errorf("request passes = %v, want %v", got, request)
		}
	}
	want(0, 0)

	if _, led, err := e.r.RunOnce(ctx); !led || err != nil {
		t.Fatalf("RunOnce: led %v, err %v", led, err)
	}
	if _, err := e.r.Reconcile(ctx); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	want(1, 1)

	// A pass stopped because the lease was lost ran all the same, and is counted.
	e.orphan(t)
	e.a.onList = func() { e.clk.Advance(2 * interval) }
	if _, led, err := e.r.RunOnce(ctx); !led || err == nil {
		t.Fatalf("RunOnce past its deadline: led %v, err %v; want a stopped pass", led, err)
	}
	e.a.onList = nil
	want(2, 1)
	if free, err := e.st.TryLease(ctx, reconcile.PassLeaseName, "r2", e.clk.Now(), 3*interval); err != nil || !free {
		t.Fatalf("the counted pass left its pass lease held: %v %v", free, err)
	}

	// r2 now holds the pass lease: a requested pass is refused and the leader's
	// turn runs nothing; neither is counted.
	if _, err := e.r.Reconcile(ctx); !errors.Is(err, reconcile.ErrPassRunning) {
		t.Fatalf("Reconcile while r2 runs a pass = %v, want ErrPassRunning", err)
	}
	if _, led, err := e.r.RunOnce(ctx); led || err != nil {
		t.Fatalf("RunOnce while r2 runs a pass: led %v, err %v", led, err)
	}
	want(2, 1)
}
