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
const floorTxPerLifecycle = 6

var errFloorGuard = errors.New("floor: the sandbox is not in the state this step expects")

// floorLifecycle issues the store transactions one sandbox lifecycle needs, and no
// more, one sandbox at a time: create it queued (with the admission read the API's
// create makes), claim it, move it to provisioning on the pool, to running
// with its instance, to terminating (the delete) and to terminated. Reads the daemon
// makes on the way (token lookups, GETs, policy and pool counts, lists) are left out,
// so the floor is the best a daemon issuing these writes one by one could do.
func floorLifecycle(ctx context.Context, st store.Store, claimer string) error {
	if _, _, err := st.CreateSandboxAdmitted(ctx, time.Now(), store.Sandbox{
		ID: ids.New("sbx"), Org: "default", Project: "default",
		Placement: store.Placement{AllowedPools: []string{"fake"}},
	}, nil); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	// Claim one queued sandbox: this worker's or, as in the daemon, any due one. Every
	// claim follows a create, so one is always there, but a row another claimer holds
	// locked at that instant is skipped; try again.
	var sb store.Sandbox
	for attempt := 0; ; attempt++ {
		got, err := st.ClaimSandboxes(ctx, time.Now(), claimer, 150*time.Second, 1)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if len(got) == 1 {
			sb = got[0]
			break
		}
		if attempt >= 1000 {
			return errors.New("claim: no queued sandbox after 1000 attempts")
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
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
	if err := step(store.StateQueued, func(cur *store.Sandbox) {
		cur.State, cur.Pool, cur.Region = store.StateProvisioning, "fake", "local"
	}); err != nil {
		return err
	}
	if err := step(store.StateProvisioning, func(cur *store.Sandbox) {
		cur.State, cur.BackendRef = store.StateRunning, ids.New("fake")
		cur.ClaimedBy, cur.ClaimExpiresAt = "", nil
	}); err != nil {
		return err
	}
	if err := step(store.StateRunning, func(cur *store.Sandbox) {
		cur.State, cur.Reason, cur.NextAttemptAt = store.StateTerminating, "deleted through the API", time.Now()
	}); err != nil {
		return err
	}
	return step(store.StateTerminating, func(cur *store.Sandbox) {
		cur.State = store.StateTerminated
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
