package pooladmin

import (
	"context"
	"errors"
	"fmt"
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
// sandboxes is invalid_state; with force every live sandbox is marked terminating
// (recorded as c's doing) and the scheduler is woken, and the delete answers
// invalid_state (details.terminating) until the scheduler has finished them. An
// operator retries the same call. A config file's pool is refused first, forced or
// not, so that nothing of it is terminated for a delete that cannot happen; the
// store refuses it again under the delete's lock.
func (s *Service) Delete(ctx context.Context, c sandboxes.Caller, name string, force bool) error {
	if _, err := s.apiPool(ctx, name); err != nil {
		return err
	}
	n, err := s.countSandboxes(ctx, name)
	if err != nil {
		return err
	}
	if n > 0 && !force {
		return apierr.Conflict("pool has %d sandboxes; use force=true to terminate them", n).WithDetail("sandboxes", n)
	}
	if n > 0 {
		if err := s.terminate(ctx, c, name); err != nil {
			return err
		}
		s.sched.Notify()
		if n, err = s.countSandboxes(ctx, name); err != nil {
			return err
		}
		if n > 0 {
			return apierr.Conflict("terminating %d sandboxes; retry the delete when they are gone", n).
				WithDetail("terminating", n)
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

// countSandboxes counts the pool's sandboxes that have not ended.
func (s *Service) countSandboxes(ctx context.Context, name string) (int, error) {
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	return counts[name], nil
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
