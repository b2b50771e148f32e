package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// gatedList holds the next List after gate until the test lets it go: a slow
// backend, during which the test asks the other replica for a pass. It also counts
// how many Lists ever ran at once.
type gatedList struct {
	*fake.Adapter
	entered chan struct{}

	mu        sync.Mutex
	hold      chan struct{}
	calls     int
	active    int
	maxActive int
}

func (g *gatedList) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	g.mu.Lock()
	g.calls++
	g.active++
	g.maxActive = max(g.maxActive, g.active)
	hold := g.hold
	g.hold = nil
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.active--
		g.mu.Unlock()
	}()
	if hold != nil {
		g.entered <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Adapter.List(ctx, installation)
}

// gate makes the next List wait; the returned func lets it go.
func (g *gatedList) gate() func() {
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	return func() { close(hold) }
}

func (g *gatedList) stats() (calls, maxActive int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, g.maxActive
}

// twoReplicas is two reconcilers, as on two daemons, each with its own connection to
// one PostgreSQL database, reconciling one shared backend.
type twoReplicas struct {
	r1, r2 *reconcile.Reconciler
	a      *gatedList
	clk    *clock.Manual
}

func newTwoReplicas(t *testing.T) *twoReplicas {
	t.Helper()
	url := pgtest.SchemaURL(t)
	e := &twoReplicas{
		a:   &gatedList{Adapter: fake.New(fake.Config{}), entered: make(chan struct{}, 4)},
		clk: clock.NewManual(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)),
	}
	views := poolstest.New(pools.View{Pool: store.Pool{Name: "p", Adapter: "fake"}, Adapter: e.a, Healthy: true})
	for _, id := range []string{"r1", "r2"} {
		st, err := postgres.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		r := reconcile.New(st, views, e.clk, reconcile.Options{Installation: installation, ReplicaID: id, Interval: interval})
		if id == "r1" {
			e.r1 = r
		} else {
			e.r2 = r
		}
	}
	return e
}

func (e *twoReplicas) orphan(t *testing.T, id string) adapters.Instance {
	t.Helper()
	inst, err := e.a.Create(t.Context(), adapters.CreateRequest{ID: id, Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

type passResult struct {
	rep reconcile.Report
	led bool
	err error
}

func wantPassRunning(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, reconcile.ErrPassRunning) || !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("Reconcile = %v, want invalid_state wrapping ErrPassRunning", err)
	}
}

// An operator may ask any replica for a pass, but two passes never overlap: while
// the leader's pass runs, the other replica refuses; while the other replica's pass
// runs, the leader skips its turn. Each deletes the orphans it finds only under the
// pass lease.
func TestPassesNeverOverlapAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	e := newTwoReplicas(t)

	// r1 leads, and its pass is in its List.
	first := e.orphan(t, "sbx_orphan1")
	release := e.a.gate()
	done := make(chan passResult, 1)
	go func() {
		rep, led, err := e.r1.RunOnce(ctx)
		done <- passResult{rep, led, err}
	}()
	<-e.a.entered
	_, err := e.r2.Reconcile(ctx)
	wantPassRunning(t, err)
	if _, led, err := e.r2.RunOnce(ctx); led || err != nil {
		t.Fatalf("r2.RunOnce while r1 leads: led %v, err %v", led, err)
	}
	release()
	res := <-done
	if !res.led || res.err != nil || !slices.Equal(res.rep.Pools[0].OrphansDeleted, []string{first.Ref}) {
		t.Fatalf("r1's pass: led %v, err %v, report %+v", res.led, res.err, res.rep)
	}

	// r2 does not lead, but an operator asks it for a pass: it runs, and the
	// leader's turn meanwhile runs nothing.
	second := e.orphan(t, "sbx_orphan2")
	release = e.a.gate()
	adminDone := make(chan passResult, 1)
	go func() {
		rep, err := e.r2.Reconcile(ctx)
		adminDone <- passResult{rep: rep, err: err}
	}()
	<-e.a.entered
	if rep, led, err := e.r1.RunOnce(ctx); led || err != nil || len(rep.Pools) != 0 {
		t.Fatalf("r1.RunOnce during r2's pass: led %v, err %v, report %+v", led, err, rep)
	}
	_, err = e.r1.Reconcile(ctx)
	wantPassRunning(t, err)
	release()
	res = <-adminDone
	if res.err != nil || !slices.Equal(res.rep.Pools[0].OrphansDeleted, []string{second.Ref}) {
		t.Fatalf("r2's pass: err %v, report %+v", res.err, res.rep)
	}

	// r2 gave the pass lease up: the leader's next turn runs.
	if _, led, err := e.r1.RunOnce(ctx); !led || err != nil {
		t.Fatalf("r1.RunOnce after r2's pass: led %v, err %v", led, err)
	}
	if calls, maxActive := e.a.stats(); calls != 3 || maxActive != 1 {
		t.Fatalf("%d Lists, at most %d at once; want 3, one at a time", calls, maxActive)
	}
}

// On one replica, a pass asked for while the leader's own pass runs waits its turn
// instead of being refused.
func TestPassesTakeTurnsOnOneReplica(t *testing.T) {
	ctx := t.Context()
	e := newTwoReplicas(t)
	release := e.a.gate()
	done := make(chan passResult, 2)
	go func() {
		_, led, err := e.r1.RunOnce(ctx)
		done <- passResult{led: led, err: err}
	}()
	<-e.a.entered
	go func() {
		_, err := e.r1.Reconcile(ctx)
		done <- passResult{led: true, err: err}
	}()
	release()
	for range 2 {
		if res := <-done; !res.led || res.err != nil {
			t.Fatalf("pass: led %v, err %v", res.led, res.err)
		}
	}
	if calls, maxActive := e.a.stats(); calls != 2 || maxActive != 1 {
		t.Fatalf("%d Lists, at most %d at once; want 2, one at a time", calls, maxActive)
	}
}

// A replica stuck in a pass (or dead) leaves the pass lease behind; passes resume
// once it lapses, three intervals later, and the stuck pass, should it wake, finds
// its leases gone and acts on nothing.
func TestAbandonedPassLeaseLapses(t *testing.T) {
	ctx := t.Context()
	e := newTwoReplicas(t)
	orphan := e.orphan(t, "sbx_orphan")
	release := e.a.gate()
	stuck := make(chan passResult, 1)
	go func() {
		rep, err := e.r2.Reconcile(ctx)
		stuck <- passResult{rep: rep, err: err}
	}()
	<-e.a.entered
	if _, led, err := e.r1.RunOnce(ctx); led || err != nil {
		t.Fatalf("r1.RunOnce while r2's pass holds the leases: led %v, err %v", led, err)
	}
	e.clk.Advance(3 * interval)
	rep, led, err := e.r1.RunOnce(ctx)
	if !led || err != nil || !slices.Equal(rep.Pools[0].OrphansDeleted, []string{orphan.Ref}) {
		t.Fatalf("r1.RunOnce after r2's leases lapsed: led %v, err %v, report %+v", led, err, rep)
	}
	late := e.orphan(t, "sbx_orphan_late")
	release()
	if res := <-stuck; res.err == nil || len(res.rep.Pools[0].OrphansDeleted) != 0 {
		t.Fatalf("the stuck pass went on: err %v, report %+v", res.err, res.rep)
	}
	if _, err := e.a.Get(ctx, late.Ref); err != nil {
		t.Fatalf("the stuck pass deleted %s: %v", late.Ref, err)
	}
}
