package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/lifecycle"
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
	// Interval between passes of Run (scheduler.reconcileIntervalSeconds):
	// defaults.ReconcileInterval.
	Interval time.Duration
	// ProvisionTimeout after which a provisioning sandbox is stale:
	// defaults.ProvisionTimeout.
	ProvisionTimeout time.Duration
	// AdoptMargin is added to ProvisionTimeout before a provisioning sandbox under no
	// claim is adopted or requeued: DefaultAdoptMargin. A claimed one waits for its
	// claim to lapse instead.
	AdoptMargin time.Duration
	// Grace protects recent changes from being failed or followed: 30 s.
	Grace time.Duration
	// KeepPasses is how many recorded passes the store keeps, the newest
	// (scheduler.reconcilePassesKept): defaults.ReconcilePassesKept when 0.
	KeepPasses int
	// CallTimeout bounds each List and Delete: 60 s.
	CallTimeout time.Duration
	Logger      *slog.Logger
	// Metrics receives differently_reconcile_findings_total{pool,kind},
	// differently_reconcile_passes_total{trigger} and differently_reconcile_leader;
	// nil records them nowhere. New panics when they cannot be registered (another
	// collector took their names).
	Metrics prometheus.Registerer
}

// LeaseName is the lease that makes one replica the reconciling leader.
const LeaseName = "reconciler"

// PassLeaseName is the lease held, for the duration of a pass, by whichever replica
// runs it: the leader on its ticks, or any replica asked by POST /v1/admin/reconcile.
// It is what keeps two passes from ever overlapping, so an operator can ask any
// replica for a pass. On one replica, passes also take turns through a local lock.
const PassLeaseName = "reconcile-pass"

// ErrPassRunning is in the chain of Reconcile's error, beside an invalid_state
// *api.Error, when another replica is running a pass: try again after PassRetryAfter.
var ErrPassRunning = errors.New("reconcile: a pass is running on another replica")

// PassRetryAfter is how long a caller refused with ErrPassRunning should wait. A pass
// normally takes a few List calls and writes; one that crashed holds the pass lease
// until it lapses (three intervals), and callers meet ErrPassRunning until then.
const PassRetryAfter = 5 * time.Second

// Reconciler runs reconcile passes.
type Reconciler struct {
	st    store.Store
	pools PoolSource
	clk   clock.Clock
	opts  Options
	// actor is who this replica's reconciler is in the events it records.
	actor lifecycle.Actor
	m     *recMetrics
	// turn is this replica's pass lock: a pass holds its one slot.
	turn chan struct{}
	// lastLive is how many live sandboxes the last pass read, to size the next one's.
	lastLive atomic.Int64
}

// New builds a reconciler.
func New(st store.Store, ps PoolSource, clk clock.Clock, opts Options) *Reconciler {
	if opts.ReplicaID == "" {
		opts.ReplicaID = ids.New("replica")
	}
	if opts.Interval <= 0 {
		opts.Interval = defaults.ReconcileInterval
	}
	if opts.ProvisionTimeout <= 0 {
		opts.ProvisionTimeout = defaults.ProvisionTimeout
	}
	if opts.AdoptMargin <= 0 {
		opts.AdoptMargin = DefaultAdoptMargin
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.KeepPasses <= 0 {
		opts.KeepPasses = defaults.ReconcilePassesKept
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Logger = opts.Logger.With("replica", opts.ReplicaID)
	return &Reconciler{st: st, pools: ps, clk: clk, opts: opts, actor: lifecycle.Reconciler(opts.ReplicaID),
		m: newRecMetrics(opts.Metrics), turn: make(chan struct{}, 1)}
}

// leaseTTL is how long one TryLease makes this replica the leader: three intervals,
// so a crashed leader is replaced within that time.
func (r *Reconciler) leaseTTL() time.Duration { return 3 * r.opts.Interval }

// releaseTimeout bounds giving a lease up; one not given up lapses after its TTL.
const releaseTimeout = 5 * time.Second

// passBudget is how long a pass may act after the lease was last taken or renewed:
// the lease's TTL less one interval. That interval is the safety margin of the local
// deadline (STYLE.md, leadership): for the time a store write takes to land, and for
// clock skew between replicas, which stamp the lease with their own clocks.
func (r *Reconciler) passBudget() time.Duration { return r.leaseTTL() - r.opts.Interval }

// Run reconciles every Interval while this replica holds the leader lease, until ctx
// ends. Each pass holds the lease as Reconcile describes; the lease outlives three
// intervals, so a crashed leader is replaced within that time.
func (r *Reconciler) Run(ctx context.Context) {
	ticker := time.NewTicker(r.opts.Interval)
	defer ticker.Stop()
	defer func() {
		// Hand the lease over at once on a clean stop, but never hold the stop up: a
		// database that does not answer lets the lease lapse instead.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		_ = r.st.ReleaseLease(rctx, LeaseName, r.opts.ReplicaID)
		cancel()
		r.m.leader.Set(0)
	}()
	for {
		r.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// RunOnce is one turn of Run: it takes or renews the leader lease and, when this
// replica holds it, reconciles under it and the pass lease. led says whether a pass
// ran: not when another replica leads, nor when a pass asked of another replica
// (Reconcile) holds the pass lease, in which case the leader waits for its next turn.
func (r *Reconciler) RunOnce(ctx context.Context) (rep Report, led bool, err error) {
	if err := r.lockTurn(ctx); err != nil {
		return Report{}, false, err
	}
	defer r.unlockTurn()
	l, err := r.begin(ctx, true)
	switch {
	case errors.Is(err, errNotLeader):
		return Report{}, false, nil
	case errors.Is(err, ErrPassRunning):
		r.opts.Logger.Debug("reconcile pass skipped: another replica is running one")
		return Report{}, false, nil
	case err != nil:
		if ctx.Err() == nil {
			r.opts.Logger.Warn("reconciler lease", "error", err)
		}
		return Report{}, false, err
	}
	started := r.clk.Now()
	rep, err = r.reconcile(ctx, l)
	r.endPass(ctx, l, triggerInterval, passRecord{started: started, report: rep, err: err})
	if err != nil && ctx.Err() == nil {
		r.opts.Logger.Warn("reconcile pass failed", "error", err)
	}
	// After endPass: whoever a log line wakes finds this pass counted.
	r.opts.Logger.Debug("reconcile pass", rep.logAttrs()...)
	return rep, true, err
}

// Reconcile runs one pass now (POST /v1/admin/reconcile) and reports what it found
// and did. It may run on any replica, leader or not, but never beside another pass:
// it waits for a pass running on this replica, and holds the pass lease for its own
// duration, with the same local deadline and renewals as the leader's passes. When
// another replica holds the pass lease it runs nothing and fails with an
// invalid_state error wrapping ErrPassRunning. A replica that holds the leader lease,
// or can take it, renews or takes it too, as Run would.
//
// The pass is recorded as asked for by no token; ReconcileBy names the token.
func (r *Reconciler) Reconcile(ctx context.Context) (Report, error) { return r.ReconcileBy(ctx, "") }

// ReconcileBy is Reconcile asked for by token tokenID, which is recorded with the pass.
func (r *Reconciler) ReconcileBy(ctx context.Context, tokenID string) (rep Report, err error) {
	if err := r.lockTurn(ctx); err != nil {
		return Report{}, err
	}
	defer r.unlockTurn()
	l, err := r.begin(ctx, false)
	if errors.Is(err, ErrPassRunning) {
		e := api.Errorf(api.CodeInvalidState, "a reconcile pass is running on another replica; try again in %d s", int(PassRetryAfter/time.Second)).
			WithDetail("retryAfterSeconds", int(PassRetryAfter/time.Second))
		return Report{}, fmt.Errorf("%w: %w", e, ErrPassRunning)
	}
	if err != nil {
		return Report{}, err
	}
	started := r.clk.Now()
	defer func() {
		r.endPass(ctx, l, triggerRequest, passRecord{started: started, tokenID: tokenID, report: rep, err: err})
	}()
	return r.reconcile(ctx, l)
}

// passRecord is what endPass records of a pass that ran.
type passRecord struct {
	started time.Time
	tokenID string
	report  Report
	err     error
}

// endPass records the pass, gives the pass lease up and then counts the pass, so
// that whoever sees differently_reconcile_passes_total rise (a caller refused with
// ErrPassRunning, waiting to ask again) finds the pass lease free and the pass
// recorded. The record is written under the pass lease, so recorded passes are in
// the order they ran, whichever replica ran them.
func (r *Reconciler) endPass(ctx context.Context, l *lease, trigger string, rec passRecord) {
	r.recordPass(ctx, trigger, rec)
	l.end(ctx)
	r.m.passes.WithLabelValues(trigger).Inc()
}

// recordPass stores the pass for GET /v1/admin/reconcile/passes. A record that
// fails is logged and lost: the pass itself did its work, and the next is recorded.
func (r *Reconciler) recordPass(ctx context.Context, trigger string, rec passRecord) {
	p := store.ReconcilePass{StartedAt: rec.started, EndedAt: r.clk.Now(), Replica: r.opts.ReplicaID,
		Trigger: store.TriggerPeriodic, Pools: rec.report.Pools}
	if p.EndedAt.Before(p.StartedAt) {
		// A wall clock stepped back during the pass: the record still goes in.
		p.EndedAt = p.StartedAt
	}
	if trigger == triggerRequest {
		p.Trigger, p.TokenID = store.TriggerOnDemand, rec.tokenID
	}
	if rec.err != nil {
		p.Error = rec.err.Error()
	}
	// A pass cut short by its caller or a shutdown is still recorded.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := r.st.RecordReconcilePass(wctx, p, r.opts.KeepPasses); err != nil {
		r.opts.Logger.Warn("reconcile pass not recorded", "error", err)
	}
}

func (r *Reconciler) lockTurn(ctx context.Context) error {
	select {
	case r.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reconciler) unlockTurn() { <-r.turn }

// errLeadership stops a pass whose lease was lost or whose local deadline passed.
var errLeadership = errors.New("reconciler: leadership lost or the pass outlived its deadline")

// errNotLeader is begin's answer, for Run, when another replica leads.
var errNotLeader = errors.New("reconciler: another replica leads")

// lease is what one pass holds: the pass lease, and the leader lease when this
// replica leads. Its deadline, by the injected clock, is passBudget after the last
// successful TryLease and so always before either lease's expiry; ctx carries the
// same deadline in real time and bounds every call of the pass.
type lease struct {
	r        *Reconciler
	names    []string
	deadline time.Time
	timer    *time.Timer
	cancel   context.CancelCauseFunc
}

// begin starts a pass. It takes or renews the leader lease, setting the leader gauge
// by the outcome; with needLeader, losing it is errNotLeader. Then it takes the pass
// lease, or answers ErrPassRunning when another replica holds it.
func (r *Reconciler) begin(ctx context.Context, needLeader bool) (*lease, error) {
	now := r.clk.Now()
	leads, err := r.st.TryLease(ctx, LeaseName, r.opts.ReplicaID, now, r.leaseTTL())
	if err != nil || !leads {
		r.m.leader.Set(0)
		if err != nil {
			return nil, err
		}
		if needLeader {
			return nil, errNotLeader
		}
	} else {
		r.m.leader.Set(1)
	}
	free, err := r.st.TryLease(ctx, PassLeaseName, r.opts.ReplicaID, now, r.leaseTTL())
	if err != nil {
		return nil, err
	}
	if !free {
		return nil, ErrPassRunning
	}
	l := &lease{r: r, names: []string{PassLeaseName}, deadline: now.Add(r.passBudget())}
	if leads {
		l.names = append(l.names, LeaseName)
	}
	return l, nil
}

// end gives the pass lease up, so that the next pass, here or on another replica,
// need not wait for it to lapse. The leader lease stays: Run renews it.
func (l *lease) end(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.r.st.ReleaseLease(rctx, PassLeaseName, l.r.opts.ReplicaID); err != nil {
		l.r.opts.Logger.Warn("reconcile pass lease not released; it lapses on its own", "error", err)
	}
}

// bind returns ctx bounded by the lease's deadline; release stops the timer.
func (l *lease) bind(ctx context.Context) (context.Context, func()) {
	if l == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	l.cancel = cancel
	l.timer = time.AfterFunc(l.deadline.Sub(l.r.clk.Now()), func() { cancel(errLeadership) })
	return ctx, func() {
		l.timer.Stop()
		cancel(context.Canceled)
	}
}

// valid reports whether the pass may still act: the local deadline has not passed
// and ctx is alive. It costs no query; call it before every action.
func (l *lease) valid(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if l != nil && !l.r.clk.Now().Before(l.deadline) {
		// Past the deadline this replica no longer counts itself leader; the next
		// turn of Run takes the lease afresh.
		l.r.m.leader.Set(0)
		l.cancel(errLeadership)
		return errLeadership
	}
	return nil
}

// renew confirms every lease the pass holds in the store before a batch of actions,
// and moves the deadline on. A lost lease stops the pass: another replica leads, or
// runs a pass, now.
func (l *lease) renew(ctx context.Context) error {
	if l == nil {
		return nil
	}
	if err := l.valid(ctx); err != nil {
		return err
	}
	now := l.r.clk.Now()
	for _, name := range l.names {
		won, err := l.r.st.TryLease(ctx, name, l.r.opts.ReplicaID, now, l.r.leaseTTL())
		if err != nil || !won {
			if name == LeaseName {
				l.r.m.leader.Set(0)
			}
			l.cancel(errLeadership)
			if err == nil {
				err = errLeadership
			}
			return err
		}
	}
	l.deadline = now.Add(l.r.passBudget())
	l.timer.Reset(l.r.passBudget())
	return l.valid(ctx)
}

// reconcile runs one pass over every pool. A pool whose List fails is skipped for the
// pass: acting on a partial view would delete real instances or fail live
// sandboxes. Under a lease (l non-nil) the pass renews its leases before acting on each pool
// and checks its local deadline before each action; once either fails the pass stops
// and the pools it did not reach are reported skipped.
func (r *Reconciler) reconcile(ctx context.Context, l *lease) (Report, error) {
	ctx, release := l.bind(ctx)
	defer release()
	views := r.pools.Views()
	report := Report{Pools: make([]PoolReport, 0, len(views))}
	type poolList struct {
		view     pools.View
		insts    []adapters.Instance
		listedAt time.Time
	}
	var lists []poolList
	for _, v := range views {
		pr := PoolReport{Pool: v.Pool.Name}
		if v.Adapter == nil {
			pr.Skipped = "no adapter: " + v.LastError
			r.skipped(&report, pr)
			continue
		}
		listedAt := r.clk.Now()
		callCtx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
		insts, err := v.Adapter.List(callCtx, r.opts.Installation)
		cancel()
		if err != nil {
			pr.Skipped = "list failed: " + err.Error()
			r.skipped(&report, pr)
			continue
		}
		lists = append(lists, poolList{view: v, insts: insts, listedAt: listedAt})
	}
	// Read the sandboxes after every List: see Plan.
	sandboxes, err := r.liveSandboxes(ctx)
	if err != nil {
		return report, err
	}
	now := r.clk.Now()
	timing := Timing{Now: now, ProvisionTimeout: r.opts.ProvisionTimeout, AdoptMargin: r.opts.AdoptMargin, Grace: r.opts.Grace}
	for i, pl := range lists {
		pool := pl.view.Pool.Name
		timing.ListedAt = pl.listedAt
		actions := Plan(pool, pl.insts, sandboxes, timing)
		if len(actions) > 0 {
			if err := l.renew(ctx); err != nil {
				for _, rest := range lists[i:] {
					r.skipped(&report, PoolReport{Pool: rest.view.Pool.Name, Skipped: "pass stopped: " + err.Error()})
				}
				r.opts.Logger.Warn("reconcile pass stopped", "pool", pool, "error", err)
				return report, err
			}
		}
		pr := PoolReport{Pool: pool}
		for _, a := range actions {
			if err := l.valid(ctx); err != nil {
				report.Pools = append(report.Pools, pr)
				for _, rest := range lists[i+1:] {
					r.skipped(&report, PoolReport{Pool: rest.view.Pool.Name, Skipped: "pass stopped: " + err.Error()})
				}
				r.opts.Logger.Warn("reconcile pass stopped", "pool", pool, "error", err)
				return report, err
			}
			done, err := r.apply(ctx, pl.view, a, sandboxes[a.SandboxID])
			if err != nil {
				r.opts.Logger.Warn("reconcile action failed", "pool", pool, "sandbox", a.SandboxID,
					"action", a.Kind, "ref", a.Ref, "error", err)
				// One failed action is the report's to tell, not the pass's: the others
				// went ahead and the operator must see what they did.
				pr.Errors = append(pr.Errors, fmt.Sprintf("%s %s (sandbox %s): %s", a.Kind, a.Ref, orNone(a.SandboxID), err))
				continue
			}
			if done {
				record(&pr, a)
				r.m.finding(pool, a.Kind)
			}
		}
		report.Pools = append(report.Pools, pr)
	}
	return report, nil
}

func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// skipped adds a pool left alone this pass to the report and the metrics.
func (r *Reconciler) skipped(report *Report, pr PoolReport) {
	report.Pools = append(report.Pools, pr)
	r.m.findings.WithLabelValues(pr.Pool, kindSkipped).Inc()
}

func (r *Reconciler) liveSandboxes(ctx context.Context) (map[string]store.Sandbox, error) {
	// Sized for as many as the last pass found: growing a map of 100,000 rehashes it
	// a dozen times.
	out := make(map[string]store.Sandbox, r.lastLive.Load())
	err := r.st.EachSandbox(ctx, store.SandboxFilter{States: store.NonTerminalStates}, func(sb store.Sandbox) error {
		out[sb.ID] = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.lastLive.Store(int64(len(out)))
	return out, nil
}

var errChanged = errors.New("sandbox changed since the plan was made")

// adoptedWhy is the message of an adoption's event.
const adoptedWhy = "its instance was found on the backend although no Create recorded it"

// apply carries out one action. It reports false when the action no longer applies
// (the sandbox changed meanwhile), which is not an error.
func (r *Reconciler) apply(ctx context.Context, v pools.View, a Action, planned store.Sandbox) (bool, error) {
	switch a.Kind {
	case DeleteOrphan, DeleteDuplicate:
		callCtx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
		defer cancel()
		if err := adapters.DeleteInstance(callCtx, v.Adapter, a.Ref); err != nil {
			return false, err
		}
		r.opts.Logger.Info("reconcile deleted instance", "sandbox", a.SandboxID, "pool", v.Pool.Name, "ref", a.Ref, "action", a.Kind, "why", a.Reason)
		return true, nil
	case Lost:
		// A List that missed an instance (a backend paging while sandboxes come and
		// go) must not cost its sandbox: the loss stands only when the backend, asked
		// for the instance itself, does not have it.
		callCtx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
		_, err := v.Adapter.Get(callCtx, a.Ref)
		cancel()
		switch {
		case err == nil:
			return false, fmt.Errorf("the pool's List did not report instance %s, which the backend still has: the sandbox is left as it is", a.Ref)
		case !api.IsCode(err, api.CodeNotFound):
			return false, fmt.Errorf("confirm the loss of instance %s: %w", a.Ref, err)
		}
	}
	now := r.clk.Now()
	_, err := r.st.UpdateSandbox(ctx, a.SandboxID, now, func(sb *store.Sandbox) error {
		if sb.Version != planned.Version {
			return errChanged
		}
		switch a.Kind {
		case Adopt:
			return lifecycle.Adopt(sb, lifecycle.Instance{Ref: a.Ref, Region: a.Region}, now, adoptedWhy, r.actor)
		case Requeue:
			return lifecycle.Requeue(sb, lifecycle.Retry{Reason: a.Reason, At: now}, r.actor)
		case Lost:
			return lifecycle.Fail(sb, lifecycle.Failure{Reason: a.Reason, Code: string(api.CodeNotFound)}, r.actor)
		case Follow:
			if a.State == store.StateFailed {
				return lifecycle.Fail(sb, lifecycle.Failure{Reason: a.Reason, Code: string(api.CodeSandboxFailed)}, r.actor)
			}
			return lifecycle.Observe(sb, a.State, a.Reason, r.actor)
		}
		return nil
	})
	switch {
	case errors.Is(err, errChanged), api.IsCode(err, api.CodeNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	r.opts.Logger.Info("reconcile changed sandbox", "sandbox", a.SandboxID, "pool", v.Pool.Name, "action", a.Kind, "ref", a.Ref, "why", a.Reason)
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
