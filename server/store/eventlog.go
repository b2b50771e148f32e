package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/different-ai/differently/api"
)

// PendingEvents returns the events a write of sb appends: a copy of sb.Pending
// stamped with the sandbox's ID, organisation and project and with at (the write's
// now), with messages made fit to store as a sandbox's reason is (a backend's error
// may hold NUL bytes or invalid UTF-8, which would make PostgreSQL refuse the whole
// write). nil when there are none, so a write without events costs no statement.
func PendingEvents(sb Sandbox, at time.Time) []Event {
	if len(sb.Pending) == 0 {
		return nil
	}
	at = Timestamp(at)
	out := make([]Event, len(sb.Pending))
	for i, e := range sb.Pending {
		e.Seq = 0
		e.SandboxID, e.Org, e.Project, e.At = sb.ID, sb.Org, sb.Project, at
		e.Message = storableText(e.Message)
		out[i] = e
	}
	return out
}

// CandidatesJSON encodes an event's candidates for the candidates column: "" when
// there are none, which the drivers read back as nil.
func CandidatesJSON(cs []Candidate) (string, error) {
	if len(cs) == 0 {
		return "", nil
	}
	b, err := MarshalJSON(cs)
	return string(b), err
}

// EventCursor is the position a ListEvents cursor holds. Seq is the last event
// returned (or a position past it). Txid is set only by a driver that orders
// events by transaction rather than by Seq (PostgreSQL's listings that do not name a
// sandbox, see server/store/postgres/events.go); it is 0 in a cursor of Seq order.
type EventCursor struct {
	Txid uint64 `json:"x,omitempty"`
	Seq  int64  `json:"s"`
}

// Less orders cursors as PostgreSQL orders (txid, seq).
func (c EventCursor) Less(o EventCursor) bool {
	if c.Txid != o.Txid {
		return c.Txid < o.Txid
	}
	return c.Seq < o.Seq
}

// Encode makes the opaque cursor string (base64url of a small JSON object).
func (c EventCursor) Encode() string {
	b, _ := json.Marshal(c) // two integers cannot fail to encode
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeEventCursor reverses Encode; "" is the zero cursor (from the oldest event
// kept). Anything malformed is invalid_request.
func DecodeEventCursor(s string) (EventCursor, error) {
	var c EventCursor
	if s == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return EventCursor{}, InvalidEventCursor(s)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() || c.Seq < 0 {
		return EventCursor{}, InvalidEventCursor(s)
	}
	return c, nil
}

// InvalidEventCursor is the error for a cursor ListEvents cannot continue from: a
// malformed one, or one from a listing ordered otherwise (by a driver's rules).
func InvalidEventCursor(s string) *api.Error {
	return api.Errorf(api.CodeInvalidRequest, "invalid events cursor %q", s)
}

// CheckEventFilter checks what the drivers cannot express in SQL and returns the
// page size: Limit through PageLimit, and Types known.
func CheckEventFilter(f EventFilter) (limit int, err error) {
	for _, t := range f.Types {
		if !t.Valid() {
			return 0, api.Errorf(api.CodeInvalidRequest, "unknown event type %q", t)
		}
	}
	return PageLimit(f.Limit)
}

// CheckRetention refuses negative bounds, which would otherwise read as "keep
// nothing".
func CheckRetention(r EventRetention) error {
	if r.PerSandbox < 0 || r.AfterTerminal < 0 {
		return api.Errorf(api.CodeInvalidRequest, "event retention bounds must not be negative")
	}
	return nil
}

// EventPruneBatch bounds the rows one statement of PruneEvents deletes, so that a
// prune never holds locks (or SQLite's single writer) for long.
const EventPruneBatch = 5000

// EventTypeNames converts types for a driver's query parameters.
func EventTypeNames(ts []EventType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}
