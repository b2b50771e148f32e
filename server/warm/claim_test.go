package warm_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/warm"
)

const installation = "inst_test"

// eachStore runs f on a fresh env over SQLite and over PostgreSQL.
func eachStore(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t)) })
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), pgtest.SchemaURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, newEnvOn(t, st))
	})
}

// runOnBackend makes a queued warm sandbox running on an instance the fake adapter
// really holds, labelled with the sandbox's ID, as the scheduler's Create would.
func (e *env) runOnBackend(id string) store.Sandbox {
	e.t.Helper()
	inst, err := e.a.Create(e.t.Context(), adapters.CreateRequest{ID: id, Installation: installation,
		Template: shape.Template, Resources: shape.Resources})
	if err != nil {
		e.t.Fatal(err)
	}
	by := lifecycle.Scheduler("test")
	out, err := e.st.UpdateSandbox(e.t.Context(), id, e.clk.Now(), func(cur *store.Sandbox) error {
		p := lifecycle.Placement{Pool: "alpha", Claimer: "test", ClaimUntil: e.clk.Now().Add(time.Minute)}
		if err := lifecycle.Place(cur, p, e.clk.Now(), by); err != nil {
			return err
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: inst.Ref}, e.clk.Now(), 0, by)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// fillRunning fills the shape and runs its sandboxes on the backend; a second pass
// sees them running, as the filler would after the scheduler's Creates.
func (e *env) fillRunning(f *warm.Filler) []store.Sandbox {
	e.t.Helper()
	e.pass(f, warm.Result{Created: shape.Size})
	var out []store.Sandbox
	for _, sb := range e.warmSandboxes() {
		out = append(out, e.runOnBackend(sb.ID))
	}
	e.pass(f, warm.Result{})
	return out
}

func (e *env) reconciler() *reconcile.Reconciler {
	return reconcile.New(e.st, e.pools, e.clk, reconcile.Options{Installation: installation, ReplicaID: "r1"})
}

// reconcile runs a pass past the reconciler's grace (30 s; short of shape's maxAgeSeconds) and returns the pool's report.
func (e *env) reconcile(r *reconcile.Reconciler) reconcile.PoolReport {
	e.t.Helper()
	e.clk.Advance(31 * time.Second)
	rep, err := r.Reconcile(e.t.Context())
	if err != nil || len(rep.Pools) != 1 || rep.Pools[0].Skipped != "" || len(rep.Pools[0].Errors) != 0 {
		e.t.Fatalf("reconcile: %+v, %v", rep, err)
	}
	return rep.Pools[0]
}

func quiet(p reconcile.PoolReport) bool {
	return len(p.OrphansDeleted)+len(p.Adopted)+len(p.Requeued)+len(p.Lost)+len(p.StateChanged)+len(p.Duplicates) == 0
}

var tenant = sandboxes.Caller{TokenID: "tok_t", Org: "acme", Project: "web"}

// create asks the service for a sandbox of the warm shape, with key as its
// idempotency key and env as its environment.
func (e *env) create(key string, env map[string]string) (store.Sandbox, bool) {
	e.t.Helper()
	out, created, _, err := e.svc.Create(e.t.Context(), tenant, sandboxes.CreateRequest{Sandbox: store.Sandbox{
		Template: shape.Template, Resources: shape.Resources, Env: env,
		Placement:      store.Placement{AllowedPools: []string{"alpha"}},
		IdempotencyKey: key, RequestHash: "hash-" + key,
	}})
	if err != nil {
		e.t.Fatalf("create %q: %v", key, err)
	}
	return out, created
}

func (e *env) instance(ref string) bool {
	e.t.Helper()
	_, err := e.a.Get(e.t.Context(), ref)
	return err == nil
}

var errCrash = errors.New("the replica died before the commit")

// A claim and its bind are one transaction, so a crash leaves either the warm
// sandbox or the tenant's under the one ID the instance is labelled with: the
// reconciler finds an owner for the instance either way and deletes nothing, a
// claim interrupted before its commit leaves the warm sandbox free for the next,
// and a create repeated after a crash that followed the commit gets the same
// sandbox back rather than a second instance.
func TestClaimCrashAndReconciler(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		f := e.filler()
		warmed := e.fillRunning(f)
		r := e.reconciler()
		if p := e.reconcile(r); !quiet(p) {
			t.Fatalf("a pass over ready warm sandboxes: %+v, want nothing done", p)
		}

		// The replica dies inside the claim's transaction, after the claim was
		// written into it: the transaction is rolled back.
		project := store.WarmProject("alpha", shape)
		_, _, err := e.st.ClaimWarm(ctx, e.clk.Now(), store.Sandbox{ID: "sbx_ignored", Org: "acme", Project: "web",
			Template: shape.Template, Resources: shape.Resources}, "alpha", project,
			func(_ store.Admission, w store.Sandbox, ins *store.Sandbox) error {
				if err := lifecycle.Claim(ins, w, e.clk.Now(), lifecycle.Token("tok_t")); err != nil {
					return err
				}
				return errCrash
			})
		if !errors.Is(err, errCrash) {
			t.Fatalf("interrupted claim: %v", err)
		}
		if got := e.warmSandboxes(); len(got) != 2 || got[0].State != store.StateRunning || got[1].State != store.StateRunning {
			t.Fatalf("after an interrupted claim: %+v, want both warm sandboxes as they were", got)
		}
		if p := e.reconcile(r); !quiet(p) {
			t.Fatalf("a pass after an interrupted claim: %+v, want nothing done", p)
		}

		// A claim commits; the replica dies before answering; the client repeats.
		first, created := e.create("k1", nil)
		if !created || first.Labels[lifecycle.LabelWarm] != "true" {
			t.Fatalf("create matching the shape: created %v, %+v; want a warm sandbox", created, first)
		}
		again, created := e.create("k1", nil)
		if created || again.ID != first.ID || again.BackendRef != first.BackendRef {
			t.Fatalf("repeated create: created %v, %s on %s; want %s on %s back", created, again.ID, again.BackendRef, first.ID, first.BackendRef)
		}
		if left := e.warmSandboxes(); len(left) != 1 || left[0].ID == first.ID {
			t.Fatalf("warm sandboxes after one claim: %+v, want the other one", left)
		}
		if p := e.reconcile(r); !quiet(p) {
			t.Fatalf("a pass after the claim: %+v, want nothing done (the instance is the tenant's now)", p)
		}
		if got, err := e.st.GetSandbox(ctx, first.ID); err != nil || got.State != store.StateRunning || got.Org != "acme" || !e.instance(got.BackendRef) {
			t.Fatalf("claimed sandbox after a pass: %+v, %v; want it running on its instance", got, err)
		}

		// The second create takes the other instance; the third finds none and is
		// created cold: no instance is given twice.
		second, _ := e.create("k2", nil)
		third, _ := e.create("k3", nil)
		refs := []string{first.BackendRef, second.BackendRef}
		want := []string{warmed[0].BackendRef, warmed[1].BackendRef}
		slices.Sort(refs)
		slices.Sort(want)
		if !slices.Equal(refs, want) || third.State != store.StateQueued || third.BackendRef != "" || third.Labels[lifecycle.LabelWarm] != "" {
			t.Fatalf("claims took %v of %v; the third is %s on %q", refs, want, third.State, third.BackendRef)
		}
		if p := e.reconcile(r); !quiet(p) {
			t.Fatalf("a pass after both claims: %+v, want nothing done", p)
		}
	})
}

// The reconciler treats warm sandboxes like any other: one whose instance the
// backend lost is failed, and the filler starts another in its place without
// waiting, since it did run; an instance of a warm sandbox that the store no longer
// has live is an orphan.
func TestWarmInstanceLost(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		f := e.filler()
		warmed := e.fillRunning(f)
		r := e.reconciler()
		if err := e.a.Delete(ctx, warmed[0].BackendRef); err != nil {
			t.Fatal(err)
		}
		if p := e.reconcile(r); !slices.Equal(p.Lost, []string{warmed[0].ID}) || len(p.OrphansDeleted) != 0 {
			t.Fatalf("a pass after the backend lost a warm instance: %+v, want it lost", p)
		}
		if got, err := e.st.GetSandbox(ctx, warmed[0].ID); err != nil || got.State != store.StateFailed {
			t.Fatalf("lost warm sandbox: %+v, %v; want failed", got, err)
		}
		e.pass(f, warm.Result{Created: 1})
		live := e.warmSandboxes()
		if len(live) != 2 || !e.instance(warmed[1].BackendRef) {
			t.Fatalf("warm sandboxes after the loss: %+v, want the survivor and a replacement", live)
		}

		// The shape is dropped and its sandboxes deleted; an instance left behind by a
		// Delete that never reached the backend is an orphan.
		e.pools.Update("alpha", func(v *pools.View) { v.Pool.Warm = nil })
		e.pass(f, warm.Result{Removed: 2})
		for _, sb := range e.warmSandboxes() {
			t.Fatalf("warm sandbox %s left after the shape was dropped", sb.ID)
		}
		e.terminated(warmed[1].ID)
		if p := e.reconcile(r); !slices.Equal(p.OrphansDeleted, []string{warmed[1].BackendRef}) {
			t.Fatalf("a pass over the instance of an ended warm sandbox: %+v, want it deleted as an orphan", p)
		}
	})
}

// A create with an environment of its own is never served warm, even when a ready
// warm sandbox of its shape is free: no adapter can give a running instance an
// environment (adapters.CreateRequest is the only place one is given), so the
// create is queued for a cold start and the warm sandboxes stay the pool's.
func TestCreateWithEnvIsCold(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		f := e.filler()
		warmed := e.fillRunning(f)
		sb, created := e.create("env", map[string]string{"TOKEN": "x"})
		if !created || sb.State != store.StateQueued || sb.BackendRef != "" || sb.Labels[lifecycle.LabelWarm] != "" ||
			slices.ContainsFunc(warmed, func(w store.Sandbox) bool { return w.ID == sb.ID }) {
			t.Fatalf("create with env: %+v, want it queued cold", sb)
		}
		if live := e.warmSandboxes(); len(live) != 2 {
			t.Fatalf("%d warm sandboxes after a create with env, want 2 untouched", len(live))
		}
		// And the claim itself refuses a warm sandbox whose environment differs, in
		// case a caller ever reaches it with one.
		ins := store.Sandbox{Template: shape.Template, Resources: shape.Resources, Env: map[string]string{"TOKEN": "x"}}
		if err := lifecycle.Claim(&ins, warmed[0], e.clk.Now(), lifecycle.Token("tok_t")); err == nil {
			t.Fatal("lifecycle.Claim gave a warm sandbox to a create with another environment")
		}
	})
}

// A warm sandbox that cannot start at once waits behind tenants' creates that come
// within a second: they are waiting now, it is for later.
func TestWarmYieldsToTenants(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		f := e.filler()
		e.pass(f, warm.Result{Created: shape.Size})
		e.clk.Advance(100 * time.Millisecond)
		cold, _ := e.create("cold", map[string]string{"K": "v"})
		got, err := e.st.ClaimSandboxes(t.Context(), e.clk.Now(), "test", time.Minute, 10)
		if err != nil || len(got) != 1 || got[0].ID != cold.ID {
			t.Fatalf("due now: %+v, %v; want the tenant's create alone", got, err)
		}
		e.clk.Advance(900 * time.Millisecond)
		got, err = e.st.ClaimSandboxes(t.Context(), e.clk.Now(), "test", time.Minute, 10)
		if err != nil || len(got) != shape.Size || got[0].Org != store.WarmOrg {
			t.Fatalf("a second later: %+v, %v; want the warm sandboxes", got, err)
		}
	})
}
