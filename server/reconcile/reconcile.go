package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// PoolSource gives the pools to reconcile.
type PoolSource interface {
	Views() []pools.View
}

// Options tune the reconciler. Zero values take the defaults of the specification.
type Options struct {
	// Installation is the ID List filters by. Required.
	Installation string
	// ReplicaID holds the leader lease; a random one when empty.
	ReplicaID string
	// Interval between passes of Run (scheduler.reconcileIntervalSeconds): 30 s.
	Interval time.Duration
	// ProvisionTimeout after which a provisioning sandbox is stale: 120 s.
	ProvisionTimeout time.Duration
	// Grace protects recent changes from being failed or followed: 30 s.
	Grace time.Duration
	// CallTimeout bounds each List and Delete: 60 s.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// LeaseName is the lease that makes one replica the reconciling leader.
const LeaseName = "reconciler"

// Reconciler runs reconcile passes.
type Reconciler struct {
	st    store.Store
	pools PoolSource
	clk   clock.Clock
	opts  Options
}

// New builds a reconciler.
func New(st store.Store, ps PoolSource, clk clock.Clock, opts Options) *Reconciler {
	if opts.ReplicaID == "" {
		opts.ReplicaID = ids.New("replica")
	}
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	if opts.ProvisionTimeout <= 0 {
		opts.ProvisionTimeout = 120 * time.Second
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Logger = opts.Logger.With("replica", opts.ReplicaID)
	return &Reconciler{st: st, pools: ps, clk: clk, opts: opts}
}

// Run reconciles every Interval while this replica holds the leader lease, until ctx
// ends. The lease outlives three intervals, so a crashed leader is replaced within
// that time.
func (r *Reconciler) Run(ctx context.Context) {
	ticker := time.NewTicker(r.opts.Interval)
	defer ticker.Stop()
	defer func() {
		// Hand the lease over at once on a clean stop.
		_ = r.st.ReleaseLease(context.WithoutCancel(ctx), LeaseName, r.opts.ReplicaID)
	}()
	for {
		leader, err := r.st.TryLease(ctx, LeaseName, r.opts.ReplicaID, r.clk.Now(), 3*r.opts.Interval)
		if err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("reconciler lease", "err", err)
		}
		if leader {
			rep, err := r.Reconcile(ctx)
			if err != nil && ctx.Err() == nil {
				r.opts.Logger.Warn("reconcile pass failed", "err", err)
			}
			// One line per pass of the leader: tests that run the daemon as a child
			// process wait on it (and learn who leads) instead of sleeping.
			r.opts.Logger.Debug("reconcile pass", rep.logAttrs()...)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Reconcile runs one pass over every pool and reports what it found and did. A pool
// whose List fails is skipped for the pass: acting on a partial view would delete
// real instances or fail live sandboxes.
func (r *Reconciler) Reconcile(ctx context.Context) (Report, error) {
	views := r.pools.Views()
	report := Report{Pools: make([]PoolReport, 0, len(views))}
	type poolList struct {
		view  pools.View
		insts []adapters.Instance
	}
	var lists []poolList
	for _, v := range views {
		pr := PoolReport{Pool: v.Pool.Name}
		if v.Adapter == nil {
			pr.Skipped = "no adapter: " + v.LastError
			report.Pools = append(report.Pools, pr)
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
		insts, err := v.Adapter.List(callCtx, r.opts.Installation)
		cancel()
		if err != nil {
			pr.Skipped = "list failed: " + err.Error()
			report.Pools = append(report.Pools, pr)
			continue
		}
		lists = append(lists, poolList{view: v, insts: insts})
	}
	// Read the sandboxes after every List: see Plan.
	sandboxes, err := r.liveSandboxes(ctx)
	if err != nil {
		return report, err
	}
	now := r.clk.Now()
	timing := Timing{Now: now, ProvisionTimeout: r.opts.ProvisionTimeout, Grace: r.opts.Grace}
	var errs []error
	for _, pl := range lists {
		pr := PoolReport{Pool: pl.view.Pool.Name}
		for _, a := range Plan(pl.view.Pool.Name, pl.insts, sandboxes, timing) {
			done, err := r.apply(ctx, pl.view, a, sandboxes[a.SandboxID])
			if err != nil {
				errs = append(errs, fmt.Errorf("pool %s: %s %s: %w", pl.view.Pool.Name, a.Kind, a.Ref, err))
				continue
			}
			if done {
				record(&pr, a)
			}
		}
		report.Pools = append(report.Pools, pr)
	}
	return report, errors.Join(errs...)
}

func (r *Reconciler) liveSandboxes(ctx context.Context) (map[string]store.Sandbox, error) {
	out := map[string]store.Sandbox{}
	filter := store.SandboxFilter{States: store.NonTerminalStates, Limit: store.MaxLimit}
	for {
		page, next, err := r.st.ListSandboxes(ctx, filter)
		if err != nil {
			return nil, err
		}
		for _, sb := range page {
			out[sb.ID] = sb
		}
		if next == "" {
			return out, nil
		}
		filter.Cursor = next
	}
}

var errChanged = errors.New("sandbox changed since the plan was made")

// apply carries out one action. It reports false when the action no longer applies
// (the sandbox changed meanwhile), which is not an error.
func (r *Reconciler) apply(ctx context.Context, v pools.View, a Action, planned store.Sandbox) (bool, error) {
	switch a.Kind {
	case DeleteOrphan, DeleteDuplicate:
		callCtx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
		defer cancel()
		if err := v.Adapter.Delete(callCtx, a.Ref); err != nil && !api.IsCode(err, api.CodeNotFound) {
			return false, err
		}
		r.opts.Logger.Info("reconcile deleted instance", "pool", v.Pool.Name, "ref", a.Ref, "sandbox", a.SandboxID, "why", a.Reason)
		return true, nil
	}
	now := r.clk.Now()
	_, err := r.st.UpdateSandbox(ctx, a.SandboxID, now, func(sb *store.Sandbox) error {
		if sb.Version != planned.Version {
			return errChanged
		}
		switch a.Kind {
		case Adopt:
			sb.State, sb.BackendRef, sb.Reason = store.StateRunning, a.Ref, ""
			sb.ClaimedBy, sb.ClaimExpiresAt = "", nil
			if sb.TTLSeconds > 0 {
				exp := now.Add(time.Duration(sb.TTLSeconds) * time.Second)
				sb.ExpiresAt = &exp
			}
		case Requeue:
			sb.State, sb.Reason, sb.NextAttemptAt = store.StateQueued, a.Reason, now
			sb.ClaimedBy, sb.ClaimExpiresAt = "", nil
			// Placed afresh, as the scheduler requeues: a queued sandbox that kept its
			// pool would count against that pool's maxConcurrency while it waits.
			sb.Pool, sb.Region = "", ""
		case Lost:
			sb.State, sb.Reason = store.StateFailed, a.Reason
		case Follow:
			sb.State, sb.Reason = a.State, a.Reason
		}
		return nil
	})
	switch {
	case errors.Is(err, errChanged), api.IsCode(err, api.CodeNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	r.opts.Logger.Info("reconcile changed sandbox", "pool", v.Pool.Name, "sandbox", a.SandboxID, "action", a.Kind, "why", a.Reason)
	return true, nil
}

func record(pr *PoolReport, a Action) {
	switch a.Kind {
	case DeleteOrphan:
		pr.OrphansDeleted = append(pr.OrphansDeleted, a.Ref)
	case DeleteDuplicate:
		pr.Duplicates = append(pr.Duplicates, a.Ref)
	case Adopt:
		pr.Adopted = append(pr.Adopted, a.SandboxID)
	case Requeue:
		pr.Requeued = append(pr.Requeued, a.SandboxID)
	case Lost:
		pr.Lost = append(pr.Lost, a.SandboxID)
	case Follow:
		pr.StateChanged = append(pr.StateChanged, a.SandboxID)
	}
}
