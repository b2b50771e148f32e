// Package warm keeps each pool's warm sandboxes: for every shape a pool declares
// (store.WarmShape), that many sandboxes started ahead of demand, so that a create
// asking for exactly that shape is given one at once (server/sandboxes claims it).
//
// A warm sandbox is an ordinary sandbox of the warm pseudo-tenant (store.WarmOrg), in
// a project of its own per pool and shape whose quota is the shape's size. So it is
// provisioned by the scheduler with the same retries and error-code reactions as any
// other, counts against its pool's capacity and maxConcurrency (never against a
// tenant's quota), is reconciled like any other, and replicas refilling at once can
// never start more than the size (plus the surge while aged ones are replaced, see
// fill): admission refuses the one too many. A claim takes the sandbox over under
// its own ID, in one transaction, so nothing is ever bound twice and a crash
// between claim and bind cannot happen: there is no second step.
//
// The Filler, one per replica, compares what each shape has with what it should have
// and creates, replaces (after maxAgeSeconds, the replacement started first) and
// removes (a shape shrunk or dropped, its pool deleted) warm sandboxes. After a warm sandbox fails to start, its shape's
// next creates wait, twice as long after each further failure.
package warm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// Store is what the Filler reads and writes directly.
type Store interface {
	EachSandbox(ctx context.Context, f store.SandboxFilter, fn func(store.Sandbox) error) error
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	GetProject(ctx context.Context, org, name string) (store.Project, error)
	PutProject(ctx context.Context, now time.Time, p store.Project) (store.Project, error)
	AddWarmStats(ctx context.Context, deltas []store.WarmStats) error
}

// Sandboxes creates and deletes warm sandboxes (server/sandboxes.Service).
type Sandboxes interface {
	CreateWarm(ctx context.Context, by lifecycle.Actor, pool string, w store.WarmShape) (store.Sandbox, error)
	DeleteWarm(ctx context.Context, by lifecycle.Actor, id, reason string) error
}

// Pools lists the pools and their warm shapes.
type Pools interface {
	Views() []pools.View
}

// Defaults.
const (
	// DefaultInterval is how often a Filler looks when nothing wakes it.
	DefaultInterval = 2 * time.Second
	// DefaultSettle lets a burst of claims through before the refills start: a
	// fraction of any backend's start, which the refills wait for anyway.
	DefaultSettle = 20 * time.Millisecond
	// DefaultOverlapWait is a provision timeout: a replacement that has not run by
	// then is waiting for room the pool does not have.
	DefaultOverlapWait = defaults.ProvisionTimeout
	// backoffBase and backoffMax bound the wait after a warm sandbox failed to start.
	backoffBase = 2 * time.Second
	backoffMax  = 5 * time.Minute
)

// Options configure a Filler.
type Options struct {
	Store     Store
	Sandboxes Sandboxes
	Pools     Pools
	Clock     clock.Clock
	// ReplicaID names the replica in the events of what the Filler does.
	ReplicaID string
	// Interval is how often Run passes when nothing wakes it; DefaultInterval when 0.
	Interval time.Duration
	// Settle is how long Run waits after a wake-up before it passes;
	// DefaultSettle when 0.
	Settle time.Duration
	// OverlapWait is how long past its maxAgeSeconds a warm sandbox waits for its
	// replacement to be ready before it is deleted regardless;
	// DefaultOverlapWait when 0.
	OverlapWait time.Duration
	Logger      *slog.Logger
	// Metrics receives the warm-pool metrics; nil registers none.
	Metrics prometheus.Registerer
}

// Filler keeps every pool's warm shapes filled.
type Filler struct {
	st       Store
	svc      Sandboxes
	pools    Pools
	clk      clock.Clock
	actor    lifecycle.Actor
	interval time.Duration
	// overlapWait and settle: Options.OverlapWait and Settle.
	overlapWait, settle time.Duration
	log                 *slog.Logger
	m                   *warmMetrics
	wake                chan struct{}

	// Only Pass, which one goroutine at a time runs, uses these.
	// quotas caches the quota put on each shape's project.
	quotas map[string]int
	// started are the warm sandboxes this replica created and has not yet seen
	// running or gone, by ID, with their project.
	started map[string]string
	// backoff is per project: after a failure, no create before until.
	backoff map[string]backoff
	passMu  sync.Mutex

	// stats are the counts Observe took since the last flush, by pool and shape key.
	stats   map[statsKey]*store.WarmStats
	statsMu sync.Mutex
}

type statsKey struct{ pool, shape string }

type backoff struct {
	failures int
	until    time.Time
}

// New builds a Filler.
func New(opts Options) (*Filler, error) {
	if opts.Store == nil || opts.Sandboxes == nil || opts.Pools == nil || opts.Clock == nil {
		return nil, errors.New("warm: Store, Sandboxes, Pools and Clock are required")
	}
	f := &Filler{
		st: opts.Store, svc: opts.Sandboxes, pools: opts.Pools, clk: opts.Clock,
		actor: lifecycle.Warm(opts.ReplicaID), interval: opts.Interval, log: opts.Logger,
		wake:   make(chan struct{}, 1),
		quotas: map[string]int{}, started: map[string]string{}, backoff: map[string]backoff{},
		stats: map[statsKey]*store.WarmStats{},
	}
	if f.interval <= 0 {
		f.interval = DefaultInterval
	}
	f.settle = opts.Settle
	if f.settle <= 0 {
		f.settle = DefaultSettle
	}
	f.overlapWait = opts.OverlapWait
	if f.overlapWait <= 0 {
		f.overlapWait = DefaultOverlapWait
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	f.m = m
	return f, nil
}

// Wake makes Run pass at once: a create took a warm sandbox, a pool changed.
func (f *Filler) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Observe records a create a warm shape matched (sandboxes.Options.WarmObserver):
// in the metrics at once, and in the store's counts (store.WarmStats) at the next
// pass.
func (f *Filler) Observe(pool string, w store.WarmShape, o sandboxes.WarmOutcome, took time.Duration) {
	key := w.Key()
	hit := o == sandboxes.WarmHit
	f.m.claims.WithLabelValues(pool, key, string(o)).Inc()
	if hit {
		f.m.claimSeconds.WithLabelValues(pool, key).Observe(took.Seconds())
	}
	f.statsMu.Lock()
	defer f.statsMu.Unlock()
	id := statsKey{pool, key}
	st := f.stats[id]
	if st == nil {
		st = &store.WarmStats{Pool: pool, Shape: key}
		f.stats[id] = st
	}
	st.Observe(hit, took)
}

// Flush adds the counts observed since the last flush to the store's, as each pass
// does first. The daemon calls it once more when its last requests have ended and
// Run has returned, so that the claims made while it drained are counted too.
// Counts the store did not take are kept for the next: an error that came after
// the store had committed them (a lost answer) counts them twice, which is rarer
// and smaller than losing every error's counts.
func (f *Filler) Flush(ctx context.Context) error {
	f.statsMu.Lock()
	pending := f.stats
	f.stats = map[statsKey]*store.WarmStats{}
	f.statsMu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	deltas := make([]store.WarmStats, 0, len(pending))
	for _, st := range pending {
		deltas = append(deltas, *st)
	}
	// In one order, so that replicas flushing at once lock their rows in one order.
	slices.SortFunc(deltas, func(a, b store.WarmStats) int {
		return cmp.Or(strings.Compare(a.Pool, b.Pool), strings.Compare(a.Shape, b.Shape))
	})
	err := f.st.AddWarmStats(ctx, deltas)
	if err == nil {
		return nil
	}
	f.statsMu.Lock()
	defer f.statsMu.Unlock()
	for id, st := range pending {
		if cur := f.stats[id]; cur != nil {
			st.Add(*cur)
		}
		f.stats[id] = st
	}
	return fmt.Errorf("record the warm pools' hits and misses: %w", err)
}

// Run passes at once, then every Interval and whenever woken, until ctx ends.
func (f *Filler) Run(ctx context.Context) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		if _, err := f.Pass(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("warm pools: pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.wake:
			// A claim woke it: the rest of a burst's claims come within moments, and
			// the refills' writes would hold them up; they go first, and the pass
			// then replaces them all at once.
			settle := time.NewTimer(f.settle)
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case <-settle.C:
			}
			select {
			case <-f.wake:
			default:
			}
		}
	}
}

// Result counts what one pass did.
type Result struct {
	Created, Replaced, Removed int
}

// shape is one pool's warm shape as the pass sees it.
type shape struct {
	pool string
	w    store.WarmShape
	// ready are its running sandboxes, oldest first; starting its queued and
	// provisioning ones.
	ready    []store.Sandbox
	starting int
	// maxStarting is the pool's (0: no limit).
	maxStarting int
}

// Pass brings every shape to its size once: it removes the warm sandboxes of shapes
// no pool declares any more, replaces those older than their shape's maxAgeSeconds,
// removes any beyond a shape's size, and creates what is missing.
func (f *Filler) Pass(ctx context.Context) (Result, error) {
	f.passMu.Lock()
	defer f.passMu.Unlock()
	var res Result
	var errs []error
	if err := f.Flush(ctx); err != nil {
		errs = append(errs, err)
	}
	now := f.clk.Now()
	shapes := map[string]*shape{}
	for _, v := range f.pools.Views() {
		for _, w := range v.Pool.Warm {
			if w.Size > 0 {
				shapes[store.WarmProject(v.Pool.Name, w)] = &shape{pool: v.Pool.Name, w: w, maxStarting: v.Pool.MaxStarting}
			}
		}
	}
	var orphans []store.Sandbox
	live := map[string]bool{}
	err := f.st.EachSandbox(ctx, store.SandboxFilter{Org: store.WarmOrg, States: []store.State{
		store.StateQueued, store.StateProvisioning, store.StateRunning}}, func(sb store.Sandbox) error {
		live[sb.ID] = true
		sh := shapes[sb.Project]
		switch {
		case sh == nil || sb.Pool != "" && sb.Pool != sh.pool:
			orphans = append(orphans, sb)
		case sb.State == store.StateRunning:
			sh.ready = append(sh.ready, sb)
		default:
			sh.starting++
		}
		return nil
	})
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("list warm sandboxes: %w", err))...)
	}
	f.noteStarted(ctx, now, live, shapes)

	for _, sb := range orphans {
		if err := f.svc.DeleteWarm(ctx, f.actor, sb.ID, "the pool no longer keeps this warm shape"); err != nil && !api.IsCode(err, api.CodeNotFound) {
			errs = append(errs, err)
			continue
		}
		res.Removed++
	}
	for _, project := range sortedKeys(shapes) {
		sh := shapes[project]
		r, err := f.fill(ctx, now, project, sh)
		res.Created += r.Created
		res.Replaced += r.Replaced
		res.Removed += r.Removed
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s, warm shape %s: %w", sh.pool, project, err))
		}
	}
	f.report(shapes)
	return res, errors.Join(errs...)
}

// maxSurge is how many replacements a shape of size may have starting beyond its
// size at once: a quarter of it (at least one), and no more than its pool's
// maxStarting when that is set, so that replacing a shape whose sandboxes all aged
// together neither doubles what it holds nor takes every start the pool allows.
func maxSurge(size, maxStarting int) int {
	n := max(1, (size+3)/4)
	if maxStarting > 0 {
		n = min(n, maxStarting)
	}
	return n
}

// fill brings one shape to its size. A sandbox past maxAgeSeconds is replaced
// without a gap where the pool has room: its replacement is started first, within
// the shape's surge (maxSurge), and the old one is deleted once a newer one is ready
// to stand in for it. One whose replacement has not come within OverlapWait past
// its age (the pool has no room for it) is deleted regardless, and replaced after.
func (f *Filler) fill(ctx context.Context, now time.Time, project string, sh *shape) (Result, error) {
	var res Result
	slices.SortFunc(sh.ready, func(a, b store.Sandbox) int { return a.StateChangedAt.Compare(b.StateChangedAt) })
	var stale, fresh []store.Sandbox
	for _, sb := range sh.ready {
		if sh.w.MaxAgeSeconds > 0 && now.Sub(sb.StateChangedAt) >= time.Duration(sh.w.MaxAgeSeconds)*time.Second {
			stale = append(stale, sb)
		} else {
			fresh = append(fresh, sb)
		}
	}
	deleteWarm := func(sb store.Sandbox, reason string) (bool, error) {
		err := f.svc.DeleteWarm(ctx, f.actor, sb.ID, reason)
		switch {
		case err == nil:
			return true, nil
		case api.IsCode(err, api.CodeNotFound):
			// Claimed meanwhile: no longer the shape's.
			return false, nil
		}
		return false, err
	}
	aged := fmt.Sprintf("replaced: warm for longer than maxAgeSeconds (%d)", sh.w.MaxAgeSeconds)
	// The oldest stale ones go first: as many as there are ready sandboxes beyond the
	// size, and any that has waited too long for a replacement.
	keep := stale[:0:0]
	gone := 0
	for _, sb := range stale {
		beyond := len(fresh)+len(stale)-gone > sh.w.Size
		overdue := now.Sub(sb.StateChangedAt) >= time.Duration(sh.w.MaxAgeSeconds)*time.Second+f.overlapWait
		if !beyond && !overdue {
			keep = append(keep, sb)
			continue
		}
		deleted, err := deleteWarm(sb, aged)
		if err != nil {
			return res, err
		}
		gone++
		if deleted {
			res.Replaced++
		}
	}
	stale = keep
	surge := min(len(stale), maxSurge(sh.w.Size, sh.maxStarting))
	// A shape shrunk: what is beyond its size (and the surge its stale ones are
	// allowed) goes, stale ones first, then the newest ready ones, since the oldest
	// are the next to be claimed.
	for len(fresh)+len(stale)+sh.starting > sh.w.Size+surge && len(fresh)+len(stale) > 0 {
		var last store.Sandbox
		if len(stale) > 0 {
			last, stale = stale[0], stale[1:]
		} else {
			last, fresh = fresh[len(fresh)-1], fresh[:len(fresh)-1]
		}
		if _, err := deleteWarm(last, "the warm shape's size shrank"); err != nil {
			return res, err
		}
		res.Removed++
		surge = min(len(stale), maxSurge(sh.w.Size, sh.maxStarting))
	}
	sh.ready = append(fresh, stale...)
	// The quota keeps replicas that fill at once from starting more than the size,
	// and the replacements of stale sandboxes from starting more than the surge.
	if quota := sh.w.Size + surge; f.quotas[project] != quota {
		if _, err := f.st.PutProject(ctx, now, store.Project{Org: store.WarmOrg, Name: project,
			Quota: store.Quota{Sandboxes: quota}}); err != nil {
			return res, fmt.Errorf("set the shape's quota: %w", err)
		}
		f.quotas[project] = quota
	}
	if b := f.backoff[project]; now.Before(b.until) {
		return res, nil
	}
	for range sh.w.Size - len(fresh) - sh.starting {
		sb, err := f.svc.CreateWarm(ctx, f.actor, sh.pool, sh.w)
		switch {
		case api.IsCode(err, api.CodeQuotaExceeded):
			// Another replica filled it meanwhile, or the surge is taken.
			return res, nil
		case err != nil:
			return res, err
		}
		f.started[sb.ID] = project
		sh.starting++
		res.Created++
	}
	return res, nil
}

// noteStarted follows the warm sandboxes this replica created: one seen running
// clears its shape's backoff, one that ended without being claimed (failed, or
// deleted before it ran) extends it.
func (f *Filler) noteStarted(ctx context.Context, now time.Time, live map[string]bool, shapes map[string]*shape) {
	running := map[string]bool{}
	for _, sh := range shapes {
		for _, sb := range sh.ready {
			running[sb.ID] = true
		}
	}
	for id, project := range f.started {
		switch {
		case running[id]:
			delete(f.started, id)
			delete(f.backoff, project)
		case live[id]:
			// Still starting.
		default:
			delete(f.started, id)
			sb, err := f.st.GetSandbox(ctx, id)
			if err != nil || sb.Org != store.WarmOrg || sb.State != store.StateFailed {
				// Claimed (now a tenant's), deleted, or gone from the store.
				continue
			}
			b := f.backoff[project]
			b.failures++
			wait := min(backoffBase<<min(b.failures-1, 20), backoffMax)
			b.until = now.Add(wait)
			f.backoff[project] = b
			f.log.Warn("warm pools: a warm sandbox failed to start; the shape waits before the next",
				"sandbox", id, "project", project, "reason", sb.Reason, "wait", wait)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
