package warm_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
	"github.com/different-ai/differently/server/warm"
)

type nopWaker struct{}

func (nopWaker) Wake(store.State) {}

type env struct {
	t     *testing.T
	st    store.Store
	clk   *clock.Manual
	pools *poolstest.Pools
	svc   *sandboxes.Service
	a     *fake.Adapter
	// observer, once set, is told of the creates a warm shape matched, as the
	// daemon tells its filler.
	observer *warm.Filler
}

var shape = store.WarmShape{Template: "python", Resources: adapters.Resources{CPU: 1}, Size: 2, MaxAgeSeconds: 60}

// newEnv is a real SQLite store and sandbox service with one fake pool keeping
// shape. No scheduler runs: tests move the warm sandboxes along as one would.
func newEnv(t *testing.T) *env {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvOn(t, st)
}

// newEnvOn is newEnv on st.
func newEnvOn(t *testing.T, st store.Store) *env {
	ctx := t.Context()
	clk := clock.NewManual(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	pool := store.Pool{Name: "alpha", Adapter: "fake", Trust: api.TrustPrivate, Warm: []store.WarmShape{shape}}
	a := fake.New(fake.Config{})
	caps, err := a.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps := poolstest.New(pools.View{Pool: pool, Adapter: a, Info: a.Info(), Capabilities: caps,
		Trust: api.TrustPrivate, Healthy: true, LastProbeAt: clk.Now()})
	e := &env{t: t, st: st, clk: clk, pools: ps, a: a}
	e.svc, err = sandboxes.New(sandboxes.Options{Store: st, Pools: ps, Waker: nopWaker{}, Clock: clk,
		WarmObserver: func(pool string, w store.WarmShape, o sandboxes.WarmOutcome, took time.Duration) {
			if e.observer != nil {
				e.observer.Observe(pool, w, o, took)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) filler() *warm.Filler {
	f, err := warm.New(warm.Options{Store: e.st, Sandboxes: e.svc, Pools: e.pools, Clock: e.clk, ReplicaID: "r1"})
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *env) pass(f *warm.Filler, want warm.Result) {
	e.t.Helper()
	got, err := f.Pass(e.t.Context())
	if err != nil || got != want {
		e.t.Fatalf("pass = %+v, %v; want %+v", got, err, want)
	}
}

// warmSandboxes lists the live warm sandboxes.
func (e *env) warmSandboxes() []store.Sandbox {
	e.t.Helper()
	var out []store.Sandbox
	err := e.st.EachSandbox(e.t.Context(), store.SandboxFilter{Org: store.WarmOrg, States: []store.State{
		store.StateQueued, store.StateProvisioning, store.StateRunning}}, func(sb store.Sandbox) error {
		out = append(out, sb)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// run makes a queued warm sandbox running, as the scheduler's Create would.
func (e *env) run(id string) {
	e.t.Helper()
	by := lifecycle.Scheduler("test")
	if _, err := e.st.UpdateSandbox(e.t.Context(), id, e.clk.Now(), func(cur *store.Sandbox) error {
		p := lifecycle.Placement{Pool: "alpha", Claimer: "test", ClaimUntil: e.clk.Now().Add(time.Minute)}
		if err := lifecycle.Place(cur, p, e.clk.Now(), by); err != nil {
			return err
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: "ref-" + id}, e.clk.Now(), 0, by)
	}); err != nil {
		e.t.Fatal(err)
	}
}

// terminated ends a terminating warm sandbox, as the scheduler's Delete would.
func (e *env) terminated(id string) {
	e.t.Helper()
	if _, err := e.st.UpdateSandbox(e.t.Context(), id, e.clk.Now(), func(cur *store.Sandbox) error {
		if cur.State != store.StateTerminating {
			return fmt.Errorf("sandbox %s is %s, not terminating", id, cur.State)
		}
		return lifecycle.Terminated(cur, "deleted", lifecycle.Scheduler("test"))
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) fail(id string) {
	e.t.Helper()
	if _, err := e.st.UpdateSandbox(e.t.Context(), id, e.clk.Now(), func(cur *store.Sandbox) error {
		return lifecycle.Fail(cur, lifecycle.Failure{Reason: "boom", Code: "sandbox_failed"}, lifecycle.Scheduler("test"))
	}); err != nil {
		e.t.Fatal(err)
	}
}

func TestFillReplaceAndRemove(t *testing.T) {
	e := newEnv(t)
	f := e.filler()
	e.pass(f, warm.Result{Created: 2})
	e.pass(f, warm.Result{}) // starting ones count
	for _, sb := range e.warmSandboxes() {
		if sb.Org != store.WarmOrg || sb.Project != store.WarmProject("alpha", shape) || sb.Template != "python" ||
			sb.TTLSeconds != 0 || len(sb.Placement.AllowedPools) != 1 || sb.Placement.AllowedPools[0] != "alpha" {
			t.Fatalf("warm sandbox %+v", sb)
		}
		e.run(sb.ID)
	}
	e.clk.Advance(59 * time.Second)
	e.pass(f, warm.Result{})
	e.clk.Advance(time.Second)
	// Aged: a replacement starts first (a surge of one for a shape of two), and the
	// oldest goes once it runs; the next, once the first is gone.
	old := e.warmSandboxes()
	e.pass(f, warm.Result{Created: 1})
	for _, sb := range e.warmSandboxes() {
		if sb.State == store.StateQueued {
			e.run(sb.ID)
		}
	}
	e.pass(f, warm.Result{Replaced: 1})
	e.terminated(old[0].ID)
	e.pass(f, warm.Result{Created: 1})
	for _, sb := range e.warmSandboxes() {
		if sb.State == store.StateQueued {
			e.run(sb.ID)
		}
	}
	e.pass(f, warm.Result{Replaced: 1})
	e.terminated(old[1].ID)
	e.pass(f, warm.Result{})
	if n := len(e.warmSandboxes()); n != 2 {
		t.Fatalf("%d live warm sandboxes after the replacement, want 2", n)
	}

	// Shrunk to one: the newest ready one goes.
	e.clk.Advance(time.Second)
	small := shape
	small.Size = 1
	e.pools.Update("alpha", func(v *pools.View) { v.Pool.Warm = []store.WarmShape{small} })
	e.pass(f, warm.Result{Removed: 1})
	// Dropped: the rest goes.
	e.pools.Update("alpha", func(v *pools.View) { v.Pool.Warm = nil })
	e.pass(f, warm.Result{Removed: 1})
	if n := len(e.warmSandboxes()); n != 0 {
		t.Fatalf("%d live warm sandboxes after the shape was dropped, want 0", n)
	}
}

// A warm sandbox that failed to start makes its shape wait before the next, twice as
// long after each further failure; one that runs ends the wait.
func TestBackoffAfterAFailure(t *testing.T) {
	e := newEnv(t)
	one := shape
	one.Size = 1
	e.pools.Update("alpha", func(v *pools.View) { v.Pool.Warm = []store.WarmShape{one} })
	f := e.filler()
	e.pass(f, warm.Result{Created: 1})
	e.fail(e.warmSandboxes()[0].ID)
	e.pass(f, warm.Result{}) // waits 2 s
	e.clk.Advance(2 * time.Second)
	e.pass(f, warm.Result{Created: 1})
	e.fail(e.warmSandboxes()[0].ID)
	e.pass(f, warm.Result{})
	e.clk.Advance(3 * time.Second)
	e.pass(f, warm.Result{}) // 4 s now
	e.clk.Advance(time.Second)
	e.pass(f, warm.Result{Created: 1})
	e.run(e.warmSandboxes()[0].ID)
	e.pass(f, warm.Result{})
}

// Two replicas filling the same shape at once never start more than its size: the
// shape's project quota refuses the one too many, whatever a replica believed.
func TestReplicasDoNotOverfill(t *testing.T) {
	e := newEnv(t)
	a, b := e.filler(), e.filler()
	var ra, rb warm.Result
	var ea, eb error
	var wg sync.WaitGroup
	wg.Go(func() { ra, ea = a.Pass(context.Background()) })
	wg.Go(func() { rb, eb = b.Pass(context.Background()) })
	wg.Wait()
	if ea != nil || eb != nil || ra.Created+rb.Created != 2 || len(e.warmSandboxes()) != 2 {
		t.Fatalf("created %d (%v) + %d (%v), %d live; want 2 in all", ra.Created, ea, rb.Created, eb, len(e.warmSandboxes()))
	}
	_, err := e.svc.CreateWarm(context.Background(), lifecycle.Warm("r3"), "alpha", shape)
	if !api.IsCode(err, api.CodeQuotaExceeded) {
		t.Fatalf("a third warm sandbox of a shape of size 2: %v, want quota_exceeded", err)
	}
}

// byState lists the warm sandboxes in state.
func (e *env) byState(state store.State) []store.Sandbox {
	e.t.Helper()
	var out []store.Sandbox
	err := e.st.EachSandbox(e.t.Context(), store.SandboxFilter{Org: store.WarmOrg, States: []store.State{state}},
		func(sb store.Sandbox) error {
			out = append(out, sb)
			return nil
		})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Sandboxes past maxAgeSeconds are replaced without a moment with fewer ready than
// the size: each replacement starts first, at most the surge at once (a quarter of
// the size, at least one, at most the pool's maxStarting), and an old one goes only
// once a newer one is ready. The scheduler's part, running what is queued and ending
// what is terminating, is done by hand between passes.
func TestReplacementOverlap(t *testing.T) {
	for _, tc := range []struct {
		name              string
		size, maxStarting int
		surge             int
	}{
		{name: "size 4", size: 4, surge: 1},
		{name: "size 8", size: 8, surge: 2},
		{name: "size 8, maxStarting 1", size: 8, maxStarting: 1, surge: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			w := shape
			w.Size = tc.size
			e.pools.Update("alpha", func(v *pools.View) { v.Pool.Warm, v.Pool.MaxStarting = []store.WarmShape{w}, tc.maxStarting })
			f := e.filler()
			e.pass(f, warm.Result{Created: tc.size})
			old := map[string]bool{}
			for _, sb := range e.warmSandboxes() {
				e.run(sb.ID)
				old[sb.ID] = true
			}
			e.clk.Advance(time.Duration(w.MaxAgeSeconds) * time.Second)

			var total warm.Result
			peak := 0
			for step := 0; ; step++ {
				if step == 10*tc.size {
					t.Fatalf("not replaced after %d passes: %+v", step, total)
				}
				got, err := f.Pass(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				total.Created += got.Created
				total.Replaced += got.Replaced
				total.Removed += got.Removed
				ready := e.byState(store.StateRunning)
				live := len(e.warmSandboxes())
				peak = max(peak, live)
				if len(ready) < tc.size || live > tc.size+tc.surge {
					t.Fatalf("pass %d: %d ready and %d live, want at least %d ready and at most %d live",
						step, len(ready), live, tc.size, tc.size+tc.surge)
				}
				stale := 0
				for _, sb := range ready {
					if old[sb.ID] {
						stale++
					}
				}
				if stale == 0 && live == tc.size {
					break
				}
				for _, sb := range e.byState(store.StateQueued) {
					e.run(sb.ID)
				}
				for _, sb := range e.byState(store.StateTerminating) {
					e.terminated(sb.ID)
				}
			}
			if total != (warm.Result{Created: tc.size, Replaced: tc.size}) || peak != tc.size+tc.surge {
				t.Fatalf("replacement did %+v with at most %d live; want %d created and replaced, %d live at most",
					total, peak, tc.size, tc.size+tc.surge)
			}
		})
	}
}

// A replacement the pool has no room to start (it stays queued) does not keep an
// aged sandbox forever: past OverlapWait the old ones are deleted regardless, and
// replaced once gone.
func TestReplacementWithoutRoom(t *testing.T) {
	e := newEnv(t)
	f, err := warm.New(warm.Options{Store: e.st, Sandboxes: e.svc, Pools: e.pools, Clock: e.clk, ReplicaID: "r1",
		OverlapWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e.pass(f, warm.Result{Created: 2})
	for _, sb := range e.warmSandboxes() {
		e.run(sb.ID)
	}
	e.clk.Advance(time.Duration(shape.MaxAgeSeconds) * time.Second)
	e.pass(f, warm.Result{Created: 1}) // queued, and stays so
	e.clk.Advance(59 * time.Second)
	e.pass(f, warm.Result{})
	e.clk.Advance(time.Second)
	e.pass(f, warm.Result{Replaced: 2})
	for _, sb := range e.byState(store.StateTerminating) {
		e.terminated(sb.ID)
	}
	e.pass(f, warm.Result{Created: 1})
	if n := len(e.byState(store.StateQueued)); n != 2 {
		t.Fatalf("%d replacements queued, want 2", n)
	}
}
