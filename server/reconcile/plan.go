package reconcile

import (
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/store"
)

// ActionKind names what the reconciler does about one finding.
type ActionKind string

const (
	// DeleteOrphan deletes an instance no live sandbox owns on this pool.
	DeleteOrphan ActionKind = "delete-orphan"
	// DeleteDuplicate deletes a second instance of a sandbox that already has one (E0.21).
	DeleteDuplicate ActionKind = "delete-duplicate"
	// Adopt marks a sandbox stuck in provisioning running on the instance that exists
	// for it: Create succeeded before a crash lost the answer.
	Adopt ActionKind = "adopt"
	// Requeue sends a sandbox stuck in provisioning with no instance back to the queue.
	Requeue ActionKind = "requeue"
	// Lost fails a sandbox whose instance disappeared from the backend.
	Lost ActionKind = "lost"
	// Follow copies a state change the backend made (stopped, error) onto the sandbox.
	Follow ActionKind = "follow"
)

// Action is one step of a plan. SandboxID is empty for orphans of unknown sandboxes.
type Action struct {
	Kind      ActionKind
	SandboxID string
	Ref       string
	// Region is where the backend says an adopted instance runs ("" when it does not say).
	Region string
	// State is the sandbox's new state for Follow.
	State store.State
	// Reason is written on the sandbox.
	Reason string
}

// DefaultAdoptMargin is how long past ProvisionTimeout a provisioning sandbox that
// no replica claims must be before the reconciler adopts or requeues it. The
// scheduler always claims the sandboxes it provisions, and for those the claim
// decides (stale); this margin is for a row without one, which no scheduler of this
// build writes. It is the scheduler's claim margin: the Create ends at
// ProvisionTimeout, and an adapter may take a moment more to abort a half-made
// instance.
const DefaultAdoptMargin = defaults.ProvisionMargin

// Timing bounds what the plan may touch.
type Timing struct {
	Now time.Time
	// ProvisionTimeout and AdoptMargin decide when a provisioning sandbox is stale,
	// with no Create for it in flight any more (stale). A zero AdoptMargin means
	// DefaultAdoptMargin.
	ProvisionTimeout time.Duration
	AdoptMargin      time.Duration
	// Grace: sandboxes changed more recently are not failed or followed, so the
	// reconciler never races a lifecycle call in progress on another replica.
	Grace time.Duration
	// ListedAt is when the pool's List began (Now when zero). Grace counts back from
	// it, not from Now: a sandbox that changed after the List began (a Create that
	// ended while a slower pool was being listed) is not in the List, and must not be
	// judged by it however long ago the change was by the time the plan is made.
	ListedAt time.Time
}

// Plan compares what one pool's backend reports with the sandboxes the database
// knows and returns what to do. It is pure: the same input always gives the same
// actions, in a stable order.
//
// instances is the pool's complete List. sandboxes holds every non-terminal sandbox,
// of every pool, read after the List: a sandbox row always exists before its
// instance, so an instance whose sandbox is missing here is an orphan, never one
// being created.
//
// Two rules hold whatever the backend's List says. An instance listed twice is one
// instance: adopting it under one entry and deleting it as the other's duplicate
// would delete what was adopted. And the instance a live sandbox on this pool names
// as its own is never deleted, even when the List labels it with another sandbox or
// with none.
func Plan(pool string, instances []adapters.Instance, sandboxes map[string]store.Sandbox, t Timing) []Action {
	var actions []Action
	bySandbox := make(map[string][]adapters.Instance, len(instances))
	listed := make(map[string]bool, len(instances))
	for _, inst := range instances {
		if listed[inst.Ref] {
			continue
		}
		listed[inst.Ref] = true
		bySandbox[inst.SandboxID] = append(bySandbox[inst.SandboxID], inst)
	}
	ids := make([]string, 0, len(bySandbox))
	for id := range bySandbox {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	for _, id := range ids {
		insts := bySandbox[id]
		slices.SortFunc(insts, func(a, b adapters.Instance) int { return strings.Compare(a.Ref, b.Ref) })
		sb, known := sandboxes[id]
		switch {
		case !known:
			for _, inst := range insts {
				actions = append(actions, Action{Kind: DeleteOrphan, SandboxID: id, Ref: inst.Ref, Reason: "no live sandbox owns this instance"})
			}
		case sb.Pool != pool:
			actions = append(actions, planElsewhere(sb, insts)...)
		default:
			actions = append(actions, planHere(sb, insts, t)...)
		}
	}

	// Sandboxes placed here that the backend did not report.
	var missing []string
	for id, sb := range sandboxes {
		if sb.Pool == pool && len(bySandbox[id]) == 0 {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	for _, id := range missing {
		sb := sandboxes[id]
		switch {
		case sb.State == store.StateProvisioning && sb.BackendRef == "" && stale(sb, t):
			actions = append(actions, Action{Kind: Requeue, SandboxID: id, Reason: "provisioning timed out with no instance on the backend; requeued"})
		case isLive(sb.State) && sb.BackendRef != "" && !listed[sb.BackendRef] && settled(sb, t):
			actions = append(actions, Action{Kind: Lost, SandboxID: id, Ref: sb.BackendRef, Reason: "backend instance disappeared"})
		}
	}
	return spareOwned(pool, actions, sandboxes)
}

// spareOwned drops the deletions of instances that a live sandbox on pool names as
// its own.
func spareOwned(pool string, actions []Action, sandboxes map[string]store.Sandbox) []Action {
	deletes := func(a Action) bool { return a.Kind == DeleteOrphan || a.Kind == DeleteDuplicate }
	if !slices.ContainsFunc(actions, deletes) {
		return actions
	}
	owned := make(map[string]bool)
	for _, sb := range sandboxes {
		if sb.Pool == pool && sb.BackendRef != "" {
			owned[sb.BackendRef] = true
		}
	}
	kept := slices.DeleteFunc(actions, func(a Action) bool { return deletes(a) && owned[a.Ref] })
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// planElsewhere handles instances of a sandbox that the database places on another
// pool. Two pools may share one backend, so the other pool's current instance is
// left alone; anything else is a leftover of an earlier placement, unless the
// sandbox is still being placed and the instance may yet become its own.
func planElsewhere(sb store.Sandbox, insts []adapters.Instance) []Action {
	if sb.State == store.StateQueued || sb.State == store.StateProvisioning {
		return nil
	}
	var out []Action
	for _, inst := range insts {
		if inst.Ref == sb.BackendRef {
			continue
		}
		out = append(out, Action{Kind: DeleteOrphan, SandboxID: sb.ID, Ref: inst.Ref, Reason: "left behind by a sandbox now on pool " + sb.Pool})
	}
	return out
}

func planHere(sb store.Sandbox, insts []adapters.Instance, t Timing) []Action {
	switch sb.State {
	case store.StateQueued, store.StateTerminating:
		// Queued: the provisioner's idempotent Create will pick the instance up.
		// Terminating: the terminator deletes it.
		return nil
	case store.StateProvisioning:
		if !stale(sb, t) {
			return nil
		}
		// Adopt the instance the sandbox already names, if the backend has it; else the
		// first. A pending instance is never adopted: it may be a Create's that is
		// still going to fail or be aborted. With nothing to adopt the sandbox is
		// requeued, and its next Create, keyed by its ID, takes the pending instance up.
		keep := -1
		for i := range insts {
			switch {
			case insts[i].Ref == sb.BackendRef && insts[i].State == adapters.StatePending:
				return []Action{requeuePending(sb)}
			case insts[i].Ref == sb.BackendRef, keep < 0 && insts[i].State != adapters.StatePending:
				keep = i
			}
		}
		if keep < 0 {
			return []Action{requeuePending(sb)}
		}
		// Either way exactly one survives.
		out := []Action{{Kind: Adopt, SandboxID: sb.ID, Ref: insts[keep].Ref, Region: insts[keep].Region}}
		for i, extra := range insts {
			if i != keep {
				out = append(out, Action{Kind: DeleteDuplicate, SandboxID: sb.ID, Ref: extra.Ref, Reason: "second instance of one sandbox"})
			}
		}
		return out
	}
	var out []Action
	var current *adapters.Instance
	for i := range insts {
		if insts[i].Ref == sb.BackendRef {
			current = &insts[i]
			continue
		}
		if settled(sb, t) {
			out = append(out, Action{Kind: DeleteDuplicate, SandboxID: sb.ID, Ref: insts[i].Ref, Reason: "second instance of one sandbox"})
		}
	}
	if current == nil || !settled(sb, t) {
		// An instance that is not the sandbox's own while its own is missing: the
		// missing-instance pass below does not see it (the sandbox has instances), so
		// report the loss here.
		if current == nil && sb.BackendRef != "" && settled(sb, t) {
			out = append(out, Action{Kind: Lost, SandboxID: sb.ID, Ref: sb.BackendRef, Reason: "backend instance disappeared"})
		}
		return out
	}
	switch {
	case current.State == adapters.StateError && sb.State != store.StateFailed:
		reason := "backend reports the instance failed"
		if current.Message != "" {
			reason += ": " + current.Message
		}
		out = append(out, Action{Kind: Follow, SandboxID: sb.ID, Ref: current.Ref, State: store.StateFailed, Reason: reason})
	case current.State == adapters.StateStopped && (sb.State == store.StateRunning || sb.State == store.StatePaused):
		out = append(out, Action{Kind: Follow, SandboxID: sb.ID, Ref: current.Ref, State: store.StateStopped, Reason: "stopped on the backend"})
	}
	return out
}

func isLive(s store.State) bool {
	return s == store.StateRunning || s == store.StatePaused || s == store.StateStopped
}

func requeuePending(sb store.Sandbox) Action {
	return Action{Kind: Requeue, SandboxID: sb.ID, Reason: "provisioning timed out with the instance still pending on the backend; requeued"}
}

// stale reports whether no Create for the provisioning sandbox can be in flight, as
// of when the pool's List began (the List must show what the Create left, not an
// instance it may yet abort).
//
// A claimed sandbox is stale once its claim had lapsed when the List began, and it
// had been provisioning for longer than ProvisionTimeout. The claim is the scheduler's
// word: it lasts the Create's deadline plus a margin for the adapter to return and
// for clock skew, and the Create is cut short to end within it (package scheduler).
// No margin of the reconciler's own is stacked on it. A sandbox without a claim is
// stale after ProvisionTimeout plus AdoptMargin.
func stale(sb store.Sandbox, t Timing) bool {
	at := t.ListedAt
	if at.IsZero() {
		at = t.Now
	}
	age := at.Sub(sb.StateChangedAt)
	if sb.ClaimedBy != "" && sb.ClaimExpiresAt != nil {
		return !sb.ClaimExpiresAt.After(at) && age > t.ProvisionTimeout
	}
	margin := t.AdoptMargin
	if margin <= 0 {
		margin = DefaultAdoptMargin
	}
	return age > t.ProvisionTimeout+margin
}

// settled reports whether the sandbox last changed at least Grace before its pool's
// List began.
func settled(sb store.Sandbox, t Timing) bool {
	at := t.ListedAt
	if at.IsZero() {
		at = t.Now
	}
	return at.Sub(sb.UpdatedAt) >= t.Grace
}
