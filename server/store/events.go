package store

import "time"

// EventType names what happened to a sandbox. Each transition of server/lifecycle
// records one type; the list is part of the public API (docs/events.md).
type EventType string

// The event types.
const (
	// EventCreated: the sandbox was stored (from "" to queued, or to provisioning
	// when it started at once, in which case EventPlaced follows in the same write).
	EventCreated EventType = "created"
	// EventPlaced: placement chose a pool; Candidates says which pools were
	// considered and why the others were passed over.
	EventPlaced EventType = "placed"
	// EventRunning: the backend's Create succeeded (Pool, Attempt, DurationMs).
	EventRunning EventType = "running"
	// EventRequeued: the sandbox went back to the queue (an attempt failed with
	// Code, a claim lapsed, a shutdown interrupted its Create).
	EventRequeued EventType = "requeued"
	// EventWaiting: the sandbox stays queued and its reason changed (no pool can take
	// it now); From and To are both queued.
	EventWaiting EventType = "waiting"
	// EventFailed: the sandbox ended without being deleted (Code and Message say why).
	EventFailed EventType = "failed"
	// EventStopped, EventStarted, EventPaused, EventResumed: lifecycle actions.
	EventStopped EventType = "stopped"
	EventStarted EventType = "started"
	EventPaused  EventType = "paused"
	EventResumed EventType = "resumed"
	// EventTerminating: a delete was asked for (by a token, a pool's deletion) or the
	// TTL ran out.
	EventTerminating EventType = "terminating"
	// EventDeleteFailed: the backend's Delete failed; the sandbox stays terminating
	// and is retried.
	EventDeleteFailed EventType = "delete_failed"
	// EventInstanceBound: a Create finished after the sandbox was deleted; the
	// instance is recorded so that its deletion can go ahead.
	EventInstanceBound EventType = "instance_bound"
	// EventTerminated: the instance is gone (or there never was one).
	EventTerminated EventType = "terminated"
	// EventAdopted: the reconciler found the instance of a sandbox whose Create had
	// been lost and made the sandbox running.
	EventAdopted EventType = "adopted"
	// EventClaimed: a new sandbox took over a warm one of its pool, already running
	// (from "" to running, Pool): it was created by being claimed.
	EventClaimed EventType = "claimed"
	// EventObserved: the reconciler found the instance in another state than the
	// database's (stopped or paused outside Differently) and followed it.
	EventObserved EventType = "observed"
)

// EventTypes lists every event type.
var EventTypes = []EventType{EventCreated, EventPlaced, EventRunning, EventRequeued, EventWaiting,
	EventFailed, EventStopped, EventStarted, EventPaused, EventResumed, EventTerminating,
	EventDeleteFailed, EventInstanceBound, EventTerminated, EventAdopted, EventObserved, EventClaimed}

// Valid reports whether t is one of EventTypes.
func (t EventType) Valid() bool {
	for _, v := range EventTypes {
		if t == v {
			return true
		}
	}
	return false
}

// Event is one recorded change of a sandbox. server/lifecycle builds it; the store
// fills Seq, SandboxID, Org, Project and At when it appends it, in the transaction
// that writes the change.
type Event struct {
	// Seq orders events: it increases with every event appended, so the events of one
	// sandbox read in Seq order are in the order they happened.
	Seq int64 `json:"seq"`
	// Cursor, filled by ListEvents, continues a listing after this event (as
	// EventFilter.After): a follower that stops anywhere in a page resumes there.
	Cursor    string    `json:"cursor,omitempty"`
	SandboxID string    `json:"sandboxId"`
	Org       string    `json:"org"`
	Project   string    `json:"project"`
	At        time.Time `json:"time"`
	Type      EventType `json:"type"`
	From      State     `json:"from,omitempty"`
	To        State     `json:"to"`
	// Actor is who made the change: "token:<id>", "scheduler:<replica>",
	// or "reconciler:<replica>".
	Actor   string `json:"actor"`
	Pool    string `json:"pool,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Code is the error code of a failed attempt or call (an api.Code).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// DurationMs is how long the backend call behind the event took, when there was one.
	DurationMs int64 `json:"durationMs,omitempty"`
	// Candidates are the pools placement weighed, for EventPlaced and EventWaiting.
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Candidate is one pool placement weighed for a sandbox.
type Candidate struct {
	Pool string `json:"pool"`
	// Rank is the pool's place among those that could take the sandbox (1 is best),
	// 0 for a pool passed over.
	Rank int `json:"rank,omitempty"`
	// Reason says why the pool was passed over.
	Reason string `json:"reason,omitempty"`
}

// EventFilter selects events for ListEvents. Zero fields do not filter.
type EventFilter struct {
	Org       string
	Project   string
	SandboxID string
	Pool      string
	Types     []EventType
	// After is a cursor from an earlier ListEvents ("" starts at the oldest event
	// kept). A follower that passes the cursor of its last page back misses no event,
	// even one whose transaction commits after a later one's.
	After string
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
}

// EventRetention bounds the events kept: at most PerSandbox events per sandbox (the
// newest), and none of a sandbox that has been terminal for longer than
// AfterTerminal. Zero fields do not bound.
type EventRetention struct {
	PerSandbox    int
	AfterTerminal time.Duration
}
