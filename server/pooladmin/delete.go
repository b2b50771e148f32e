package pooladmin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// callTimeout bounds each backend call a pool delete makes.
const callTimeout = 60 * time.Second

// liveStates are the non-terminal states a forced delete moves to terminating.
var liveStates = []store.State{store.StateQueued, store.StateProvisioning, store.StateRunning,
	store.StateStopped, store.StatePaused}

// errUnchanged aborts an UpdateSandbox whose callback found nothing to write.
var errUnchanged = errors.New("unchanged")

// Delete removes a pool. Its sandboxes' instances can only be deleted through the
// pool's adapter, so the pool stays until none is left: without force a pool with
// tenants' sandboxes is invalid_state; with force every live sandbox is marked
// terminating (recorded as c's doing) and the scheduler is woken, and the delete
// answers invalid_state (details.terminating) until the scheduler has finished them.
// An operator retries the same call. Warm sandboxes (store.WarmOrg) are the pool's
// own, not a tenant's: they never hold a delete back. Once no tenant's sandbox stands
// in the way, the pool's warm shapes are cleared, so that no filler starts another,
// and its warm sandboxes are ended here (endWarm); only those still starting are left
// to the scheduler, and the delete answers invalid_state (details.terminating) until
// they are gone too. A config file's pool is refused first, forced or not, so that
// nothing of it is terminated for a delete that cannot happen; the store refuses it
// again under the delete's lock.
func (s *Service) Delete(ctx context.Context, c sandboxes.Caller, name string, force bool) error {
	p, err := s.apiPool(ctx, name)
	if err != nil {
		return err
	}
	n, err := s.countSandboxes(ctx, name)
	if err != nil {
		return err
	}
	if n > 0 && !force {
		return apierr.Conflict("pool has %d sandboxes; use force=true to terminate them", n).WithDetail("sandboxes", n)
	}
	if err := s.clearWarm(ctx, p); err != nil {
		return err
	}
	left, err := s.endWarm(ctx, c, name)
	if err != nil {
		return err
	}
	if n > 0 {
		if err := s.terminate(ctx, c, name); err != nil {
			return err
		}
	}
	if n+left > 0 {
		s.sched.Notify()
		if n, err = s.countSandboxes(ctx, name); err != nil {
			return err
		}
		if left, err = s.countWarm(ctx, name); err != nil {
			return err
		}
		if n+left > 0 {
			return apierr.Conflict("terminating %d sandboxes; retry the delete when they are gone", n+left).
				WithDetail("terminating", n+left)
		}
	}
	if err := s.emptyBackend(ctx, name, force); err != nil {
		return err
	}
	if err := s.st.DeletePool(ctx, name); err != nil {
		return err
	}
	s.refresh(ctx)
	return nil
}

// clearWarm removes p's warm shapes, so that no replica's filler starts another warm
// sandbox for a pool being deleted, and rebuilds the views at once so that this
// replica's does not either. A filler whose views are older may still start one:
// it is queued for no pool, and the filler ends it as the warm sandbox of a shape no
// pool declares, or countWarm finds it and the delete is retried.
func (s *Service) clearWarm(ctx context.Context, p store.Pool) error {
	if len(p.Warm) == 0 {
		return nil
	}
	p.Warm = nil
	if _, err := s.st.UpdatePool(ctx, s.now(), p); err != nil {
		return fmt.Errorf("clear the warm shapes of pool %s: %w", p.Name, err)
	}
	s.refresh(ctx)
	return nil
}

// isWarmOf says whether sb is one of pool's warm sandboxes: placed on it, or still
// queued in one of its shapes' projects (named pool.shape; a pool's name has no dot).
func isWarmOf(sb store.Sandbox, pool string) bool {
	return sb.Org == store.WarmOrg && (sb.Pool == pool || sb.Pool == "" && strings.HasPrefix(sb.Project, pool+"."))
}

// warmOf lists pool's warm sandboxes in states.
func (s *Service) warmOf(ctx context.Context, pool string, states []store.State) ([]store.Sandbox, error) {
	var out []store.Sandbox
	err := s.st.EachSandbox(ctx, store.SandboxFilter{Org: store.WarmOrg, States: states}, func(sb store.Sandbox) error {
		if isWarmOf(sb, pool) {
			out = append(out, sb)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the warm sandboxes of pool %s: %w", pool, err)
	}
	return out, nil
}

// countWarm counts pool's warm sandboxes that have not ended.
func (s *Service) countWarm(ctx context.Context, pool string) (int, error) {
	sbs, err := s.warmOf(ctx, pool, store.NonTerminalStates)
	return len(sbs), err
}

// endWarm ends pool's warm sandboxes through server/lifecycle, as c's doing: each
// is marked terminating; a running one's instance is deleted through the pool's
// adapter and the sandbox marked terminated, so that a pool of ready warm sandboxes
// is deleted in one call. A queued or provisioning one (a Create may be under way)
// and one whose instance could not be deleted are left terminating, for the
// scheduler, which is woken. left counts those.
func (s *Service) endWarm(ctx context.Context, c sandboxes.Caller, pool string) (left int, err error) {
	sbs, err := s.warmOf(ctx, pool, store.NonTerminalStates)
	if err != nil || len(sbs) == 0 {
		return 0, err
	}
	v, hasView := s.pools.View(pool)
	reason := "pool " + pool + " is being deleted"
	for _, sb := range sbs {
		var was store.State
		cur, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
			if !isWarmOf(*cur, pool) {
				// Claimed meanwhile: a tenant's now, which countSandboxes sees.
				return errUnchanged
			}
			was = cur.State
			if cur.State == store.StateTerminating {
				return nil
			}
			if cur.State.IsTerminal() {
				return errUnchanged
			}
			return lifecycle.Terminate(cur, reason, s.now(), c.Actor())
		})
		switch {
		case errors.Is(err, errUnchanged) || api.IsCode(err, api.CodeNotFound):
			continue
		case err != nil:
			return 0, fmt.Errorf("terminate warm sandbox %s: %w", sb.ID, err)
		}
		if was != store.StateRunning || cur.BackendRef == "" || !hasView || v.Adapter == nil {
			left++
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, callTimeout)
		err = adapters.DeleteInstance(dctx, v.Adapter, cur.BackendRef)
		cancel()
		if err != nil {
			s.log.Warn("delete the instance of a warm sandbox of a pool being deleted", "pool", pool, "sandbox", sb.ID, "error", err)
			left++
			continue
		}
		_, err = s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
			if cur.State != store.StateTerminating {
				// The scheduler ended it meanwhile.
				return errUnchanged
			}
			return lifecycle.Terminated(cur, reason, c.Actor())
		})
		if err != nil && !errors.Is(err, errUnchanged) && !api.IsCode(err, api.CodeNotFound) {
			return 0, fmt.Errorf("end warm sandbox %s: %w", sb.ID, err)
		}
	}
	return left, nil
}

// emptyBackend checks, before a pool is deleted, that its backend holds no instance
// of this installation: once the pool is gone nothing would ever delete one (the
// reconciler lists only the pools it knows). Such instances are orphans (a sandbox
// failed while its Delete kept failing, say); forced, they are deleted here. A pool
// whose backend cannot be listed (no adapter, the List fails) is deleted as before:
// nothing could delete its instances either way, and refusing would keep a pool
// whose backend is gone for good.
func (s *Service) emptyBackend(ctx context.Context, name string, force bool) error {
	v, ok := s.pools.View(name)
	if !ok || v.Adapter == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	insts, err := v.Adapter.List(lctx, s.inst)
	cancel()
	switch {
	case err != nil:
		s.log.Warn("deleting a pool whose instances could not be listed", "pool", name, "error", err)
		return nil
	case len(insts) == 0:
		return nil
	case !force:
		return apierr.Conflict("the backend of pool %s still holds %d instances of this installation, which the reconciler deletes as orphans in its next pass; retry then, or use force=true to delete them with the pool now", name, len(insts)).
			WithDetail("instances", len(insts))
	}
	left := 0
	for _, inst := range insts {
		dctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := adapters.DeleteInstance(dctx, v.Adapter, inst.Ref)
		cancel()
		if err != nil {
			s.log.Warn("delete instance of a pool being deleted", "pool", name, "ref", inst.Ref, "error", err)
			left++
		}
	}
	if left > 0 {
		return apierr.Conflict("%d instances of pool %s could not be deleted; retry the delete", left, name).WithDetail("instances", left)
	}
	return nil
}

// countSandboxes counts the pool's tenants' sandboxes that have not ended: its
// warm sandboxes (countWarm) are not a tenant's.
func (s *Service) countSandboxes(ctx context.Context, name string) (int, error) {
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	if counts[name] == 0 {
		return 0, nil
	}
	warm := 0
	err = s.st.EachSandbox(ctx, store.SandboxFilter{Org: store.WarmOrg, Pool: name, States: store.NonTerminalStates},
		func(store.Sandbox) error { warm++; return nil })
	if err != nil {
		return 0, fmt.Errorf("count warm sandboxes: %w", err)
	}
	// A claim between the two reads makes this one too few: the store's DeletePool
	// then refuses, under its lock, what this let through.
	return max(counts[name]-warm, 0), nil
}

// terminate marks every live sandbox of the pool terminating, a page at a time. A
// sandbox that ended, began terminating or moved to another pool since the page was
// read is left as it is.
func (s *Service) terminate(ctx context.Context, c sandboxes.Caller, name string) error {
	cursor := ""
	for {
		page, next, err := s.st.ListSandboxes(ctx, store.SandboxFilter{Pool: name, States: liveStates, Cursor: cursor, Limit: store.MaxLimit})
		if err != nil {
			return fmt.Errorf("list sandboxes of pool %s: %w", name, err)
		}
		for _, sb := range page {
			_, err := s.update(ctx, sb.ID, func(cur *store.Sandbox) error {
				if cur.State.IsTerminal() || cur.State == store.StateTerminating || cur.Pool != name {
					return errUnchanged
				}
				return lifecycle.Terminate(cur, "pool "+name+" is being deleted", s.now(), c.Actor())
			})
			if err != nil && !errors.Is(err, errUnchanged) && !api.IsCode(err, api.CodeNotFound) {
				return fmt.Errorf("terminate sandbox %s: %w", sb.ID, err)
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// update changes a sandbox with store.UpdateSandbox, in a transaction shared with
// the replica's other writes when there is a Batcher.
func (s *Service) update(ctx context.Context, id string, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	if s.writes != nil {
		return s.writes.UpdateSandbox(ctx, id, fn)
	}
	return s.st.UpdateSandbox(ctx, id, s.now(), fn)
}
