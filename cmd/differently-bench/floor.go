package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// floorTxPerLifecycle counts the transactions of floorLifecycle.
const floorTxPerLifecycle = 4

var errFloorGuard = errors.New("floor: the sandbox is not in the state this step expects")

// floorLifecycle issues the store transactions one sandbox lifecycle needs in the
// daemon, and no more, one sandbox at a time, as a create and a delete handed
// straight to the scheduler make them: create it provisioning on the pool and
// claimed (with the admission read the API's create makes), move it to running with
// its instance, to terminating under a deletion claim (the delete) and to
// terminated. Reads the daemon makes on the way (token lookups, the exec's read)
// are left out, so the floor is the best a daemon issuing these writes one by one
// could do.
func floorLifecycle(ctx context.Context, st store.Store, claimer string) error {
	lease := func() *time.Time { t := time.Now().Add(150 * time.Second); return &t }
	sb, _, err := st.CreateSandboxAdmitted(ctx, time.Now(), store.Sandbox{
		ID: ids.New("sbx"), Org: "default", Project: "default",
		Placement: store.Placement{AllowedPools: []string{"fake"}},
		State:     store.StateProvisioning, Pool: "fake", Region: "local",
		ClaimedBy: claimer, ClaimExpiresAt: lease(),
	}, func(store.Admission, *store.Sandbox) error { return nil })
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	step := func(from store.State, fn func(*store.Sandbox)) error {
		_, err := st.UpdateSandbox(ctx, sb.ID, time.Now(), func(cur *store.Sandbox) error {
			if cur.State != from {
				return errFloorGuard
			}
			fn(cur)
			return nil
		})
		if err != nil {
			return fmt.Errorf("update from %s: %w", from, err)
		}
		return nil
	}
	if err := step(store.StateProvisioning, func(cur *store.Sandbox) {
		cur.State, cur.BackendRef = store.StateRunning, ids.New("fake")
		cur.ClaimedBy, cur.ClaimExpiresAt = "", nil
	}); err != nil {
		return err
	}
	if err := step(store.StateRunning, func(cur *store.Sandbox) {
		cur.State, cur.Reason, cur.NextAttemptAt = store.StateTerminating, "deleted through the API", time.Now()
		cur.ClaimedBy, cur.ClaimExpiresAt = claimer, lease()
	}); err != nil {
		return err
	}
	return step(store.StateTerminating, func(cur *store.Sandbox) {
		cur.State = store.StateTerminated
		cur.ClaimedBy, cur.ClaimExpiresAt = "", nil
	})
}

// floor runs -n floor lifecycles at concurrency -c on st.
func (b *bench) floor(ctx context.Context, st store.Store, res *result) error {
	n := b.opts.n
	start := time.Now()
	err := workers(ctx, n, b.opts.c, func(ctx context.Context, i int) error {
		return floorLifecycle(ctx, st, "floor-"+strconv.Itoa(i))
	})
	wall := time.Since(start)
	if err != nil {
		return err
	}
	f := &res.figures
	f.FloorLifecyclesPerS = round(float64(n) / wall.Seconds())
	f.FloorTxPerS = round(float64(n*floorTxPerLifecycle) / wall.Seconds())
	return nil
}
