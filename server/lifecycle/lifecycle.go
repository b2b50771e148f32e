// Package lifecycle is the sandbox state machine. Its transitions are the only code
// that changes a sandbox's state and the fields that go with a state (pool, region,
// backend reference, reason, claim, next attempt, expiry, pools to avoid), and each
// records what it did as a store.Event on the sandbox's Pending list, which the store
// appends in the transaction that writes the change.
//
// A transition is called on the sandbox as the store holds it, inside
// store.UpdateSandbox's function (or on a new sandbox before CreateSandbox), and
// returns an error, without changing anything, when the sandbox's state does not
// allow it. Deciding what should happen (which pool, whether an attempt is the last,
// how long to back off) is the caller's: the scheduler, the reconciler and the
// sandbox service. Recording it consistently is this package's.
//
// The transitions, from state to state:
//
//	Create       ""                                  -> queued
//	Place        queued                              -> provisioning
//	Wait         queued                              -> queued (a new reason)
//	Run          provisioning                        -> running
//	Adopt        queued, provisioning                -> running
//	Requeue      queued, provisioning                -> queued
//	Fail         any state but terminated and failed -> failed
//	Operate      running -> stopped (stop), stopped -> running (start),
//	             running -> paused (pause), paused -> running (resume)
//	Observe      running, stopped, paused            -> running, stopped, paused
//	Terminate    any state but terminating, terminated and failed -> terminating
//	BindInstance terminating                         -> terminating (a late instance)
//	DeleteFailed terminating                         -> terminating, or failed when given up
//	Terminated   terminating                         -> terminated
package lifecycle

import (
	"github.com/different-ai/differently/adapters"

	"maps"

	"fmt"
	"slices"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// Actor is who makes a transition, as recorded in its event.
type Actor string

// Scheduler is the actor of the scheduler of a replica.
func Scheduler(replica string) Actor { return Actor("scheduler:" + replica) }

// Reconciler is the actor of the reconciler of a replica.
func Reconciler(replica string) Actor { return Actor("reconciler:" + replica) }

// Token is the actor of an API call made with a token.
func Token(id string) Actor { return Actor("token:" + id) }

// Warm is a replica's warm-pool filler, which creates and replaces warm sandboxes.
func Warm(replica string) Actor { return Actor("warm:" + replica) }

// illegal is the error of a transition the sandbox's state does not allow: an
// api.Error with code invalid_state, which the API answers with 409.
func illegal(sb *store.Sandbox, what string) error {
	return api.Errorf(api.CodeInvalidState, "cannot %s a sandbox that is %s", what, sb.State).
		WithDetail("state", string(sb.State))
}

func record(sb *store.Sandbox, e store.Event) {
	sb.Pending = append(sb.Pending, e)
}

// Create makes a new sandbox queued, due at once. It is the first transition of every
// sandbox; Place may follow it in the same write.
func Create(sb *store.Sandbox, now time.Time, by Actor) error {
	if sb.State != "" && sb.State != store.StateQueued {
		return illegal(sb, "create")
	}
	sb.State = store.StateQueued
	sb.Pool, sb.Region, sb.BackendRef = "", "", ""
	sb.NextAttemptAt = now
	clearClaim(sb)
	record(sb, store.Event{Type: store.EventCreated, To: store.StateQueued, Actor: string(by), Message: sb.Reason})
	return nil
}

// Placement is where Place puts a sandbox and under whose claim.
type Placement struct {
	Pool   string
	Region string
	// Claimer and ClaimUntil are the provisioning claim: the replica that makes the
	// Create, and until when no other may touch the sandbox.
	Claimer    string
	ClaimUntil time.Time
	// Candidates are the pools placement weighed (the event's record).
	Candidates []store.Candidate
}

// Place moves a queued sandbox to provisioning on a pool, claimed for its Create.
func Place(sb *store.Sandbox, p Placement, now time.Time, by Actor) error {
	if sb.State != store.StateQueued {
		return illegal(sb, "place")
	}
	sb.State = store.StateProvisioning
	sb.Pool, sb.Region = p.Pool, p.Region
	sb.Reason = ""
	sb.NextAttemptAt = now
	until := p.ClaimUntil
	sb.ClaimedBy, sb.ClaimExpiresAt = p.Claimer, &until
	record(sb, store.Event{Type: store.EventPlaced, From: store.StateQueued, To: store.StateProvisioning,
		Actor: string(by), Pool: p.Pool, Attempt: sb.Attempts + 1, Candidates: p.Candidates})
	return nil
}

// Wait keeps a queued sandbox queued, with a new reason and next attempt, and gives
// back any claim on it. It records an event only when the reason changed, so a
// sandbox waiting for capacity does not add an event at every pass.
func Wait(sb *store.Sandbox, reason, code string, at time.Time, candidates []store.Candidate, by Actor) error {
	if sb.State != store.StateQueued {
		return illegal(sb, "requeue")
	}
	changed := sb.Reason != reason
	sb.Reason = reason
	sb.NextAttemptAt = at
	clearClaim(sb)
	if changed {
		record(sb, store.Event{Type: store.EventWaiting, From: store.StateQueued, To: store.StateQueued,
			Actor: string(by), Code: code, Message: reason, Candidates: candidates})
	}
	return nil
}

// Instance is what a backend's Create answered.
type Instance struct {
	Ref    string
	Region string
}

// Run makes a provisioning sandbox running on the instance its Create made.
// duration is how long the Create took.
func Run(sb *store.Sandbox, inst Instance, now time.Time, duration time.Duration, by Actor) error {
	if sb.State != store.StateProvisioning {
		return illegal(sb, "run")
	}
	from := sb.State
	running(sb, inst, now)
	record(sb, store.Event{Type: store.EventRunning, From: from, To: store.StateRunning, Actor: string(by),
		Pool: sb.Pool, Attempt: sb.Attempts + 1, DurationMs: duration.Milliseconds()})
	return nil
}

// Adopt makes running a sandbox whose instance the reconciler found on its pool
// although no Create recorded it (a replica died between the backend's answer and
// the write). The fields are those Run writes.
func Adopt(sb *store.Sandbox, inst Instance, now time.Time, reason string, by Actor) error {
	if sb.State != store.StateQueued && sb.State != store.StateProvisioning {
		return illegal(sb, "adopt")
	}
	from := sb.State
	running(sb, inst, now)
	record(sb, store.Event{Type: store.EventAdopted, From: from, To: store.StateRunning, Actor: string(by),
		Pool: sb.Pool, Message: reason})
	return nil
}

// LabelWarm marks a sandbox that was created by claiming a warm one of its pool.
const LabelWarm = adapters.ReservedLabelPrefix + "warm"

// Claim makes sb, a new sandbox, out of warm, a running warm sandbox of its pool: sb
// takes warm's ID, pool, region and instance and is running from now, its TTL
// counting from now; what sb's create asked for (tenant, labels, TTL, placement,
// idempotency key) stays its own. sb must be new (no state yet), asking for what
// warm runs: the same template, resources and environment.
func Claim(sb *store.Sandbox, warm store.Sandbox, now time.Time, by Actor) error {
	switch {
	case sb.State != "" && sb.State != store.StateQueued:
		return illegal(sb, "create by claiming")
	case warm.State != store.StateRunning || warm.BackendRef == "":
		return illegal(&warm, "claim")
	case sb.Template != warm.Template || sb.Resources != warm.Resources || !maps.Equal(sb.Env, warm.Env):
		return api.Errorf(api.CodeInvalidState, "warm sandbox %s runs another template, resources or environment", warm.ID)
	}
	sb.ID = warm.ID
	sb.Attempts = 0
	sb.NextAttemptAt = now
	sb.AvoidPool, sb.AvoidUntil = "", nil
	sb.Pool = warm.Pool
	sb.Labels = maps.Clone(sb.Labels)
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	sb.Labels[LabelWarm] = "true"
	running(sb, Instance{Ref: warm.BackendRef, Region: warm.Region}, now)
	sb.Region = warm.Region
	record(sb, store.Event{Type: store.EventClaimed, To: store.StateRunning, Actor: string(by), Pool: warm.Pool,
		Message: "took over warm sandbox " + warm.ID + " of pool " + warm.Pool + ", running since " +
			warm.StateChangedAt.UTC().Format(time.RFC3339)})
	return nil
}

func running(sb *store.Sandbox, inst Instance, now time.Time) {
	sb.State = store.StateRunning
	sb.BackendRef = inst.Ref
	if inst.Region != "" {
		sb.Region = inst.Region
	}
	sb.Reason = ""
	sb.AvoidPool, sb.AvoidUntil = "", nil
	clearClaim(sb)
	if sb.TTLSeconds > 0 {
		exp := store.ExpiresAt(now, sb.TTLSeconds)
		sb.ExpiresAt = &exp
	}
}

// Retry is why and when a sandbox goes back to the queue.
type Retry struct {
	Reason string
	// Code is the error code of the failed attempt, "" when none failed (a lapsed
	// claim, a shutdown).
	Code string
	// At is when the sandbox is due again.
	At time.Time
	// Counted says that the attempt counts towards the sandbox's limit.
	Counted bool
	// Avoid, until AvoidUntil, is a pool to rank last at the next attempts.
	Avoid      string
	AvoidUntil time.Time
	// Duration is how long the failed call took.
	Duration time.Duration
}

// Requeue sends a queued or provisioning sandbox back to the queue, to be placed
// afresh: its pool is cleared, so that it does not count against that pool's
// maxConcurrency while it waits.
func Requeue(sb *store.Sandbox, r Retry, by Actor) error {
	if sb.State != store.StateQueued && sb.State != store.StateProvisioning {
		return illegal(sb, "requeue")
	}
	from, pool, attempt := sb.State, sb.Pool, sb.Attempts+1
	if r.Counted {
		sb.Attempts++
	}
	sb.State = store.StateQueued
	sb.Pool, sb.Region = "", ""
	sb.Reason = r.Reason
	sb.NextAttemptAt = r.At
	clearClaim(sb)
	if r.Avoid != "" {
		until := r.AvoidUntil
		sb.AvoidPool, sb.AvoidUntil = r.Avoid, &until
	}
	record(sb, store.Event{Type: store.EventRequeued, From: from, To: store.StateQueued, Actor: string(by),
		Pool: pool, Attempt: attempt, Code: r.Code, Message: r.Reason, DurationMs: r.Duration.Milliseconds()})
	return nil
}

// Failure is why a sandbox failed.
type Failure struct {
	Reason string
	Code   string
	// Counted says that a Create was attempted and counts as an attempt.
	Counted  bool
	Duration time.Duration
}

// Fail ends a sandbox that is not finished yet without deleting anything: a Create
// that cannot succeed, a lost instance, a delete given up on.
func Fail(sb *store.Sandbox, f Failure, by Actor) error {
	if sb.State == "" || sb.State.IsTerminal() {
		return illegal(sb, "fail")
	}
	from, attempt := sb.State, 0
	if f.Counted {
		sb.Attempts++
		attempt = sb.Attempts
	}
	sb.State = store.StateFailed
	sb.Reason = f.Reason
	clearClaim(sb)
	record(sb, store.Event{Type: store.EventFailed, From: from, To: store.StateFailed, Actor: string(by),
		Pool: sb.Pool, Attempt: attempt, Code: f.Code, Message: f.Reason, DurationMs: f.Duration.Milliseconds()})
	return nil
}

// Op is a lifecycle action on a sandbox with an instance.
type Op string

// The lifecycle actions.
const (
	OpStop   Op = "stop"
	OpStart  Op = "start"
	OpPause  Op = "pause"
	OpResume Op = "resume"
)

type opRule struct {
	from, to store.State
	event    store.EventType
}

var opRules = map[Op]opRule{
	OpStop:   {store.StateRunning, store.StateStopped, store.EventStopped},
	OpStart:  {store.StateStopped, store.StateRunning, store.EventStarted},
	OpPause:  {store.StateRunning, store.StatePaused, store.EventPaused},
	OpResume: {store.StatePaused, store.StateRunning, store.EventResumed},
}

// From is the state the action needs ("" for an unknown action).
func (o Op) From() store.State { return opRules[o].from }

// To is the state the action leaves the sandbox in.
func (o Op) To() store.State { return opRules[o].to }

// Operate records a lifecycle action the backend has carried out.
func Operate(sb *store.Sandbox, op Op, by Actor) error {
	rule, ok := opRules[op]
	if !ok {
		return fmt.Errorf("lifecycle: unknown action %q", op)
	}
	if sb.State != rule.from {
		return illegal(sb, string(op))
	}
	sb.State = rule.to
	sb.Reason = ""
	record(sb, store.Event{Type: rule.event, From: rule.from, To: rule.to, Actor: string(by), Pool: sb.Pool})
	return nil
}

// Observe makes the database follow an instance the reconciler found running,
// stopped or paused when the sandbox says otherwise (changed outside Differently).
func Observe(sb *store.Sandbox, to store.State, reason string, by Actor) error {
	settled := func(s store.State) bool {
		return s == store.StateRunning || s == store.StateStopped || s == store.StatePaused
	}
	if !settled(sb.State) || !settled(to) {
		return illegal(sb, "follow the backend of")
	}
	from := sb.State
	sb.State = to
	sb.Reason = reason
	record(sb, store.Event{Type: store.EventObserved, From: from, To: to, Actor: string(by), Pool: sb.Pool, Message: reason})
	return nil
}

// Terminate marks a sandbox for deletion, due at once. The termination passes (or
// the replica that takes the deletion directly) delete its instance.
func Terminate(sb *store.Sandbox, reason string, now time.Time, by Actor) error {
	if sb.State == "" || sb.State.IsTerminal() || sb.State == store.StateTerminating {
		return illegal(sb, "delete")
	}
	from := sb.State
	sb.State = store.StateTerminating
	sb.Reason = reason
	sb.NextAttemptAt = now
	record(sb, store.Event{Type: store.EventTerminating, From: from, To: store.StateTerminating, Actor: string(by),
		Pool: sb.Pool, Message: reason})
	return nil
}

// BindInstance records on a sandbox deleted while its Create ran the instance the
// Create made, so that its deletion can go ahead, and gives back the Create's claim.
func BindInstance(sb *store.Sandbox, ref string, by Actor) error {
	if sb.State != store.StateTerminating || sb.BackendRef != "" {
		return illegal(sb, "bind an instance to")
	}
	sb.BackendRef = ref
	clearClaim(sb)
	record(sb, store.Event{Type: store.EventInstanceBound, From: store.StateTerminating, To: store.StateTerminating,
		Actor: string(by), Pool: sb.Pool})
	return nil
}

// DeleteFailed records a failed Delete of a terminating sandbox, which stays
// terminating to be retried, and gives back the deletion claim. With giveUp the
// sandbox fails instead: the instance may outlive it, an orphan to the reconciler.
func DeleteFailed(sb *store.Sandbox, reason, code string, giveUp bool, by Actor) error {
	if sb.State != store.StateTerminating {
		return illegal(sb, "record a failed delete of")
	}
	clearClaim(sb)
	if giveUp {
		return Fail(sb, Failure{Reason: reason, Code: code}, by)
	}
	changed := sb.Reason != reason
	sb.Reason = reason
	if changed {
		record(sb, store.Event{Type: store.EventDeleteFailed, From: store.StateTerminating, To: store.StateTerminating,
			Actor: string(by), Pool: sb.Pool, Code: code, Message: reason})
	}
	return nil
}

// Terminated ends a terminating sandbox whose instance is gone. reason replaces the
// sandbox's reason (pass the current one to keep it).
func Terminated(sb *store.Sandbox, reason string, by Actor) error {
	if sb.State != store.StateTerminating {
		return illegal(sb, "end")
	}
	sb.State = store.StateTerminated
	sb.Reason = reason
	clearClaim(sb)
	record(sb, store.Event{Type: store.EventTerminated, From: store.StateTerminating, To: store.StateTerminated,
		Actor: string(by), Pool: sb.Pool, Message: reason})
	return nil
}

// ReleaseClaim gives back a claim without changing the sandbox's state (a pass that
// could not place what it claimed, a Create that ended after a delete). It records
// no event: a claim is who works on the sandbox, not what became of it.
func ReleaseClaim(sb *store.Sandbox) { clearClaim(sb) }

func clearClaim(sb *store.Sandbox) {
	sb.ClaimedBy = ""
	sb.ClaimExpiresAt = nil
}

// Candidates is the record of a placement: the pools that could take the sandbox,
// best first, then those passed over with why, by name.
func Candidates(ranked []string, rejected map[string]string) []store.Candidate {
	if len(ranked)+len(rejected) == 0 {
		return nil
	}
	out := make([]store.Candidate, 0, len(ranked)+len(rejected))
	for i, name := range ranked {
		out = append(out, store.Candidate{Pool: name, Rank: i + 1})
	}
	names := make([]string, 0, len(rejected))
	for name := range rejected {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		out = append(out, store.Candidate{Pool: name, Reason: rejected[name]})
	}
	return out
}
