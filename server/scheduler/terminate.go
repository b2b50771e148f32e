package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/api"
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

// expirable are the states in which a sandbox's TTL is enforced: nothing lives forever
// unless its TTL is unset, stopped and paused sandboxes included.
var expirable = []store.State{store.StateRunning, store.StateStopped, store.StatePaused, store.StateQueued}

// TerminateOnce deletes the instance of every terminating sandbox and marks it
// terminated. A failed Delete leaves the sandbox terminating with the error as its
// reason, to be retried by the next pass; not_found counts as deleted. A sandbox with
// no instance is terminated directly, unless a Create for it may still be in flight
// (placed, under a live claim): that Create's outcome brings the ref or releases the
// claim.
func (s *Scheduler) TerminateOnce(ctx context.Context) (Result, error) {
	res := Result{Pass: PassTerminate}
	sbs, err := s.listAll(ctx, []store.State{store.StateTerminating})
	if err != nil {
		return res, fmt.Errorf("list terminating sandboxes: %w", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.BatchSize)
	for _, sb := range sbs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			done, err := s.terminate(ctx, sb)
			mu.Lock()
			defer mu.Unlock()
			if done {
				res.Terminated++
			}
			if err != nil {
				res.Errors++
			}
		})
	}
	wg.Wait()
	return res, nil
}

func (s *Scheduler) terminate(ctx context.Context, sb store.Sandbox) (bool, error) {
	log := s.log.With("sandbox", sb.ID, "pool", sb.Pool)
	if sb.BackendRef == "" {
		if exp := sb.ClaimExpiresAt; sb.Pool != "" && sb.ClaimedBy != "" && exp != nil && exp.After(s.clk.Now()) {
			return false, nil
		}
		return s.markTerminated(ctx, sb, "")
	}
	view, ok := s.pools.View(sb.Pool)
	if !ok {
		// The pool cannot be deleted while this sandbox is not terminal, so this
		// replica has not loaded it yet: try again later rather than leak the instance.
		return false, s.deleteFailed(ctx, sb, fmt.Sprintf("pool %s is not loaded on this replica", sb.Pool))
	}
	if view.Adapter == nil {
		log.Warn("terminating without deleting the instance: the pool has no adapter", "reason", view.LastError)
		return s.markTerminated(ctx, sb, ReasonAdapterUnavailable)
	}
	dctx, cancel := context.WithTimeout(ctx, s.opts.TerminateTimeout)
	err := view.Adapter.Delete(dctx, sb.BackendRef)
	cancel()
	if err != nil && !api.IsCode(err, api.CodeNotFound) {
		log.Warn("delete failed", "error", err)
		return false, s.deleteFailed(ctx, sb, message(err))
	}
	return s.markTerminated(ctx, sb, "")
}

// markTerminated ends the sandbox; reason "" keeps why it was terminated (ttl
// expired, say) but drops a delete failure that no longer applies.
func (s *Scheduler) markTerminated(ctx context.Context, sb store.Sandbox, reason string) (bool, error) {
	_, ok, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
		if cur.State != store.StateTerminating || cur.BackendRef != sb.BackendRef {
			return errStale
		}
		cur.State = store.StateTerminated
		clearClaim(cur)
		switch {
		case reason != "":
			cur.Reason = reason
		case strings.HasPrefix(cur.Reason, deleteFailedPrefix):
			cur.Reason = ""
		}
		return nil
	})
	if err != nil {
		s.log.Error("mark terminated", "sandbox", sb.ID, "error", err)
	}
	return ok, err
}

// deleteFailed records why the sandbox is still terminating and returns an error
// for the pass's count.
func (s *Scheduler) deleteFailed(ctx context.Context, sb store.Sandbox, msg string) error {
	reason := deleteFailedPrefix + msg
	_, _, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
		// An unchanged reason is not rewritten, so a backend down for hours does not
		// bump the row on every tick.
		if cur.State != store.StateTerminating || cur.BackendRef != sb.BackendRef || cur.Reason == reason {
			return errStale
		}
		cur.Reason = reason
		return nil
	})
	return errors.Join(errors.New(reason), err)
}

// ExpireOnce moves every sandbox whose TTL has run out to terminating; TerminateOnce
// then deletes it. Provisioning sandboxes are left to finish: their expiry is set
// only once they run.
func (s *Scheduler) ExpireOnce(ctx context.Context) (Result, error) {
	res := Result{Pass: PassExpire}
	sbs, err := s.listAll(ctx, expirable)
	if err != nil {
		return res, fmt.Errorf("list expirable sandboxes: %w", err)
	}
	now := s.clk.Now()
	for _, sb := range sbs {
		if !expired(&sb, now) {
			continue
		}
		_, ok, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
			if !expired(cur, now) {
				return errStale
			}
			cur.State = store.StateTerminating
			cur.Reason = ReasonTTLExpired
			return nil
		})
		switch {
		case err != nil:
			s.log.Error("expire sandbox", "sandbox", sb.ID, "error", err)
			res.Errors++
		case ok:
			s.log.Info("sandbox expired", "sandbox", sb.ID)
			res.Expired++
		}
	}
	return res, nil
}

func expired(sb *store.Sandbox, now time.Time) bool {
	return slices.Contains(expirable, sb.State) && sb.ExpiresAt != nil && !sb.ExpiresAt.After(now)
}
