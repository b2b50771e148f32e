package scheduler

import (
	"github.com/different-ai/differently/internal/tracing"
	"go.opentelemetry.io/otel/trace"

	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/placement"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// outcome is what became of one claimed sandbox.
type outcome int

const (
	outNone outcome = iota // no longer ours: deleted or taken meanwhile
	outStarted
	outFailed
	outRequeued
	outError
)

// job is one Create to make on view's pool; start moves the sandbox to provisioning
// there and fills req.
type job struct {
	sb          store.Sandbox
	view        pools.View
	snapshotRef string
	req         adapters.CreateRequest
	// claimedAt is when this pass claimed the sandbox (differently_provision_seconds).
	claimedAt time.Time
	// ticket is the pool breaker's leave for this Create (PoolSource.BeginCreate).
	ticket pools.CreateTicket
	// candidates are the pools placement weighed, for the placement's event.
	candidates []store.Candidate
	// took is how long the Create took, once it has ended.
	took time.Duration
	// answered is when the Create ended.
	answered time.Time
	// parent, when valid, is the span the attempt's span continues: the API
	// request's, for a create handed over directly.
	parent trace.SpanContext
}

// ProvisionOnce claims due queued sandboxes, places each, and creates their instances
// concurrently (at most the pool's maxStarting at a time on this replica). It returns
// once every Create of the pass has ended, so its Result holds the final outcomes.
//
// Reactions follow the adapter specification's error table: insufficient_capacity
// requeues after RequeueDelay without counting the attempt and ranks that pool last
// for the sandbox for a minute, on whichever replica claims it next (the row
// remembers the pool); sandbox_failed counts the
// attempt and backs off, leaving the pool alone; provider_unavailable and any other
// error (a timeout included) also mark the pool unhealthy, count toward its circuit
// breaker (pools.Manager.EndCreate) and rank the pool last for the sandbox's next
// attempts, for a minute, so that they go to another eligible pool; invalid_request
// fails the sandbox at once. Backoff is 2 s × 2^min(attempts, 5), and the sandbox
// fails once its attempts reach MaxAttempts.
//
// A sandbox whose ranked pools all have maxStarting Creates in flight on this
// replica is handed back uncounted, due at once: the next pass, woken when a start
// slot frees, takes it.
func (s *Scheduler) ProvisionOnce(ctx context.Context) (Result, error) {
	creates, res, err := s.placePass(ctx)
	if creates != nil {
		res = creates()
	}
	return res, err
}

// placePass is the first half of a provisioning pass: it claims, places, and moves
// the placed sandboxes to provisioning. The second half, the Creates and their
// outcomes, is returned as creates (nil when there are none), which returns the
// whole pass's Result once they have ended. Run starts the next pass while the
// Creates of this one run; the halves that read and write placement (pool load,
// start slots) never overlap, since each pass's sandboxes are provisioning, and so
// counted, before the next pass places anything.
func (s *Scheduler) placePass(ctx context.Context) (creates func() Result, res Result, err error) {
	res = Result{Pass: PassProvision}
	now := s.clk.Now()
	// Claim no more than this replica can start now: a sandbox claimed without a
	// start slot would only be handed back. releaseSlot wakes the loop when a slot
	// frees.
	free, paused := s.freeSlots(s.pools.Views())
	limit := min(s.opts.BatchSize, free)
	if free == 0 {
		// Every pool that could take work has its breaker open: claim a batch all the
		// same, only for placement to requeue it with the reason saying until when the
		// pools are paused. Without this the sandboxes would wait, untouched, showing
		// an older reason (in a single-pool deployment, always).
		limit = min(s.opts.BatchSize, paused)
	}
	if limit == 0 {
		s.setStarved()
		return nil, res, nil
	}
	claimed, err := s.st.ClaimSandboxes(ctx, now, s.opts.ReplicaID, s.opts.ClaimLease, limit)
	if err != nil {
		return nil, res, fmt.Errorf("claim sandboxes: %w", err)
	}
	res.Claimed = len(claimed)
	if len(claimed) == free {
		// Every slot taken: more may be queued behind these.
		s.setStarved()
	}
	if len(claimed) == 0 {
		return nil, res, nil
	}
	policy, err := s.st.GetPolicy(ctx)
	if err == nil {
		// The views as they are now, after the claim, which may have waited.
		views := s.pools.Views()
		// Placement counts a pool's sandboxes only against its maxConcurrency: when no
		// pool sets one, the count would change nothing and is not made.
		active := map[string]int{}
		if slices.ContainsFunc(views, func(v pools.View) bool { return v.Pool.MaxConcurrency > 0 }) {
			active, err = s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
		}
		if err == nil {
			return s.provision(ctx, claimed, now, views, policy, active, res), res, nil
		}
	}
	// Hand the claims back rather than letting them block the sandboxes for a lease.
	for _, sb := range claimed {
		if _, _, rerr := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
			if !s.ours(cur, store.StateQueued) {
				return errStale
			}
			lifecycle.ReleaseClaim(cur)
			return nil
		}); rerr != nil {
			s.log.Error("release claim", "sandbox", sb.ID, "error", rerr)
		}
	}
	return nil, res, fmt.Errorf("load policy and pool load: %w", err)
}

// provision places the claimed sandboxes and moves them to provisioning, and returns
// the function that makes their Creates.
func (s *Scheduler) provision(ctx context.Context, claimed []store.Sandbox, claimedAt time.Time, views []pools.View, policy store.Policy, active map[string]int, res Result) func() Result {
	byName := make(map[string]pools.View, len(views))
	for _, v := range views {
		byName[v.Pool.Name] = v
	}
	var mu sync.Mutex
	tally := func(o outcome) {
		mu.Lock()
		defer mu.Unlock()
		switch o {
		case outStarted:
			res.Started++
		case outFailed:
			res.Failed++
		case outRequeued:
			res.Requeued++
		case outError:
			res.Errors++
		}
	}
	// Placement decides one sandbox at a time so that each sees the pools the
	// previous ones took (active). The writes then run concurrently, meeting in the
	// store.Batcher's transactions, and so do the Creates.
	var wg sync.WaitGroup
	jobs := make([]*job, len(claimed))
	for i, sb := range claimed {
		d := s.decide(ctx, sb, views, byName, policy, active)
		wg.Go(func() {
			if d.job == nil {
				tally(d.apply(ctx, s))
				return
			}
			j, o := s.start(ctx, *d.job)
			if j != nil {
				j.claimedAt = claimedAt
				pool := j.view.Pool.Name
				s.m.stages.WithLabelValues(stageQueue, pool).Observe(max(claimedAt.Sub(sb.StateChangedAt), 0).Seconds())
				s.m.stages.WithLabelValues(stagePlace, pool).Observe(s.clk.Now().Sub(claimedAt).Seconds())
				jobs[i] = j
				return
			}
			tally(o)
		})
	}
	wg.Wait()
	return func() Result {
		var wg sync.WaitGroup
		for _, j := range jobs {
			if j != nil {
				wg.Go(func() {
					o, _ := s.create(ctx, *j)
					tally(o)
				})
			}
		}
		wg.Wait()
		return res
	}
}

// decision is what placement made of one claimed sandbox: a Create to make (job),
// or else a requeue or failure to record (apply).
type decision struct {
	job   *job
	apply func(ctx context.Context, s *Scheduler) outcome
}

// decide places sb. A sandbox given a pool holds one of that pool's start slots on
// this replica and counts in active from here on.
func (s *Scheduler) decide(ctx context.Context, sb store.Sandbox, views []pools.View, byName map[string]pools.View, policy store.Policy, active map[string]int) decision {
	log := s.log.With("sandbox", sb.ID)
	now := s.clk.Now()
	var candidates []store.Candidate
	requeueAt := func(reason string, at time.Time) decision {
		return decision{apply: func(ctx context.Context, s *Scheduler) outcome {
			o, _ := s.wait(ctx, sb.ID, reason, at, candidates)
			return o
		}}
	}
	requeue := func(reason string) decision { return requeueAt(reason, now.Add(RequeueDelay)) }
	fail := func(reason string, code api.Code) decision {
		return decision{apply: func(ctx context.Context, s *Scheduler) outcome {
			o, _ := s.fail(ctx, sb.ID, "", lifecycle.Failure{Reason: reason, Code: string(code)})
			return o
		}}
	}
	req := placement.Request{
		Capabilities: sb.Capabilities,
		Template:     sb.Template,
		Resources:    sb.Resources,
		Placement:    sb.Placement,
	}
	snapshotRef := ""
	if sb.FromSnapshot != "" {
		snap, err := s.st.GetSnapshot(ctx, sb.FromSnapshot)
		switch {
		case api.IsCode(err, api.CodeNotFound):
			return fail(fmt.Sprintf("snapshot %s does not exist", sb.FromSnapshot), api.CodeNotFound)
		case err != nil:
			log.Error("load snapshot", "snapshot", sb.FromSnapshot, "error", err)
			return requeue("waiting: the snapshot to restore could not be read")
		}
		req.SnapshotPool, snapshotRef = snap.Pool, snap.BackendRef
	}

	d := placement.Place(req, views, policy, active)
	ranked := preferOthers(sb, d.Pools, now)
	candidates = lifecycle.Candidates(ranked, d.Rejected)
	switch {
	case d.Wait:
		return requeue(d.Reason)
	case len(d.Pools) == 0:
		return fail(d.Reason, d.Code)
	}

	var trying []string
	for _, name := range ranked {
		view := byName[name]
		if !s.acquire(view) {
			continue
		}
		ticket, ok := s.pools.BeginCreate(name)
		if !ok {
			// Half-open, with its trial Creates in flight (or it just opened).
			s.unacquire(name)
			trying = append(trying, name)
			continue
		}
		active[name]++
		return decision{job: &job{sb: sb, view: view, snapshotRef: snapshotRef, ticket: ticket, candidates: candidates}}
	}
	if len(trying) == len(ranked) {
		// The trials' outcomes decide; asking again at once would only be refused.
		return requeue(fmt.Sprintf("waiting: pools %s are trying creates again after failures", strings.Join(ranked, ", ")))
	}
	// Due again at once: the slot that frees first wakes the loop (releaseSlot), and
	// whichever pass runs then, on this replica or another, takes the sandbox.
	s.setStarved()
	return requeueAt(fmt.Sprintf("waiting: pools %s are starting as many sandboxes as they allow (maxStarting)", strings.Join(ranked, ", ")), now)
}

// start moves a placed sandbox to provisioning on its pool and returns the Create to
// make; when the sandbox is no longer ours, or the write failed, it releases the
// pool's start slot and returns what became of the sandbox instead.
func (s *Scheduler) start(ctx context.Context, j job) (*job, outcome) {
	pool := j.view.Pool.Name
	cur, ok, err := s.update(ctx, j.sb.ID, func(cur *store.Sandbox) error {
		if !s.ours(cur, store.StateQueued) {
			return errStale
		}
		// The short placement claim becomes one that outlasts the Create.
		return lifecycle.Place(cur, s.placement(j.view, j.candidates), s.clk.Now(), s.actor)
	})
	if !ok {
		s.releaseSlot(pool)
		s.pools.EndCreate(j.ticket, pools.CreateNeutral, nil)
		if err != nil {
			s.log.Error("move to provisioning", "sandbox", j.sb.ID, "pool", pool, "error", err)
			return nil, outError
		}
		return nil, outNone
	}
	j.sb = cur
	j.req = s.createRequest(cur, j.snapshotRef)
	return &j, outNone
}

func (s *Scheduler) createRequest(sb store.Sandbox, snapshotRef string) adapters.CreateRequest {
	labels := adapters.OwnershipLabels(sb.Labels, sb.ID, s.opts.Installation)
	if sb.Org != "" {
		labels[adapters.LabelOrg] = sb.Org
	}
	if sb.Project != "" {
		labels[adapters.LabelProject] = sb.Project
	}
	return adapters.CreateRequest{
		ID:           sb.ID,
		Installation: s.opts.Installation,
		Template:     sb.Template,
		Resources:    sb.Resources,
		// A copy: the job's sandbox is written from as it stands (updateKnown), and
		// must not change under an adapter that edits what it was given.
		Env:          maps.Clone(sb.Env),
		TTLSeconds:   sb.TTLSeconds,
		FromSnapshot: snapshotRef,
		Labels:       labels,
	}
}

// create calls the adapter and records the outcome. The sandbox it returns is the
// row as the outcome left it (zero for outNone and outError).
func (s *Scheduler) create(ctx context.Context, j job) (o outcome, row store.Sandbox) {
	pool := j.view.Pool.Name
	if s.opts.Tracer != nil {
		var span trace.Span
		ctx, span = s.attemptSpan(ctx, j)
		defer func() { endAttempt(span, o, row) }()
	}
	log := s.log.With("sandbox", j.sb.ID, "pool", pool)
	log.Debug("creating instance", "attempts", j.sb.Attempts)
	timeout := s.opts.ProvisionTimeout
	if exp := j.sb.ClaimExpiresAt; exp != nil {
		// The Create ends provisionLeaseMargin before the claim does, however long
		// the write that moved the sandbox to provisioning took: once the claim has
		// lapsed the reconciler may adopt or requeue the sandbox, and must find no
		// Create still in flight.
		timeout = min(timeout, exp.Sub(s.clk.Now())-provisionLeaseMargin)
	}
	if timeout <= 0 {
		s.releaseSlot(pool)
		s.pools.EndCreate(j.ticket, pools.CreateNeutral, nil)
		return s.requeue(context.WithoutCancel(ctx), j, lifecycle.Retry{Reason: "provisioning began too late for its claim; retrying", At: s.clk.Now()})
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	var adapterSpan trace.Span
	if s.opts.Tracer != nil {
		cctx, adapterSpan = s.opts.Tracer.Start(cctx, "adapter.Create", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(tracing.SandboxID.String(j.sb.ID), tracing.Pool.String(pool),
				tracing.Adapter.String(j.view.Pool.Adapter)))
	}
	began := s.clk.Now()
	inst, err := j.view.Adapter.Create(cctx, j.req)
	j.answered = s.clk.Now()
	j.took = j.answered.Sub(began)
	cancel()
	if adapterSpan != nil {
		endWithError(adapterSpan, err)
	}
	s.m.stages.WithLabelValues(stageCreate, pool).Observe(j.took.Seconds())
	s.releaseSlot(pool)
	if err == nil {
		err = checkCreated(inst, j.sb.ID)
	}
	// The outcome is recorded even when ctx ended meanwhile (shutdown), so that work
	// in flight is handed back rather than left in provisioning.
	uctx := context.WithoutCancel(ctx)
	s.endCreate(j.ticket, err, ctx.Err() != nil)

	if err == nil {
		s.m.attempts.WithLabelValues(pool, codeOK).Inc()
		return s.recordRunning(uctx, j, inst)
	}
	if ctx.Err() != nil {
		s.m.attempts.WithLabelValues(pool, codeInterrupted).Inc()
		// Shutdown, not the backend's fault: retry at once elsewhere, uncounted. Create
		// is keyed by the sandbox ID, so a retry finds any instance this call made.
		return s.requeue(uctx, j, lifecycle.Retry{Reason: "provisioning interrupted by a shutdown; retrying", At: s.clk.Now(), Duration: j.took})
	}
	code := api.CodeOf(err)
	label := code
	if !label.Known() {
		// A plugin's made-up code would be a new series each time.
		label = api.CodeInternal
	}
	s.m.attempts.WithLabelValues(pool, string(label)).Inc()
	reason := fmt.Sprintf("pool %s: %s", pool, api.Message(err))
	log.Warn("create failed", "code", code, "error", err)
	switch code {
	case api.CodeInsufficientCapacity:
		now := s.clk.Now()
		return s.requeue(uctx, j, lifecycle.Retry{Reason: reason, Code: string(code), At: now.Add(RequeueDelay),
			Avoid: pool, AvoidUntil: now.Add(avoidFor), Duration: j.took})
	case api.CodeSandboxFailed:
		return s.retry(uctx, j, reason, string(code), false)
	case api.CodeInvalidRequest:
		return s.fail(uctx, j.sb.ID, pool, lifecycle.Failure{Reason: reason, Code: string(code), Counted: true, Duration: j.took})
	default:
		s.pools.MarkUnhealthy(pool, err)
		// The retry goes to another eligible pool first: this one's probe may well
		// pass before the backoff ends while its Creates still fail.
		return s.retry(uctx, j, reason, string(code), true)
	}
}

// placement is where start puts a sandbox: on view's pool, under a claim that
// outlasts its Create.
func (s *Scheduler) placement(view pools.View, candidates []store.Candidate) lifecycle.Placement {
	return lifecycle.Placement{
		Pool: view.Pool.Name, Region: view.Pool.Region,
		Claimer:    s.opts.ReplicaID,
		ClaimUntil: s.clk.Now().Add(s.opts.ProvisionTimeout + provisionLeaseMargin),
		Candidates: candidates,
	}
}

// endCreate hands the Create's ticket back to its pool's breaker with what the
// result says of the pool: only an outage (provider_unavailable, a timeout, internal
// or a code this version does not know) counts against it; a shutdown, a full pool,
// a sandbox that failed to start or a refused request say nothing of its health.
func (s *Scheduler) endCreate(t pools.CreateTicket, err error, shutdown bool) {
	switch {
	case err == nil:
		s.pools.EndCreate(t, pools.CreateSucceeded, nil)
		return
	case shutdown:
		s.pools.EndCreate(t, pools.CreateNeutral, nil)
		return
	}
	switch api.CodeOf(err) {
	case api.CodeInsufficientCapacity, api.CodeSandboxFailed, api.CodeInvalidRequest:
		s.pools.EndCreate(t, pools.CreateNeutral, nil)
	default:
		s.pools.EndCreate(t, pools.CreateOutage, err)
	}
}

// checkCreated refuses what a Create answered when it cannot be the instance asked
// for: no reference (a running sandbox would name no instance, and the reconciler
// would delete the real one as a duplicate) or another sandbox's. Either is a broken
// backend, provider_unavailable: the Create is retried, keyed by the sandbox's ID,
// so an instance the bad answer hid is found again.
func checkCreated(inst adapters.Instance, id string) error {
	switch {
	case inst.Ref == "":
		return api.Errorf(api.CodeProviderUnavailable, "Create answered without an instance reference")
	case inst.SandboxID != "" && inst.SandboxID != id:
		return api.Errorf(api.CodeProviderUnavailable, "Create answered with an instance of sandbox %s", inst.SandboxID)
	}
	return nil
}

func (s *Scheduler) recordRunning(ctx context.Context, j job, inst adapters.Instance) (outcome, store.Sandbox) {
	pool := j.view.Pool.Name
	var seen store.Sandbox
	var o outcome
	// j.sb is the sandbox as the write that moved it to provisioning left it, which
	// it still is unless someone deleted it meanwhile.
	row, ok, err := s.updateKnown(ctx, j.sb, func(cur *store.Sandbox) error {
		seen, o = *cur, outStarted
		if s.deletedWhileProvisioning(cur, pool) {
			// Leave it terminating; with the ref the terminator can delete the instance.
			o = outNone
			return lifecycle.BindInstance(cur, inst.Ref, s.actor)
		}
		if !s.provisioning(cur, pool) {
			return errStale
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: inst.Ref, Region: inst.Region}, s.clk.Now(), j.took, s.actor)
	})
	switch {
	case err != nil:
		s.log.Error("record running", "sandbox", j.sb.ID, "pool", pool, "error", err)
		return outError, store.Sandbox{}
	case ok:
		if o == outStarted {
			now := s.clk.Now()
			s.m.provision.WithLabelValues(pool).Observe(now.Sub(j.claimedAt).Seconds())
			s.m.stages.WithLabelValues(stageReady, pool).Observe(now.Sub(j.answered).Seconds())
			s.log.Info("sandbox running", "sandbox", j.sb.ID, "pool", pool)
		}
		return o, row
	}
	// The sandbox ended while we created its instance and nobody will delete it: do it
	// now. A sandbox still alive elsewhere may own this very instance (Create is keyed
	// by its ID), so only a finished one is cleaned up.
	if seen.State.IsTerminal() && (seen.BackendRef == "" || seen.BackendRef == inst.Ref) {
		dctx, cancel := context.WithTimeout(ctx, s.opts.TerminateTimeout)
		defer cancel()
		if err := j.view.Adapter.Delete(dctx, inst.Ref); err != nil {
			s.log.Error("delete instance of a finished sandbox", "sandbox", j.sb.ID, "pool", pool, "error", err)
		}
	}
	return outNone, store.Sandbox{}
}

// wait keeps a claimed queued sandbox that placement could not place queued until at.
func (s *Scheduler) wait(ctx context.Context, id, reason string, at time.Time, candidates []store.Candidate) (outcome, store.Sandbox) {
	return s.finish(ctx, id, "", func(cur *store.Sandbox) (outcome, error) {
		return outRequeued, lifecycle.Wait(cur, reason, "", at, candidates, s.actor)
	})
}

// requeue sends the sandbox of a Create back to the queue as r says.
func (s *Scheduler) requeue(ctx context.Context, j job, r lifecycle.Retry) (outcome, store.Sandbox) {
	return s.finish(ctx, j.sb.ID, j.view.Pool.Name, func(cur *store.Sandbox) (outcome, error) {
		return outRequeued, lifecycle.Requeue(cur, r, s.actor)
	})
}

// retry counts an attempt and backs off, or fails the sandbox after MaxAttempts;
// avoidPool ranks the pool last for the next attempts.
func (s *Scheduler) retry(ctx context.Context, j job, reason, code string, avoidPool bool) (outcome, store.Sandbox) {
	pool := j.view.Pool.Name
	return s.finish(ctx, j.sb.ID, pool, func(cur *store.Sandbox) (outcome, error) {
		if attempts := cur.Attempts + 1; attempts >= s.opts.MaxAttempts {
			f := lifecycle.Failure{Reason: fmt.Sprintf("%s (gave up after %d attempts)", reason, attempts),
				Code: code, Counted: true, Duration: j.took}
			return outFailed, lifecycle.Fail(cur, f, s.actor)
		}
		now := s.clk.Now()
		r := lifecycle.Retry{Reason: reason, Code: code, At: now.Add(Backoff(cur.Attempts + 1)), Counted: true, Duration: j.took}
		if avoidPool {
			r.Avoid, r.AvoidUntil = pool, now.Add(avoidFor)
		}
		return outRequeued, lifecycle.Requeue(cur, r, s.actor)
	})
}

// fail ends the sandbox: before placement when pool is "", after its Create otherwise.
func (s *Scheduler) fail(ctx context.Context, id, pool string, f lifecycle.Failure) (outcome, store.Sandbox) {
	return s.finish(ctx, id, pool, func(cur *store.Sandbox) (outcome, error) {
		return outFailed, lifecycle.Fail(cur, f, s.actor)
	})
}

// finish applies fn to a sandbox this replica holds: queued and claimed when pool is
// "" (before placement), provisioning on pool otherwise. A sandbox deleted while its
// Create ran only gets its claim released, so the terminator need not wait for the
// lease to lapse. It returns the row as written (zero when nothing was).
func (s *Scheduler) finish(ctx context.Context, id, pool string, fn func(*store.Sandbox) (outcome, error)) (outcome, store.Sandbox) {
	o := outNone
	row, ok, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		switch {
		case pool == "" && s.ours(cur, store.StateQueued), s.provisioning(cur, pool):
			var err error
			o, err = fn(cur)
			return err
		case s.deletedWhileProvisioning(cur, pool):
			lifecycle.ReleaseClaim(cur)
			o = outNone
		default:
			return errStale
		}
		return nil
	})
	if err != nil {
		s.log.Error("update sandbox", "sandbox", id, "pool", pool, "error", err)
		return outError, store.Sandbox{}
	}
	if !ok {
		return outNone, store.Sandbox{}
	}
	return o, row
}

func (s *Scheduler) ours(cur *store.Sandbox, state store.State) bool {
	return cur.State == state && cur.ClaimedBy == s.opts.ReplicaID
}

func (s *Scheduler) provisioning(cur *store.Sandbox, pool string) bool {
	return pool != "" && cur.Pool == pool && s.ours(cur, store.StateProvisioning)
}

func (s *Scheduler) deletedWhileProvisioning(cur *store.Sandbox, pool string) bool {
	return pool != "" && cur.Pool == pool && cur.BackendRef == "" && s.ours(cur, store.StateTerminating)
}

// Backoff is the wait before the next attempt after attempts counted failures:
// 2 s × 2^min(attempts, 5).
func Backoff(attempts int) time.Duration {
	return RequeueDelay << min(max(attempts, 0), 5)
}

func (s *Scheduler) maxStarting(v pools.View) int {
	if v.Pool.MaxStarting > 0 {
		return v.Pool.MaxStarting
	}
	return s.opts.DefaultMaxStarting
}

// acquire takes one of the pool's start slots on this replica.
func (s *Scheduler) acquire(v pools.View) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting[v.Pool.Name] >= s.maxStarting(v) {
		return false
	}
	s.starting[v.Pool.Name]++
	return true
}

// unacquire gives back a start slot taken for a Create that was never placed there,
// without waking the loop: nothing that waited for the slot can use it now.
func (s *Scheduler) unacquire(pool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting[pool]--; s.starting[pool] <= 0 {
		delete(s.starting, pool)
	}
}

// releaseSlot gives a start slot back and wakes the provisioning loop when it may
// have left sandboxes queued for want of one (starved).
func (s *Scheduler) releaseSlot(pool string) {
	s.mu.Lock()
	if s.starting[pool]--; s.starting[pool] <= 0 {
		delete(s.starting, pool)
	}
	starved := s.starved
	s.starved = false
	s.mu.Unlock()
	if starved {
		wake(s.wakeProvision)
	}
}

func (s *Scheduler) setStarved() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starved = true
}

// freeSlots counts the start slots free on this replica over the pools that can take
// work (healthy, with an adapter, the breaker not open). paused counts those of the
// pools that could but for an open breaker, and only when no pool can take work
// (every usable pool is paused); it is zero otherwise.
func (s *Scheduler) freeSlots(views []pools.View) (free, paused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	usable := false
	for _, v := range views {
		if !v.Healthy || v.Adapter == nil {
			continue
		}
		n := max(0, s.maxStarting(v)-s.starting[v.Pool.Name])
		if v.Breaker.State == pools.BreakerOpen {
			paused += n
			continue
		}
		usable = true
		free += n
	}
	if usable {
		paused = 0
	}
	return free, paused
}

// preferOthers moves the pool that last answered insufficient_capacity, or failed
// as an outage, for sb to the end of the ranking while the row says to avoid it; it
// stays eligible, as the last resort.
func preferOthers(sb store.Sandbox, ranked []string, now time.Time) []string {
	avoid := sb.AvoidPool
	if avoid == "" || sb.AvoidUntil == nil || !now.Before(*sb.AvoidUntil) || len(ranked) < 2 || !slices.Contains(ranked, avoid) {
		return ranked
	}
	out := make([]string, 0, len(ranked))
	for _, p := range ranked {
		if p != avoid {
			out = append(out, p)
		}
	}
	return append(out, avoid)
}
