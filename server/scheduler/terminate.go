package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/store"
)

// ReasonAdapterUnavailable is the reason of a sandbox terminated without deleting its
// instance because its pool's adapter cannot be built on this build or config (E0.22).
// Retrying could never succeed, and the operator already sees the pool unhealthy with
// the cause, so the sandbox is let go rather than left terminating forever.
const ReasonAdapterUnavailable = "pool adapter unavailable; backend instance not deleted"

// ReasonTTLExpired is the reason of a sandbox terminated by ExpireOnce.
const ReasonTTLExpired = "ttl expired"

const deleteFailedPrefix = "delete failed: "

// errPoolDown marks a failed Delete that blames the pool's backend rather than the
// sandbox (unavailable, timed out, no adapter): the pool's other Deletes of the pass
// would fail the same way.
var errPoolDown = errors.New("the pool's backend is unavailable")

// expirable are the states in which a sandbox's TTL is enforced: nothing lives forever
// unless its TTL is unset, stopped and paused sandboxes included.
var expirable = []store.State{store.StateRunning, store.StateStopped, store.StatePaused, store.StateQueued}

// expiryListed are the states whose counts ExpireOnce publishes: the expirable ones,
// and provisioning, for differently_sandboxes.
var expiryListed = append([]store.State{store.StateProvisioning}, expirable...)

// TerminateOnce deletes the instance of every terminating sandbox and marks it
// terminated. A failed Delete leaves the sandbox terminating with the error as its
// reason, to be retried by the next pass; not_found counts as deleted. A sandbox with
// no instance is terminated directly, unless a Create for it may still be in flight
// (placed, under a live claim): that Create's outcome brings the ref or releases the
// claim.
func (s *Scheduler) TerminateOnce(ctx context.Context) (Result, error) {
	res := Result{Pass: PassTerminate}
	sbs, err := s.listAll(ctx, store.SandboxFilter{States: []store.State{store.StateTerminating}})
	if err != nil {
		return res, fmt.Errorf("list terminating sandboxes: %w", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	left := len(sbs) // still terminating after the pass, for differently_sandboxes
	// Each pool's sandboxes go through workers of their own, at most a quarter of
	// BatchSize per pool, so that a backend that is down (its Deletes held for
	// TerminateTimeout each) does not hold up the other pools' deletions. Once a
	// Delete says the backend is down, the rest of that pool's queue waits for the
	// next pass instead of holding this one; the queue is shuffled, so that what
	// waits is not the same sandboxes every pass.
	byPool := map[string][]store.Sandbox{}
	for _, sb := range sbs {
		byPool[sb.Pool] = append(byPool[sb.Pool], sb)
	}
	sem := make(chan struct{}, s.opts.BatchSize)
	perPool := max(1, s.opts.BatchSize/4)
	for _, queue := range byPool {
		rand.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
		next := make(chan store.Sandbox, len(queue))
		for _, sb := range queue {
			next <- sb
		}
		close(next)
		var down atomic.Bool
		for range min(perPool, len(queue)) {
			wg.Go(func() {
				for sb := range next {
					if down.Load() {
						continue
					}
					sem <- struct{}{}
					o, _, err := s.terminate(ctx, sb, false)
					<-sem
					if errors.Is(err, errPoolDown) {
						down.Store(true)
					}
					mu.Lock()
					switch o {
					case termTerminated:
						res.Terminated++
						left--
					case termFailed:
						res.Failed++
						left--
					}
					if err != nil {
						res.Errors++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	s.m.setDepth([]store.State{store.StateTerminating}, map[store.State]int{store.StateTerminating: left})
	return res, nil
}

// termOutcome is what one terminate call made of its sandbox.
type termOutcome int

const (
	termNone       termOutcome = iota // still terminating, or changed by someone else
	termTerminated                    // now terminated
	termFailed                        // given up on: now failed
)

// terminate deletes sb's instance and records the outcome, returning the row as it
// left it (zero when it wrote nothing). direct says that this call holds the
// sandbox's deletion claim (ReserveDelete); a pass leaves alone a sandbox whose
// deletion someone holds.
func (s *Scheduler) terminate(ctx context.Context, sb store.Sandbox, direct bool) (termOutcome, store.Sandbox, error) {
	log := s.log.With("sandbox", sb.ID, "pool", sb.Pool)
	now := s.clk.Now()
	if NoInstance(&sb, now) {
		return s.markTerminated(ctx, sb, "", termNoInstance)
	}
	if sb.BackendRef == "" || !direct && claimLive(&sb, now) {
		// A Create in flight brings the ref or releases the claim; a deletion in
		// flight ends the sandbox, or releases the claim when it fails.
		return termNone, store.Sandbox{}, nil
	}
	view, ok := s.pools.View(sb.Pool)
	if !ok {
		// The pool cannot be deleted while this sandbox is not terminal, so this
		// replica has not loaded it yet: try again later rather than leak the instance.
		return s.deleteFailed(ctx, sb, fmt.Sprintf("pool %s is not loaded on this replica", sb.Pool), "")
	}
	switch {
	case view.Adapter == nil && view.KindMissing:
		// No build of this daemon can reach the instance again (E0.22): retrying
		// would keep the sandbox terminating for ever.
		log.Warn("terminating without deleting the instance: this build has no adapter of the pool's kind", "reason", view.LastError)
		return s.markTerminated(ctx, sb, ReasonAdapterUnavailable, termAdapterUnavailable)
	case view.Adapter == nil:
		// A config or credential this replica cannot use now (perhaps only this
		// replica): the instance is still there, and it is deleted once the pool
		// builds again, here or on another replica. The reason is the tenant's to
		// read; why the adapter is missing is the operator's, in the log.
		log.Warn("cannot delete the instance yet: the pool has no adapter", "reason", view.LastError)
		o, row, err := s.deleteFailed(ctx, sb, fmt.Sprintf("pool %s is unavailable: its adapter could not be built", sb.Pool), string(api.CodeProviderUnavailable))
		return o, row, errors.Join(err, errPoolDown)
	}
	dctx, cancel := context.WithTimeout(ctx, s.opts.TerminateTimeout)
	err := adapters.DeleteInstance(dctx, view.Adapter, sb.BackendRef)
	cancel()
	if err != nil {
		log.Warn("delete failed", "ref", sb.BackendRef, "error", err)
		o, row, ferr := s.deleteFailed(ctx, sb, api.Message(err), string(api.CodeOf(err)))
		if api.IsCode(err, api.CodeProviderUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			ferr = errors.Join(ferr, errPoolDown)
		}
		return o, row, ferr
	}
	return s.markTerminated(ctx, sb, "", termDeleted)
}

// markTerminated ends the sandbox; reason "" keeps why it was terminated (ttl
// expired, say) but drops a delete failure that no longer applies. result labels
// differently_terminations_total.
func (s *Scheduler) markTerminated(ctx context.Context, sb store.Sandbox, reason, result string) (termOutcome, store.Sandbox, error) {
	// sb is a row as listed or as the move to terminating wrote it.
	row, ok, err := s.updateKnown(ctx, sb, func(cur *store.Sandbox) error {
		if cur.State != store.StateTerminating || cur.BackendRef != sb.BackendRef {
			return errStale
		}
		why := cur.Reason
		switch {
		case reason != "":
			why = reason
		case strings.HasPrefix(why, deleteFailedPrefix):
			why = ""
		}
		return lifecycle.Terminated(cur, why, s.actor)
	})
	switch {
	case err != nil:
		s.log.Error("mark terminated", "sandbox", sb.ID, "pool", sb.Pool, "error", err)
		return termNone, store.Sandbox{}, err
	case !ok:
		return termNone, store.Sandbox{}, nil
	}
	s.m.terminations.WithLabelValues(result).Inc()
	s.log.Info("sandbox terminated", "sandbox", sb.ID, "pool", sb.Pool, "result", result)
	return termTerminated, row, nil
}

// deleteFailed records why the sandbox is still terminating and returns an error
// for the pass's count. Once the sandbox has been terminating for TerminateGiveUp it
// is failed instead: its instance may still exist, and being no longer live it is an
// orphan to the reconciler, which keeps trying to delete it.
func (s *Scheduler) deleteFailed(ctx context.Context, sb store.Sandbox, msg, code string) (termOutcome, store.Sandbox, error) {
	s.m.terminations.WithLabelValues(termDeleteFailed).Inc()
	giveUp := !s.clk.Now().Before(sb.StateChangedAt.Add(s.opts.TerminateGiveUp))
	reason := deleteFailedPrefix + msg
	if giveUp {
		reason = fmt.Sprintf("delete kept failing for %s: %s; the backend instance may still exist", shortDuration(s.opts.TerminateGiveUp), msg)
	}
	o := termNone
	row, ok, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
		// An unchanged reason is not rewritten, so a backend down for hours does not
		// bump the row on every tick. A deletion claim is always released, so that
		// the passes retry.
		if cur.State != store.StateTerminating || cur.BackendRef != sb.BackendRef || cur.Reason == reason && cur.ClaimedBy == "" {
			return errStale
		}
		if giveUp && !cur.StateChangedAt.Equal(sb.StateChangedAt) {
			return errStale // it entered terminating again meanwhile: its clock restarted
		}
		if giveUp {
			o = termFailed
		}
		return lifecycle.DeleteFailed(cur, reason, code, giveUp, s.actor)
	})
	if ok && o == termFailed {
		s.m.terminations.WithLabelValues(termGaveUp).Inc()
		s.log.Error("gave up deleting the instance; sandbox failed", "sandbox", sb.ID, "pool", sb.Pool,
			"ref", sb.BackendRef, "error", msg)
	}
	if err != nil {
		s.log.Error("record delete failure", "sandbox", sb.ID, "pool", sb.Pool, "error", err)
	}
	if !ok {
		row = store.Sandbox{}
	}
	return o, row, errors.Join(errors.New(reason), err)
}

// shortDuration writes d as an operator would: 1h, 90m, 45s.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// ExpireOnce moves every sandbox whose TTL has run out to terminating; TerminateOnce
// then deletes it. Provisioning sandboxes are left to finish: their expiry is set
// only once they run. It reads only the expired sandboxes (an index serves the
// query), however many live ones there are.
//
// It also refreshes differently_sandboxes for every non-terminal state but
// terminating (TerminateOnce's listing does that one) from one count by state.
func (s *Scheduler) ExpireOnce(ctx context.Context) (Result, error) {
	res := Result{Pass: PassExpire}
	now := s.clk.Now()
	counts, err := s.st.CountSandboxesByState(ctx, expiryListed)
	if err != nil {
		return res, fmt.Errorf("count sandboxes: %w", err)
	}
	defer func() { s.m.setDepth(expiryListed, counts) }()
	sbs, err := s.listAll(ctx, store.SandboxFilter{States: expirable, ExpiresBy: &now})
	if err != nil {
		return res, fmt.Errorf("list expired sandboxes: %w", err)
	}
	for _, sb := range sbs {
		if !expired(&sb, now) {
			continue
		}
		_, ok, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
			if !expired(cur, now) {
				return errStale
			}
			return lifecycle.Terminate(cur, ReasonTTLExpired, now, s.actor)
		})
		switch {
		case err != nil:
			s.log.Error("expire sandbox", "sandbox", sb.ID, "pool", sb.Pool, "error", err)
			res.Errors++
		case ok:
			s.log.Info("sandbox expired", "sandbox", sb.ID, "pool", sb.Pool)
			res.Expired++
			counts[sb.State]--
		}
	}
	return res, nil
}

func expired(sb *store.Sandbox, now time.Time) bool {
	return slices.Contains(expirable, sb.State) && sb.ExpiresAt != nil && !sb.ExpiresAt.After(now)
}
