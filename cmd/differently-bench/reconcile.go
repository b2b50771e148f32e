package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
)

const reconcilePool = "bench-reconcile"

// reserveAfterSetup is kept free of the global deadline after storing the reconcile
// pass's sandboxes: for the pass itself, reconcile.Plan and the cleanup.
const reserveAfterSetup = 20 * time.Second

type poolSource []pools.View

func (p poolSource) Views() []pools.View { return p }

// reconcile times one full Reconcile pass over -reconcile-n sandboxes, all running on
// one fake pool whose backend holds exactly their instances: the steady state, where
// the pass reads everything and has nothing to do. The sandboxes go into st through
// store.CreateSandbox; when that would not fit the time budget, fewer are stored, the
// full pass runs over those and its figures are extrapolated to -reconcile-n (said so
// in the output). reconcile.Plan alone is also timed on -reconcile-n in-memory
// sandboxes and instances.
func (b *bench) reconcile(ctx context.Context, st store.Store, res *result) error {
	f := &res.figures
	want := b.opts.reconcileN
	f.ReconcileN = want
	installation, err := st.InstallationID(ctx)
	if err != nil {
		return err
	}
	// Old enough to be settled: the pass then checks every sandbox fully.
	then := time.Now().Add(-time.Hour)

	// Plan alone, on in-memory input of the full size.
	insts := make([]adapters.Instance, 0, want)
	sbs := make(map[string]store.Sandbox, want)
	for range want {
		id, ref := ids.New("sbx"), ids.New("fake")
		insts = append(insts, adapters.Instance{Ref: ref, SandboxID: id, State: adapters.StateRunning, Region: "local"})
		sbs[id] = store.Sandbox{ID: id, Org: "default", Project: "default", State: store.StateRunning,
			Pool: reconcilePool, Region: "local", BackendRef: ref, CreatedAt: then, UpdatedAt: then, StateChangedAt: then, Version: 3}
	}
	var actions []reconcile.Action
	planD, planMiB, _ := measure(func() {
		actions = reconcile.Plan(reconcilePool, insts, sbs, reconcile.Timing{Now: time.Now(), ProvisionTimeout: 2 * time.Minute, Grace: 30 * time.Second})
	})
	if len(actions) != 0 {
		return fmt.Errorf("reconcile.Plan found %d actions in a consistent state", len(actions))
	}
	insts, sbs = nil, nil
	f.ReconcilePlanMs = round(ms(planD))
	f.ReconcilePlanMiB = round(planMiB)

	// The backend and the database, as many as the budget allows.
	setupEnd := time.Now().Add(b.opts.reconcileSetup)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-reserveAfterSetup).Before(setupEnd) {
		setupEnd = dl.Add(-reserveAfterSetup)
	}
	if time.Until(setupEnd) < time.Second {
		return fmt.Errorf("no time left to store the reconcile pass's sandboxes (%s of the deadline remain)", time.Until(setupEnd)+reserveAfterSetup)
	}
	setupCtx, cancel := context.WithDeadline(ctx, setupEnd)
	defer cancel()
	fa := fake.New(fake.Config{})
	var stored atomic.Int64
	start := time.Now()
	err = workers(setupCtx, want, b.opts.c, func(_ context.Context, i int) error {
		// The calls use ctx, not setupCtx: a budget running out stops the loop between
		// sandboxes, never halfway through one.
		id := ids.New("sbx")
		inst, err := fa.Create(ctx, adapters.CreateRequest{ID: id, Installation: installation})
		if err != nil {
			return err
		}
		if _, _, err := st.CreateSandbox(ctx, then, store.Sandbox{ID: id, Org: "default", Project: "default",
			State: store.StateRunning, Pool: reconcilePool, Region: "local", BackendRef: inst.Ref}); err != nil {
			_ = fa.Delete(ctx, inst.Ref)
			return err
		}
		stored.Add(1)
		return nil
	})
	setup := time.Since(start)
	if err != nil && (setupCtx.Err() == nil || ctx.Err() != nil) {
		return fmt.Errorf("store the reconcile pass's sandboxes: %w", err)
	}
	got := int(stored.Load())
	if got == 0 {
		return fmt.Errorf("stored no sandbox for the reconcile pass within %s", setup.Round(time.Millisecond))
	}
	f.ReconcileFullN = got
	f.ReconcileSetupS = round(setup.Seconds())
	f.ReconcileSetupPerS = round(float64(got) / setup.Seconds())

	rec := reconcile.New(st, poolSource{{
		Pool:    store.Pool{Name: reconcilePool, Adapter: fake.Kind, Trust: api.TrustPrivate, Region: "local"},
		Adapter: fa, Info: fa.Info(), Trust: api.TrustPrivate, Healthy: true,
	}}, clock.Real{}, reconcile.Options{Installation: installation, ReplicaID: "bench"})
	var rep reconcile.Report
	passD, passMiB, allocMiB := measure(func() { rep, err = rec.Reconcile(ctx) })
	if err != nil {
		return fmt.Errorf("reconcile pass: %w", err)
	}
	if len(rep.Pools) != 1 {
		return fmt.Errorf("reconcile pass reported %d pools, want 1", len(rep.Pools))
	}
	if p := rep.Pools[0]; p.Skipped != "" || len(p.OrphansDeleted)+len(p.Duplicates)+len(p.Adopted)+len(p.Requeued)+len(p.Lost)+len(p.StateChanged) > 0 {
		return fmt.Errorf("reconcile pass acted on a consistent state: %+v", p)
	}
	// The pass again over the same rows: the periodic pass's steady state. The first
	// read of freshly inserted rows also sets their hint bits, which a database that
	// has held its sandboxes for a while has done long before.
	againD, againMiB, _ := measure(func() { rep, err = rec.Reconcile(ctx) })
	if err != nil {
		return fmt.Errorf("second reconcile pass: %w", err)
	}
	f.ReconcileAgainMs = round(ms(againD))
	f.ReconcileAgainMiB = round(againMiB)
	f.ReconcileFullMs = round(ms(passD))
	f.ReconcileFullMiB = round(passMiB)
	f.ReconcileFullAllocMiB = round(allocMiB)
	scale := 1.0
	if got < want {
		scale = float64(want) / float64(got)
		f.ReconcileExtrapolated = 1
		res.note("the %s store took %.1f s to store %d of %d sandboxes (%.0f/s through store.CreateSandbox), so the full pass ran over %d and reconcile_100k_* are that pass ×%.1f; reconcile.Plan alone over %d took %v ms and %v MiB",
			b.opts.store, setup.Seconds(), got, want, float64(got)/setup.Seconds(), got, scale, want, f.ReconcilePlanMs, f.ReconcilePlanMiB)
	}
	f.Reconcile100kMs = round(ms(passD) * scale)
	f.Reconcile100kMiB = round(passMiB * scale)
	return nil
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// heapObjects is the memory held by heap objects, live or not yet swept. Reading it
// does not stop the world.
func heapObjects() uint64 {
	metrics.Read(heapSample)
	return heapSample[0].Value.Uint64()
}

// measure runs fn after a collection and returns how long it took, how far the heap
// grew above where it started at its highest (sampled every millisecond) and how
// much fn and everything running meanwhile allocated in all, in MiB.
func measure(fn func()) (time.Duration, float64, float64) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := heapObjects()
	var peak atomic.Uint64
	peak.Store(base)
	sample := func() {
		if h := heapObjects(); h > peak.Load() {
			peak.Store(h)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	})
	t0 := time.Now()
	fn()
	d := time.Since(t0)
	sample()
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&after)
	const mib = 1 << 20
	return d, float64(peak.Load()-base) / mib, float64(after.TotalAlloc-before.TotalAlloc) / mib
}
