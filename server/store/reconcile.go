package store

import (
	"strconv"
	"time"

	"github.com/different-ai/differently/api"
)

// ReconcileTrigger says what started a reconcile pass.
type ReconcileTrigger string

// The triggers of a pass.
const (
	// TriggerPeriodic: the leader's turn, every scheduler.reconcileIntervalSeconds.
	TriggerPeriodic ReconcileTrigger = "periodic"
	// TriggerOnDemand: POST /v1/admin/reconcile, or the console's button, on any
	// replica; ReconcilePass.TokenID names the token that asked.
	TriggerOnDemand ReconcileTrigger = "on_demand"
)

// ReconcilePoolReport is what one pass found and did on one pool. Entries are
// sandbox IDs, except OrphansDeleted and Duplicates, which hold backend refs. It is
// server/reconcile's PoolReport, defined here so that the store can keep it.
type ReconcilePoolReport struct {
	Pool string `json:"pool"`
	// Skipped says why the pool was left alone this pass (List failed, no adapter).
	Skipped        string   `json:"skipped,omitempty"`
	OrphansDeleted []string `json:"orphansDeleted,omitempty"`
	Adopted        []string `json:"adopted,omitempty"`
	Requeued       []string `json:"requeued,omitempty"`
	Lost           []string `json:"lost,omitempty"`
	StateChanged   []string `json:"stateChanged,omitempty"`
	Duplicates     []string `json:"duplicates,omitempty"`
	// Errors lists the actions of this pass that failed (a Delete the backend
	// refused, say); the next pass tries them again.
	Errors []string `json:"errors,omitempty"`
}

// ReconcilePass is one recorded reconcile pass.
type ReconcilePass struct {
	// ID, set by RecordReconcilePass, increases with every pass recorded: passes
	// never overlap (they hold the reconcile-pass lease), so ID order is the order
	// they ran in.
	ID        int64
	StartedAt time.Time
	EndedAt   time.Time
	// Replica is the replica that ran the pass.
	Replica string
	Trigger ReconcileTrigger
	// TokenID is the token that asked for an on-demand pass; "" for a periodic one.
	TokenID string
	// Error says why the pass stopped before it reached every pool (its leases were
	// lost, the database failed); "" for a pass that ran to its end.
	Error string
	Pools []ReconcilePoolReport
}

// ReconcilePassFilter pages through the recorded passes, newest first.
type ReconcilePassFilter struct {
	// Cursor is the nextCursor of an earlier page; "" starts at the newest pass.
	Cursor string
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
}

// ValidateReconcilePass checks what a driver would store.
func ValidateReconcilePass(p ReconcilePass) error {
	switch {
	case p.Trigger != TriggerPeriodic && p.Trigger != TriggerOnDemand:
		return api.Errorf(api.CodeInvalidRequest, "reconcile pass: unknown trigger %q", p.Trigger)
	case p.Replica == "":
		return api.Errorf(api.CodeInvalidRequest, "reconcile pass: replica is required")
	case p.EndedAt.Before(p.StartedAt):
		return api.Errorf(api.CodeInvalidRequest, "reconcile pass: ends before it starts")
	}
	return nil
}

// EncodePassCursor makes the cursor that continues a listing of passes after (that
// is, below) id.
func EncodePassCursor(id int64) string { return EncodeCursor(strconv.FormatInt(id, 10)) }

// DecodePassCursor reverses EncodePassCursor: 0 for "", invalid_request for
// anything that is not a cursor of passes.
func DecodePassCursor(c string) (int64, error) {
	s, err := DecodeCursor(c)
	if err != nil || s == "" {
		return 0, err
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, api.Errorf(api.CodeInvalidRequest, "invalid cursor %q", c)
	}
	return id, nil
}

// PagePasses cuts a listing read with limit+1 rows down to limit and returns the
// cursor of the next page, or "" when there is none.
func PagePasses(items []ReconcilePass, limit int) ([]ReconcilePass, string) {
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	return items, EncodePassCursor(items[limit-1].ID)
}
