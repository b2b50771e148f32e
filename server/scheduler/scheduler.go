// Package scheduler moves sandboxes through their lifecycle on one replica: it claims
// queued sandboxes, places them (package placement), calls the pool adapter's Create
// and reacts to its error code as the adapter specification's error table says; it
// deletes the instances of terminating sandboxes and expires sandboxes past their TTL.
//
// Each duty is one pass (ProvisionOnce, TerminateOnce, ExpireOnce) returning a Result
// to assert on; Run is a thin loop around them. Time comes from an injected clock and
// every state change goes through store.UpdateSandbox with a guard, so a replica that
// lost a race (a user deleted the sandbox meanwhile, another replica took it) writes
// nothing.
//
// Stuck transitional states: a terminating sandbox whose Delete keeps failing for
// TerminateGiveUp (default an hour) since it entered terminating is failed with a
// reason saying its instance may still exist; the reconciler then treats any instance
// left as an orphan and keeps deleting it. A provisioning sandbox is never reaped
// here: while its claim lives a Create may be in flight on some replica (the claim
// lasts ProvisionTimeout + provisionLeaseMargin, and the Create's deadline comes
// that margin before the claim's end), and once the claim has lapsed with no outcome recorded (the replica
// died), the reconciler adopts the instance the backend reports or requeues the
// sandbox (package reconcile). A queued sandbox
// waits for a claim for as long as it takes: its TTL runs only once it is running,
// and insufficient_capacity, which the contract has requeued uncounted, is asked
// again every RequeueDelay (with other pools tried first) until a Create succeeds
// or the sandbox is deleted.
//
// Direct work (direct.go): the API hands a create or a delete straight to the
// replica that answered when nothing waits before it (Reserve, ReserveDelete); the
// work then follows the passes' code.
//
// Metrics (Options.Metrics): differently_sandboxes{state}, refreshed by every
// housekeeping pass from the listings it makes anyway; differently_provision_seconds
// {pool}; differently_create_attempts_total{pool,code}; differently_terminations_total
// {result}; differently_direct_work_total{work}. Every log line about a sandbox
// carries its ID as "sandbox", and its pool as "pool" where it has one.
package scheduler

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/outage"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// PoolSource is what the scheduler needs of the pool manager.
type PoolSource interface {
	// Views returns the current view of every pool.
	Views() []pools.View
	// View returns one pool's view.
	View(name string) (pools.View, bool)
	// MarkUnhealthy records that a call to the pool failed as an outage; the pool
	// stays unhealthy until its next good probe.
	MarkUnhealthy(name string, err error)
	// BeginCreate asks the pool's circuit breaker to let a Create through; every
	// ticket granted goes back to EndCreate with the Create's outcome.
	BeginCreate(name string) (pools.CreateTicket, bool)
	EndCreate(t pools.CreateTicket, o pools.CreateOutcome, err error)
}

// Defaults of Options.
const (
	DefaultProvisionTimeout = defaults.ProvisionTimeout
	// DefaultTerminateGiveUp is how long a terminating sandbox's Delete may keep
	// failing before the sandbox is failed.
	DefaultTerminateGiveUp = time.Hour
	DefaultBatchSize       = 32
	DefaultClaimLease      = 10 * time.Second
	DefaultTick            = time.Second
	// DefaultMaxStarting bounds concurrent Creates per pool on one replica when the
	// pool sets no maxStarting.
	DefaultMaxStarting = defaults.MaxStarting
	// RequeueDelay is how long a sandbox waits after a capacity shortage, whether
	// placement found no room or the adapter answered insufficient_capacity.
	RequeueDelay = 2 * time.Second
	// provisionLeaseMargin is how much longer than ProvisionTimeout the claim of a
	// provisioning sandbox lasts. The Create's own deadline is kept this far before
	// the claim's expiry (create), so the margin is what an adapter may take to
	// return after its context ended (aborting a half-made instance) and the clock
	// skew between this replica and the reconciler's, which adopts or requeues the
	// sandbox once the claim has lapsed (package reconcile). Recording the outcome
	// needs none of it: a write that lands late finds the sandbox still claimed by
	// this replica, or changed by the reconciler and so left alone.
	provisionLeaseMargin = defaults.ProvisionMargin
	// deleteLeaseMargin is how much longer than TerminateTimeout a deletion claim
	// lasts: the Delete, then recording its outcome.
	deleteLeaseMargin = 30 * time.Second
	// avoidFor is how long a pool that answered insufficient_capacity is ranked last
	// for that sandbox, by every replica.
	avoidFor = time.Minute
)

// Options configure a Scheduler. Zero values take the defaults.
type Options struct {
	// Installation is the database's installation ID, passed to every Create. Required.
	Installation string
	// Tracer, when set, makes a span of every provisioning attempt and of its
	// adapter Create, a child of the API request's span for a create the API handed
	// over (Reserve); nil makes none.
	Tracer trace.Tracer
	// ReplicaID names this replica as the claimer of sandboxes. Default: a random ID.
	ReplicaID string
	// ProvisionTimeout bounds each Create (scheduler.provisionTimeoutSeconds).
	ProvisionTimeout time.Duration
	// MaxAttempts is how many counted attempts a sandbox gets before it fails.
	MaxAttempts int
	// TerminateTimeout bounds each Delete.
	TerminateTimeout time.Duration
	// TerminateGiveUp is how long after entering terminating a sandbox whose Delete
	// keeps failing is failed instead of retried (DefaultTerminateGiveUp).
	TerminateGiveUp time.Duration
	// ClaimLease is how long a claim holds a queued sandbox for this replica until
	// placement moves it to provisioning, which normally takes milliseconds. It bounds
	// how long the claims of a replica that crashed between claiming and placing keep
	// those sandboxes from the others. A claim lost to a slow placement does no harm:
	// placement's guard sees the new claimer and leaves the sandbox alone. Default
	// DefaultClaimLease. Once provisioning, the claim is extended to cover the Create
	// (ProvisionTimeout + defaults.ProvisionMargin), so that the terminator waits for
	// its outcome.
	ClaimLease time.Duration
	// BatchSize is how many sandboxes one provisioning pass claims.
	BatchSize int
	// DefaultMaxStarting bounds concurrent Creates per pool on this replica for pools
	// that set no maxStarting (scheduler.defaultMaxStarting). Default
	// DefaultMaxStarting.
	DefaultMaxStarting int
	Logger             *slog.Logger
	// Tick is how often Run polls when nobody calls Notify.
	Tick time.Duration
	// Metrics receives the scheduler's metrics; nil records them nowhere.
	Metrics prometheus.Registerer
	// Writes is the replica's group commit, shared with the API's state changes;
	// nil: a Batcher of the scheduler's own.
	Writes *store.Batcher
	// OnPass, when set, is called by Run after each pass with its result. It is a
	// test hook: tests wait on it instead of sleeping. It must not block for long.
	OnPass func(Result)
}

// Pass names a kind of pass in a Result.
type Pass string

const (
	PassProvision Pass = "provision"
	PassTerminate Pass = "terminate"
	PassExpire    Pass = "expire"
	// PassDirect reports one Create or Delete the API handed to this replica
	// directly (Reserve, ReserveDelete).
	PassDirect Pass = "direct"
)

// Result is what one pass did.
type Result struct {
	Pass Pass
	// Claimed: sandboxes claimed for provisioning.
	Claimed int
	// Started: sandboxes that reached running.
	Started int
	// Failed: sandboxes that ended failed.
	Failed int
	// Requeued: sandboxes sent back to queued (waiting, or retrying after an error).
	Requeued int
	// Terminated: sandboxes that reached terminated.
	Terminated int
	// Expired: sandboxes moved to terminating because their TTL ran out.
	Expired int
	// Errors: per-sandbox failures of the pass itself (a store or Delete error); the
	// affected sandboxes are retried on a later pass.
	Errors int
}

// Scheduler runs the provisioning, termination and expiry passes of one replica.
type Scheduler struct {
	st    store.Store
	pools PoolSource
	clk   clock.Clock
	// passLogs follow each kind of pass's failures (report).
	passLogs map[Pass]*outage.Log
	opts     Options
	log      *slog.Logger
	// actor is who this replica's scheduler is in the events it records.
	actor lifecycle.Actor
	m     *schedMetrics
	batch *store.Batcher
	// direct owns the goroutines of the work the API hands over (direct.go).
	direct directRuns

	wakeProvision chan struct{}
	wakeHousekeep chan struct{}

	mu sync.Mutex
	// starting counts Creates in flight per pool on this replica (maxStarting).
	starting map[string]int
	// starved is set when queued sandboxes may be waiting for a start slot on this
	// replica: a pass found none free, claimed as many as it had, or handed some
	// back. Only then does a freed slot wake the provisioning loop; otherwise every
	// Create's end would cost a claim query that finds nothing.
	starved bool
}

// errStale aborts an UpdateSandbox whose guard found the sandbox changed under us.
var errStale = errors.New("sandbox changed meanwhile")

// New builds a Scheduler. It fails when Options.Installation is missing or the
// metrics cannot be registered on Options.Metrics.
func New(st store.Store, ps PoolSource, clk clock.Clock, opts Options) (*Scheduler, error) {
	if opts.Installation == "" {
		return nil, errors.New("scheduler: an installation ID is required")
	}
	if opts.ReplicaID == "" {
		opts.ReplicaID = ids.At("replica", clk.Now())
	}
	if opts.ProvisionTimeout <= 0 {
		opts.ProvisionTimeout = DefaultProvisionTimeout
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = defaults.MaxAttempts
	}
	if opts.TerminateTimeout <= 0 {
		opts.TerminateTimeout = defaults.TerminateTimeout
	}
	if opts.TerminateGiveUp <= 0 {
		opts.TerminateGiveUp = DefaultTerminateGiveUp
	}
	if opts.ClaimLease <= 0 {
		opts.ClaimLease = DefaultClaimLease
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.DefaultMaxStarting <= 0 {
		opts.DefaultMaxStarting = DefaultMaxStarting
	}
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	if opts.Writes == nil {
		opts.Writes = store.NewBatcher(st, clk.Now)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newSchedMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	log = log.With("replica", opts.ReplicaID)
	passLogs := map[Pass]*outage.Log{}
	for _, p := range []Pass{PassProvision, PassTerminate, PassExpire} {
		passLogs[p] = outage.New("scheduler pass", log.With("pass", p), clk, 0)
	}
	return &Scheduler{
		st: st, pools: ps, clk: clk, opts: opts, m: m,
		actor:         lifecycle.Scheduler(opts.ReplicaID),
		batch:         opts.Writes,
		log:           log,
		passLogs:      passLogs,
		wakeProvision: make(chan struct{}, 1),
		wakeHousekeep: make(chan struct{}, 1),
		starting:      map[string]int{},
	}, nil
}

// Notify wakes Run's loops now instead of at the next tick, after a change either
// may act on (a pool or the policy changed, the change feed resynchronised). It
// never blocks; wake-ups arriving while one is pending merge into it.
func (s *Scheduler) Notify() {
	wake(s.wakeProvision)
	wake(s.wakeHousekeep)
}

// Wake wakes the loop that acts on sandboxes entering state: provisioning for
// queued, termination for terminating. Other states need no action.
func (s *Scheduler) Wake(state store.State) {
	switch state {
	case store.StateQueued:
		wake(s.wakeProvision)
	case store.StateTerminating:
		wake(s.wakeHousekeep)
	}
}

// Changed wakes the loop that acts on a sandbox change heard on the change feed, as
// Wake does, except for a terminating sandbox under a claim: a replica holds its
// deletion (ReserveDelete) or its Create is still in flight, and a pass would only
// skip it. Should the holder die, the tick's pass takes the sandbox up once the
// claim lapses.
func (s *Scheduler) Changed(c store.Change) {
	if c.Kind != store.ChangeSandbox || c.State == store.StateTerminating && c.Claimed {
		return
	}
	s.Wake(c.State)
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run provisions, expires and terminates until ctx is done, then returns once every
// pass and Create in flight has ended. Provisioning runs in its own loop so that a
// slow Create (up to ProvisionTimeout) never delays deletes and expiry, and a pass's
// Creates do not hold up the next pass. Expiry, which reads every
// sandbox that may expire, runs on the tick only; a wake-up (a delete) runs just the
// termination pass.
func (s *Scheduler) Run(ctx context.Context) {
	s.direct.open(ctx)
	defer s.direct.close()
	var wg sync.WaitGroup
	// The Creates of a pass run while the next pass claims and places: a slow
	// backend holds its start slots, not this replica's other pools. wg owns them.
	wg.Go(func() {
		s.loop(ctx, s.wakeProvision, func(ctx context.Context, _ bool) {
			creates, res, err := s.placePass(ctx)
			if creates == nil {
				s.report(res, err)
				return
			}
			// The claim reached the database; the Creates' own write failures are
			// counted in their Result, not taken as the end of an outage or its start.
			s.noteOutage(PassProvision, err)
			wg.Go(func() { s.reportCounts(creates()) })
		})
	})
	wg.Go(func() {
		s.loop(ctx, s.wakeHousekeep, func(ctx context.Context, tick bool) {
			if tick {
				// Expiry first, so that an expired sandbox is deleted in the same pass.
				s.report(s.ExpireOnce(ctx))
			}
			s.report(s.TerminateOnce(ctx))
		})
	})
	wg.Wait()
}

// loop runs pass at once (as a tick), then after every tick or wake-up.
func (s *Scheduler) loop(ctx context.Context, wake <-chan struct{}, pass func(ctx context.Context, tick bool)) {
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	tick := true
	for {
		pass(ctx, tick)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tick = true
		case <-wake:
			tick = false
		}
	}
}

func (s *Scheduler) report(r Result, err error) {
	s.noteOutage(r.Pass, err)
	s.reportCounts(r)
}

// noteOutage logs a pass's failure. A pass fails several times a second while the
// database is down: the log says so when it starts, once a minute, and when it ends
// (package outage).
func (s *Scheduler) noteOutage(pass Pass, err error) {
	if o := s.passLogs[pass]; o != nil {
		switch {
		case err == nil:
			o.OK()
		case !errors.Is(err, context.Canceled):
			o.Failed(err)
		}
	} else if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Error("scheduler pass failed", "pass", pass, "error", err)
	}
}

// reportCounts logs what a pass did and hands it to OnPass.
func (s *Scheduler) reportCounts(r Result) {
	// One line per pass: operators see the loop alive, and tests that run the daemon
	// as a child process wait on these lines instead of sleeping.
	s.log.Debug("scheduler pass", "pass", r.Pass, "claimed", r.Claimed, "started", r.Started,
		"failed", r.Failed, "requeued", r.Requeued, "terminated", r.Terminated,
		"expired", r.Expired, "errors", r.Errors)
	if s.opts.OnPass != nil {
		s.opts.OnPass(r)
	}
}

// update applies fn to the sandbox under the store's row lock, in a transaction
// shared with the other writes of this replica made meanwhile (store.Batcher). A guard
// failure (errStale) is not an error for the caller: the sandbox is simply no longer
// ours.
func (s *Scheduler) update(ctx context.Context, id string, fn func(*store.Sandbox) error) (store.Sandbox, bool, error) {
	return ours(s.batch.UpdateSandbox(ctx, id, fn))
}

// updateKnown is update for a sandbox this replica holds as the store last returned
// it (known, unmodified since): a transaction of such writes alone may skip reading
// the rows (store.Batcher.UpdateKnownSandbox). fn may run twice, once on known and
// once on the stored row, and must leave its own state as its last run decided.
func (s *Scheduler) updateKnown(ctx context.Context, known store.Sandbox, fn func(*store.Sandbox) error) (store.Sandbox, bool, error) {
	return ours(s.batch.UpdateKnownSandbox(ctx, known, fn))
}

// ours is update's answer from a write's: ok false, with no error, when the
// callback found the sandbox no longer ours (errStale).
func ours(sb store.Sandbox, err error) (store.Sandbox, bool, error) {
	if errors.Is(err, errStale) {
		return store.Sandbox{}, false, nil
	}
	if err != nil {
		return store.Sandbox{}, false, err
	}
	return sb, true, nil
}

// listAll pages through every sandbox f selects (its Limit and Cursor are set here).
func (s *Scheduler) listAll(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error) {
	var out []store.Sandbox
	f.Limit, f.Cursor = store.MaxLimit, ""
	for {
		page, next, err := s.st.ListSandboxes(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}
