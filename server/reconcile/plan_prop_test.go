package reconcile

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/server/store"
)

// world is a random snapshot of what the database and one pool's backend hold.
type world struct {
	instances []adapters.Instance
	sandboxes map[string]store.Sandbox
}

var (
	propStates   = []store.State{store.StateQueued, store.StateProvisioning, store.StateRunning, store.StateStopped, store.StatePaused, store.StateTerminating}
	propInstance = []adapters.InstanceState{adapters.StateRunning, adapters.StateStopped, adapters.StatePaused, adapters.StateError, adapters.StatePending}
	propPools    = []string{"p", "p", "p", "q"}
	// Ages straddle the grace period (30 s) and the provision timeout plus the adopt
	// margin (150 s).
	propAges = []time.Duration{0, time.Second, 29 * time.Second, 30 * time.Second, 2 * time.Minute,
		149 * time.Second, 151 * time.Second, time.Hour}
	// Claims: none, lapsed, or live.
	propClaims = []time.Duration{0, -time.Second, time.Second, time.Minute}
)

func randomWorld(r *rand.Rand) world {
	w := world{sandboxes: map[string]store.Sandbox{}}
	refs := 0
	newRef := func() string { refs++; return fmt.Sprintf("r%d", refs) }
	for i := range r.IntN(12) {
		id := fmt.Sprintf("s%d", i)
		age := propAges[r.IntN(len(propAges))]
		sb := store.Sandbox{ID: id, Pool: propPools[r.IntN(len(propPools))], State: propStates[r.IntN(len(propStates))],
			StateChangedAt: t0.Add(-age), UpdatedAt: t0.Add(-propAges[r.IntN(len(propAges))]), Version: int64(r.IntN(5))}
		if sb.UpdatedAt.Before(sb.StateChangedAt) {
			sb.UpdatedAt = sb.StateChangedAt
		}
		if c := propClaims[r.IntN(len(propClaims))]; c != 0 && (sb.State == store.StateQueued || sb.State == store.StateProvisioning) {
			exp := t0.Add(c)
			sb.ClaimedBy, sb.ClaimExpiresAt = "replica", &exp
		}
		if sb.State != store.StateQueued && (sb.State != store.StateProvisioning || r.IntN(3) == 0) {
			sb.BackendRef = newRef()
		}
		w.sandboxes[id] = sb
		// Zero, one or two instances on this pool, sometimes the sandbox's own.
		for range r.IntN(3) {
			ref := newRef()
			if sb.BackendRef != "" && r.IntN(2) == 0 {
				ref = sb.BackendRef
			}
			w.instances = append(w.instances, adapters.Instance{Ref: ref, SandboxID: id, State: propInstance[r.IntN(len(propInstance))]})
		}
	}
	// Instances of sandboxes the database does not know.
	for range r.IntN(3) {
		w.instances = append(w.instances, adapters.Instance{Ref: newRef(), SandboxID: fmt.Sprintf("gone%d", r.IntN(100)), State: adapters.StateRunning})
	}
	// Lists never hold one ref twice.
	seen := map[string]bool{}
	out := w.instances[:0]
	for _, inst := range w.instances {
		if !seen[inst.Ref] {
			seen[inst.Ref] = true
			out = append(out, inst)
		}
	}
	w.instances = out
	return w
}

// TestPlanProperties checks, over many random worlds, the promises that make the
// reconciler safe to run against real backends.
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		w := randomWorld(r)
		actions := Plan("p", w.instances, w.sandboxes, timing)
		listed := map[string]adapters.Instance{}
		for _, inst := range w.instances {
			listed[inst.Ref] = inst
		}
		deleted := map[string]bool{}
		adopted := map[string]int{}
		requeued := map[string]bool{}
		for _, a := range actions {
			sb, known := w.sandboxes[a.SandboxID]
			fail := func(format string, args ...any) {
				t.Fatalf("world %d: action %+v: %s\nsandboxes %+v\ninstances %+v", i, a, fmt.Sprintf(format, args...), w.sandboxes, w.instances)
			}
			switch a.Kind {
			case DeleteOrphan, DeleteDuplicate:
				if _, ok := listed[a.Ref]; !ok {
					fail("deletes an instance the backend did not list")
				}
				// The one promise above all: never delete a live sandbox's own instance.
				for _, other := range w.sandboxes {
					if other.BackendRef == a.Ref {
						fail("deletes the current instance of sandbox %s", other.ID)
					}
				}
				if deleted[a.Ref] {
					fail("deletes one instance twice")
				}
				deleted[a.Ref] = true
			case Adopt:
				if !known || sb.Pool != "p" || sb.State != store.StateProvisioning || !stale(sb, timing) {
					fail("adopts a sandbox that is not stale in provisioning on this pool")
				}
				if own, ok := listed[sb.BackendRef]; ok && own.SandboxID == sb.ID && a.Ref != sb.BackendRef {
					fail("adopts another instance than the one the sandbox names")
				}
				if listed[a.Ref].SandboxID != a.SandboxID {
					fail("adopts another sandbox's instance")
				}
				if listed[a.Ref].State == adapters.StatePending {
					fail("adopts a pending instance, which a Create in flight may yet abort")
				}
				if sb.ClaimExpiresAt != nil && sb.ClaimExpiresAt.After(timing.Now) {
					fail("adopts a sandbox under a live claim")
				}
				adopted[a.SandboxID]++
			case Requeue:
				if !known || sb.State != store.StateProvisioning || !stale(sb, timing) {
					fail("requeues a sandbox that is not stale in provisioning")
				}
				if sb.ClaimExpiresAt != nil && sb.ClaimExpiresAt.After(timing.Now) {
					fail("requeues a sandbox under a live claim")
				}
				// Requeued only with nothing to adopt: no instance of it here, or only
				// pending ones, or its own is pending.
				if own, ok := listed[sb.BackendRef]; !ok || own.SandboxID != sb.ID || own.State != adapters.StatePending {
					for _, inst := range w.instances {
						if inst.SandboxID == sb.ID && inst.State != adapters.StatePending {
							fail("requeues a sandbox with an instance to adopt")
						}
					}
				}
				requeued[a.SandboxID] = true
			case Lost, Follow:
				if !known || sb.Pool != "p" || !settled(sb, timing) {
					fail("changes a sandbox that is on another pool or changed within the grace period")
				}
				if a.Kind == Lost {
					if inst, ok := listed[sb.BackendRef]; ok && inst.SandboxID == sb.ID {
						fail("reports lost a sandbox whose instance is listed")
					}
				}
			default:
				fail("unknown action")
			}
		}
		for id, n := range adopted {
			if n > 1 {
				t.Fatalf("world %d: sandbox %s adopted %d times", i, id, n)
			}
		}
		// After the plan, no settled sandbox on this pool keeps two instances.
		remaining := map[string]int{}
		for _, inst := range w.instances {
			if !deleted[inst.Ref] {
				remaining[inst.SandboxID]++
			}
		}
		for id, n := range remaining {
			sb, ok := w.sandboxes[id]
			if !ok && n > 0 {
				t.Fatalf("world %d: orphans of unknown sandbox %s survive", i, id)
			}
			if ok && sb.Pool == "p" && n > 1 && settled(sb, timing) && sb.State != store.StateQueued && !requeued[id] &&
				sb.State != store.StateTerminating && (sb.State != store.StateProvisioning || stale(sb, timing)) {
				t.Fatalf("world %d: settled sandbox %s (%s) keeps %d instances", i, id, sb.State, n)
			}
		}
	}
}
