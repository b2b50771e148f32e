package reconcile_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

const installation = "inst_test"

func setup(t *testing.T, cfg fake.Config) (*reconcile.Reconciler, *fake.Adapter, store.Store, *clock.Manual) {
	t.Helper()
	st, clk := newStore(t)
	a := fake.New(cfg)
	view := pools.View{Pool: store.Pool{Name: "p", Adapter: "fake"}, Adapter: a, Healthy: true}
	r := reconcile.New(st, poolstest.New(view), clk, reconcile.Options{Installation: installation, ReplicaID: "r1"})
	return r, a, st, clk
}

// newStore is a fresh SQLite store and a manual clock.
func newStore(t *testing.T) (store.Store, *clock.Manual) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, clock.NewManual(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

func create(t *testing.T, st store.Store, clk clock.Clock, id string, state store.State, ref string) {
	t.Helper()
	_, _, err := st.CreateSandbox(t.Context(), clk.Now(), store.Sandbox{ID: id, Org: "o", Project: "p", State: state, Pool: "p", BackendRef: ref, NextAttemptAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReconcilePass(t *testing.T) {
	ctx := t.Context()
	r, a, st, clk := setup(t, fake.Config{})
	// An orphan: an instance whose sandbox the database never knew.
	orphan, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_orphan", Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	// Another installation's instance must never be touched.
	foreign, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_foreign", Installation: "inst_other"})
	if err != nil {
		t.Fatal(err)
	}
	// A healthy running sandbox.
	ok, _ := a.Create(ctx, adapters.CreateRequest{ID: "sbx_ok", Installation: installation})
	create(t, st, clk, "sbx_ok", store.StateRunning, ok.Ref)
	// A running sandbox whose instance is gone.
	create(t, st, clk, "sbx_lost", store.StateRunning, "fake_missing")
	// A sandbox stuck in provisioning whose Create did succeed: adopt.
	create(t, st, clk, "sbx_adopt", store.StateProvisioning, "")
	adopted, _ := a.Create(ctx, adapters.CreateRequest{ID: "sbx_adopt", Installation: installation})
	// A sandbox stuck in provisioning with nothing on the backend: requeue.
	create(t, st, clk, "sbx_requeue", store.StateProvisioning, "")

	// Within the grace period and provision timeout, nothing but the orphan goes.
	report, err := r.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := report.Pools[0]; !slices.Equal(got.OrphansDeleted, []string{orphan.Ref}) || len(got.Lost)+len(got.Adopted)+len(got.Requeued) != 0 {
		t.Fatalf("first pass: %+v", got)
	}
	if _, err := a.Get(ctx, foreign.Ref); err != nil {
		t.Fatalf("another installation's instance was touched: %v", err)
	}

	clk.Advance(5 * time.Minute)
	report, err = r.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := report.Pools[0]
	if !slices.Equal(got.Lost, []string{"sbx_lost"}) || !slices.Equal(got.Adopted, []string{"sbx_adopt"}) || !slices.Equal(got.Requeued, []string{"sbx_requeue"}) {
		t.Fatalf("second pass: %+v", got)
	}
	check := func(id string, state store.State, ref string) {
		t.Helper()
		sb, err := st.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State != state || sb.BackendRef != ref {
			t.Errorf("%s: %s %q, want %s %q (reason %q)", id, sb.State, sb.BackendRef, state, ref, sb.Reason)
		}
	}
	check("sbx_ok", store.StateRunning, ok.Ref)
	check("sbx_lost", store.StateFailed, "fake_missing")
	check("sbx_adopt", store.StateRunning, adopted.Ref)
	check("sbx_requeue", store.StateQueued, "")
	if sb, _ := st.GetSandbox(ctx, "sbx_requeue"); sb.Pool != "" || sb.Region != "" {
		t.Errorf("requeued sandbox kept its placement: pool %q region %q", sb.Pool, sb.Region)
	}

	// A third pass finds the system in agreement.
	report, err = r.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := report.Pools[0]; len(got.OrphansDeleted)+len(got.Lost)+len(got.Adopted)+len(got.Requeued)+len(got.StateChanged)+len(got.Duplicates) != 0 {
		t.Errorf("third pass still acts: %+v", got)
	}
}

func TestListFailureSkipsThePool(t *testing.T) {
	r, _, st, clk := setup(t, fake.Config{ListError: true})
	create(t, st, clk, "sbx_1", store.StateRunning, "fake_ref")
	clk.Advance(time.Hour)
	report, err := r.Reconcile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if report.Pools[0].Skipped == "" || len(report.Pools[0].Lost) != 0 {
		t.Fatalf("a failed List must skip the pool: %+v", report.Pools[0])
	}
	if sb, _ := st.GetSandbox(t.Context(), "sbx_1"); sb.State != store.StateRunning {
		t.Errorf("sandbox was changed on a failed List: %s", sb.State)
	}
}

func TestPoolWithoutAdapterIsSkipped(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	view := pools.View{Pool: store.Pool{Name: "gone", Adapter: "firecracker"}, LastError: "adapter kind \"firecracker\" is not in this build"}
	r := reconcile.New(st, poolstest.New(view), clock.Real{}, reconcile.Options{Installation: installation})
	report, err := r.Reconcile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if report.Pools[0].Skipped == "" {
		t.Errorf("pool without adapter not reported as skipped: %+v", report)
	}
}

func TestRunTakesTheLeaseAndStops(t *testing.T) {
	r, _, st, clk := setup(t, fake.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	cancel()
	<-done
	// Run released its lease on the way out, so another replica takes it at once.
	won, err := st.TryLease(t.Context(), reconcile.LeaseName, "other", clk.Now(), time.Minute)
	if err != nil || !won {
		t.Fatalf("lease not released: %v %v", won, err)
	}
}

// A failed action is reported with the pool and the pass goes on: the answer still
// says what the pass did, and the next pass tries again.
func TestReconcileReportsFailedActions(t *testing.T) {
	ctx := t.Context()
	r, a, st, clk := setup(t, fake.Config{DeleteErrorRate: 1, DeleteErrorCodes: []api.Code{api.CodeProviderUnavailable}})
	orphan, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_orphan", Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	create(t, st, clk, "sbx_lost", store.StateRunning, "fake_missing")
	clk.Advance(5 * time.Minute)
	report, err := r.Reconcile(ctx)
	if err != nil {
		t.Fatalf("a failed Delete failed the whole pass: %v", err)
	}
	got := report.Pools[0]
	if len(got.OrphansDeleted) != 0 || len(got.Errors) != 1 || !strings.Contains(got.Errors[0], orphan.Ref) ||
		!strings.Contains(got.Errors[0], "provider_unavailable") {
		t.Fatalf("report %+v, want the failed orphan Delete among its errors", got)
	}
	if !slices.Equal(got.Lost, []string{"sbx_lost"}) {
		t.Fatalf("the pass stopped at the failure: %+v", got)
	}
}

// slowList is an adapter whose List runs during before answering.
type slowList struct {
	*fake.Adapter
	during func()
}

func (s slowList) List(ctx context.Context, inst string) ([]adapters.Instance, error) {
	s.during()
	return s.Adapter.List(ctx, inst)
}

// A Create that ends on pool a while pool b is being listed slowly leaves a sandbox
// that changed after a's List began: the grace counts back from that List, so the
// sandbox is not found lost (and its instance then deleted) however long b took.
func TestGraceCountsFromThePoolsList(t *testing.T) {
	ctx := t.Context()
	st, clk := newStore(t)
	a := fake.New(fake.Config{})
	if _, _, err := st.CreateSandbox(ctx, clk.Now(), store.Sandbox{ID: "sbx_new", Org: "o", Project: "p",
		State: store.StateProvisioning, Pool: "a", NextAttemptAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	var ref string
	b := slowList{Adapter: fake.New(fake.Config{}), during: func() {
		if ref != "" {
			return
		}
		clk.Advance(5 * time.Second)
		inst, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_new", Installation: installation})
		if err != nil {
			t.Fatal(err)
		}
		ref = inst.Ref
		if _, err := st.UpdateSandbox(ctx, "sbx_new", clk.Now(), func(sb *store.Sandbox) error {
			sb.State, sb.BackendRef = store.StateRunning, inst.Ref
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(40 * time.Second) // b's List takes 45 s in all
	}}
	views := poolstest.New(
		pools.View{Pool: store.Pool{Name: "a", Adapter: "fake"}, Adapter: a, Healthy: true},
		pools.View{Pool: store.Pool{Name: "b", Adapter: "fake"}, Adapter: b, Healthy: true},
	)
	r := reconcile.New(st, views, clk, reconcile.Options{Installation: installation, ReplicaID: "r1"})
	for pass := range 2 {
		if _, err := r.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		sb, err := st.GetSandbox(ctx, "sbx_new")
		if err != nil || sb.State != store.StateRunning {
			t.Fatalf("pass %d: sandbox %s (%q), %v", pass, sb.State, sb.Reason, err)
		}
		if _, err := a.Get(ctx, ref); err != nil {
			t.Fatalf("pass %d: the instance is gone: %v", pass, err)
		}
	}
}

// missingFromList lists every instance but one, which Get still finds.
type missingFromList struct {
	*fake.Adapter
	hide string
}

func (m missingFromList) List(ctx context.Context, inst string) ([]adapters.Instance, error) {
	all, err := m.Adapter.List(ctx, inst)
	return slices.DeleteFunc(all, func(i adapters.Instance) bool { return i.Ref == m.hide }), err
}

// A sandbox whose instance the List left out but the backend still has is not
// failed: the loss is confirmed with Get first. One whose instance is really gone is.
func TestLostIsConfirmedByGet(t *testing.T) {
	ctx := t.Context()
	st, clk := newStore(t)
	fk := fake.New(fake.Config{})
	refs := map[string]string{}
	for _, id := range []string{"sbx_hidden", "sbx_gone"} {
		inst, err := fk.Create(ctx, adapters.CreateRequest{ID: id, Installation: installation})
		if err != nil {
			t.Fatal(err)
		}
		refs[id] = inst.Ref
		if _, _, err := st.CreateSandbox(ctx, clk.Now(), store.Sandbox{ID: id, Org: "o", Project: "p",
			State: store.StateRunning, Pool: "a", BackendRef: inst.Ref}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fk.Delete(ctx, refs["sbx_gone"]); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	views := poolstest.New(pools.View{Pool: store.Pool{Name: "a", Adapter: "fake"}, Adapter: missingFromList{Adapter: fk, hide: refs["sbx_hidden"]}, Healthy: true})
	rep, err := reconcile.New(st, views, clk, reconcile.Options{Installation: installation, ReplicaID: "r1"}).Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hidden, _ := st.GetSandbox(ctx, "sbx_hidden"); hidden.State != store.StateRunning {
		t.Errorf("a sandbox the List missed is %s (%q)", hidden.State, hidden.Reason)
	}
	if gone, _ := st.GetSandbox(ctx, "sbx_gone"); gone.State != store.StateFailed {
		t.Errorf("a sandbox whose instance is gone is %s", gone.State)
	}
	if len(rep.Pools) != 1 || !slices.Equal(rep.Pools[0].Lost, []string{"sbx_gone"}) || len(rep.Pools[0].Errors) != 1 ||
		!strings.Contains(rep.Pools[0].Errors[0], "still has") {
		t.Errorf("report %+v", rep.Pools)
	}
}
