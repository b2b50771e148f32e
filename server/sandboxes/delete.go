package sandboxes

import (
	"context"
	"errors"
	"fmt"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
)

// Delete marks the sandbox terminating; the scheduler deletes the backend instance
// (if any) and moves it to terminated. One path for every state keeps a delete
// racing a provisioning attempt safe: the scheduler sees the terminating state under
// its row lock. In the same transaction, a sandbox with nothing to delete is
// terminated at once, and one with an instance is handed to this replica's
// scheduler, which deletes it as soon as the transaction commits
// (scheduler.Delete); otherwise a pass takes it. A sandbox already terminating or
// ended is returned as it is. started, when not nil, delivers the outcome of the
// Delete this replica began.
func (s *Service) Delete(ctx context.Context, c Caller, id string) (out store.Sandbox, started <-chan store.Sandbox, err error) {
	return s.deleteAs(ctx, c.Actor(), func(cur *store.Sandbox) bool { return c.Owns(cur.Org, cur.Project) },
		"deleted through the API", id)
}

// DeleteWarm deletes a warm sandbox for the warm-pool filler, with reason, unless a
// create has claimed it meanwhile: a claimed sandbox is its tenant's, and answers
// not_found here.
func (s *Service) DeleteWarm(ctx context.Context, by lifecycle.Actor, id, reason string) error {
	_, _, err := s.deleteAs(ctx, by, func(cur *store.Sandbox) bool { return cur.Org == store.WarmOrg }, reason, id)
	return err
}

// deleteAs is Delete by by, of a sandbox that owns says the deleter may see.
func (s *Service) deleteAs(ctx context.Context, by lifecycle.Actor, owns func(*store.Sandbox) bool, reason, id string) (out store.Sandbox, started <-chan store.Sandbox, err error) {
	var del *scheduler.Delete
	if s.direct != nil {
		del = s.direct.ReserveDelete()
	}
	defer del.Release() // unless started below
	var seen store.Sandbox
	now := s.now()
	out, err = s.update(ctx, id, func(cur *store.Sandbox) error {
		if !owns(cur) {
			return notFound("sandbox", id)
		}
		seen = *cur
		if cur.State.IsTerminal() || cur.State == store.StateTerminating {
			return errUnchanged
		}
		if err := lifecycle.Terminate(cur, reason, now, by); err != nil {
			return err
		}
		del.Prepare(cur, now, by)
		return nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		return seen, nil, nil
	case api.IsCode(err, api.CodeNotFound):
		// The same answer for a missing sandbox and another project's.
		return store.Sandbox{}, nil, notFound("sandbox", id)
	case err != nil:
		return store.Sandbox{}, nil, fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if started = del.Start(out); started == nil {
		s.waker.Wake(out.State)
	}
	return out, started, nil
}
