package scheduler

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"sync"
	"time"

	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// Direct work: the API hands a sandbox it is writing straight to this replica's
// scheduler, instead of leaving it for a pass to find, when nothing stands in line
// before it.
//
// A create that finds a start slot free on its best pool is stored already
// provisioning there and claimed by this replica (the same row a pass's claim and
// placement would write, in the insert's transaction), and its Create starts as soon
// as the insert commits. A delete of a sandbox with an instance takes a deletion
// claim in the transaction that moves it to terminating, and its Delete starts as
// soon as that commits. Either way the work then follows the passes' code and rules:
// the outcome of a Create is recorded by create with the error table's reactions,
// a Delete by terminate. What direct work skips is the queue and the round trips
// of a pass (the claim, the placement write, the listing of terminating sandboxes).
//
// A replica that dies holding direct work leaves what a pass would leave: a
// provisioning sandbox under a claim, which the reconciler adopts or requeues once
// the claim lapses, or a terminating sandbox under a deletion claim, which the
// termination passes of every replica take up once it lapses.
//
// Direct work runs only while Run does, and Run returns only once it has ended.

// Start is a start slot held for a sandbox that the API has not stored yet.
type Start struct {
	s    *Scheduler
	ctx  context.Context
	view pools.View
	at   time.Time
	// ticket is the pool breaker's leave for the Create.
	ticket pools.CreateTicket
	// used is set once Start or Release gave the slot and the run token away.
	used bool
	// parent is the span of the request that reserved the slot, which the Create's
	// span continues.
	parent trace.SpanContext
}

// Reserve takes a start slot, for a sandbox about to be stored, on the first of
// ranked (placement's ranking of the pools that can take it) that has one free on
// this replica. It returns nil when the sandbox should be queued instead: Run is
// not running, no ranked pool is healthy with a free slot, or some ranked pool sets
// maxConcurrency (whose count only a pass makes). The caller places the sandbox
// with Place in the transaction that stores it, or leaves it queued, and must call
// Start or Release on what Reserve returned.
func (s *Scheduler) Reserve(ctx context.Context, ranked []string) *Start {
	views := make([]pools.View, 0, len(ranked))
	for _, name := range ranked {
		v, ok := s.pools.View(name)
		if !ok {
			return nil
		}
		if v.Pool.MaxConcurrency > 0 {
			return nil
		}
		views = append(views, v)
	}
	parent := trace.SpanContextFromContext(ctx)
	ctx, ok := s.direct.begin()
	if !ok {
		return nil
	}
	now := s.clk.Now()
	for _, v := range views {
		if !v.Healthy || v.Adapter == nil || !s.acquire(v) {
			continue
		}
		ticket, ok := s.pools.BeginCreate(v.Pool.Name)
		if !ok {
			s.unacquire(v.Pool.Name)
			continue
		}
		return &Start{s: s, ctx: ctx, view: v, at: now, ticket: ticket, parent: parent}
	}
	s.direct.end()
	return nil
}

// Place moves sb, a new queued sandbox, to provisioning on the reserved pool,
// claimed for this replica's Create until ProvisionTimeout and a margin from now.
// The API calls it inside the transaction that stores sb, so that time spent
// waiting there (for a connection, a project's lock, SQLite's writer) does not come
// out of the Create's time, which ends a margin before the claim (create).
// candidates are placement's record of the pools it weighed.
func (r *Start) Place(sb *store.Sandbox, candidates []store.Candidate) error {
	return lifecycle.Place(sb, r.s.placement(r.view, candidates), r.s.clk.Now(), r.s.actor)
}

// Start begins the Create of sb, the sandbox as stored, when it is still the one
// Reserve placed (provisioning on the pool, claimed by this replica); otherwise it
// releases the slot. The channel it returns receives the sandbox as the Create's
// outcome left it, or is closed without a value when this replica did not record one
// (the sandbox was deleted meanwhile, or the write failed); it is nil when no Create
// started.
func (r *Start) Start(sb store.Sandbox) <-chan store.Sandbox {
	if r == nil || r.used {
		return nil
	}
	s := r.s
	if !s.provisioning(&sb, r.view.Pool.Name) {
		r.Release()
		return nil
	}
	r.used = true
	s.m.direct.WithLabelValues("create").Inc()
	pool := r.view.Pool.Name
	s.m.stages.WithLabelValues(stageQueue, pool).Observe(0)
	s.m.stages.WithLabelValues(stagePlace, pool).Observe(s.clk.Now().Sub(r.at).Seconds())
	out := make(chan store.Sandbox, 1)
	j := job{sb: sb, view: r.view, req: s.createRequest(sb, ""), claimedAt: r.at, ticket: r.ticket, parent: r.parent}
	go func() {
		defer s.direct.end()
		defer close(out)
		o, row := s.create(r.ctx, j)
		s.report(Result{Pass: PassDirect, Started: one(o == outStarted), Failed: one(o == outFailed),
			Requeued: one(o == outRequeued), Errors: one(o == outError)}, nil)
		if o != outNone && o != outError {
			out <- row
		}
	}()
	return out
}

// Release gives back the slot and the run token of a reservation whose Create did not
// start. It does nothing after Start or a first Release, so it can be deferred.
func (r *Start) Release() {
	if r == nil || r.used {
		return
	}
	r.used = true
	r.s.releaseSlot(r.view.Pool.Name)
	r.s.pools.EndCreate(r.ticket, pools.CreateNeutral, nil)
	r.s.direct.end()
}

// Delete is a deletion the API hands to this replica.
type Delete struct {
	s   *Scheduler
	ctx context.Context
	// claimed and ended are what the last Prepare made of the sandbox.
	claimed, ended bool
	used           bool
}

// ReserveDelete returns a Delete for the API to prepare its transaction with, or nil
// when Run is not running. The caller must call Start or Release on it.
func (s *Scheduler) ReserveDelete() *Delete {
	ctx, ok := s.direct.begin()
	if !ok {
		return nil
	}
	return &Delete{s: s, ctx: ctx}
}

// Prepare is called under the row lock of a sandbox the API has just moved to
// terminating (cur), by by. A sandbox with no instance, and no Create in flight that
// could make one, is terminated there and then: there is nothing to delete. One with
// an instance and no live claim is claimed for deletion by this replica. Any other
// is left to the passes. Prepare on a nil Delete does only the first.
func (d *Delete) Prepare(cur *store.Sandbox, now time.Time, by lifecycle.Actor) {
	if d != nil {
		d.claimed, d.ended = false, false
	}
	switch {
	case NoInstance(cur, now):
		// There is nothing to delete: the sandbox ends in the same write.
		if err := lifecycle.Terminated(cur, cur.Reason, by); err != nil {
			return
		}
		if d != nil {
			d.ended = true
		}
	case d != nil && cur.BackendRef != "" && !claimLive(cur, now):
		cur.ClaimedBy = d.s.opts.ReplicaID
		exp := now.Add(d.s.opts.TerminateTimeout + deleteLeaseMargin)
		cur.ClaimExpiresAt = &exp
		d.claimed = true
	}
}

// Start begins the Delete of sb, the sandbox as committed after Prepare, when
// Prepare claimed it; otherwise it releases the Delete. The channel it returns
// receives the sandbox as the Delete's outcome left it, or is closed without a value
// when this replica recorded none; it is nil when no Delete started.
func (d *Delete) Start(sb store.Sandbox) <-chan store.Sandbox {
	if d == nil || d.used {
		return nil
	}
	s := d.s
	if d.ended && sb.State == store.StateTerminated {
		s.m.terminations.WithLabelValues(termNoInstance).Inc()
	}
	if !d.claimed || sb.State != store.StateTerminating || sb.ClaimedBy != s.opts.ReplicaID {
		d.Release()
		return nil
	}
	d.used = true
	s.m.direct.WithLabelValues("delete").Inc()
	out := make(chan store.Sandbox, 1)
	go func() {
		defer s.direct.end()
		defer close(out)
		o, row, err := s.terminate(d.ctx, sb, true)
		s.report(Result{Pass: PassDirect, Terminated: one(o == termTerminated),
			Failed: one(o == termFailed), Errors: one(err != nil)}, nil)
		if row.ID != "" {
			out <- row
		}
	}()
	return out
}

// Release gives back the run token of a Delete that did not start. It does nothing
// after Start or a first Release.
func (d *Delete) Release() {
	if d == nil || d.used {
		return
	}
	d.used = true
	d.s.direct.end()
}

// NoInstance reports whether a sandbox has no backend instance to delete and no
// Create in flight that could still make one (placed on a pool under a live claim).
// A terminating sandbox for which it holds is terminated without a Delete; any
// instance an earlier attempt left is an orphan to the reconciler.
func NoInstance(sb *store.Sandbox, now time.Time) bool {
	return sb.BackendRef == "" && (sb.Pool == "" || !claimLive(sb, now))
}

func claimLive(sb *store.Sandbox, now time.Time) bool {
	return sb.ClaimedBy != "" && sb.ClaimExpiresAt != nil && sb.ClaimExpiresAt.After(now)
}

// one counts a single piece of direct work into a Result field.
func one(b bool) int {
	if b {
		return 1
	}
	return 0
}

// directRuns owns the goroutines of direct work: they take a token from begin while
// Run runs, and Run waits for every token to come back before it returns.
type directRuns struct {
	mu  sync.Mutex
	ctx context.Context // Run's; nil when Run is not running
	wg  sync.WaitGroup
}

func (d *directRuns) begin() (context.Context, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil || d.ctx.Err() != nil {
		return nil, false
	}
	d.wg.Add(1)
	return d.ctx, true
}

func (d *directRuns) end() { d.wg.Done() }

func (d *directRuns) open(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctx = ctx
}

// close stops new direct work and waits for what is in flight.
func (d *directRuns) close() {
	d.mu.Lock()
	d.ctx = nil
	d.mu.Unlock()
	d.wg.Wait()
}
