package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/store"
)

// ListSandboxEvents answers one sandbox's history, a page at a time.
func (s *Server) ListSandboxEvents(w http.ResponseWriter, r *http.Request, id SandboxID, params ListSandboxEventsParams) {
	f, err := eventFilter(params.Type, params.Limit, params.Cursor)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	items, next, err := s.svc.Events(ctx, callerOf(ctx), id, f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeEventList(w, items, next)
}

// ListEvents answers the events of every sandbox the token may see, a page at a time
// or, with follow, as a stream.
func (s *Server) ListEvents(w http.ResponseWriter, r *http.Request, params ListEventsParams) {
	f, err := eventFilter(params.Type, params.Limit, params.Cursor)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.SandboxID, f.Pool = deref(params.Sandbox), deref(params.Pool)
	p := principalFrom(r.Context())
	switch {
	case !p.admin:
		if params.Project != nil && *params.Project != p.project && *params.Project != p.org+"/"+p.project {
			// Another project looks like one without events, as with sandboxes. The
			// cursor is the caller's own, so polling with it stays valid.
			writeJSON(w, http.StatusOK, EventList{Items: []Event{}, NextCursor: f.After})
			return
		}
		f.Org, f.Project = p.org, p.project
	case params.Project != nil:
		f.Org, f.Project = projectParam(params.Project)
	}
	if deref(params.Follow) {
		s.followEvents(w, r, f)
		return
	}
	s.writeEvents(w, r, f)
}

func (s *Server) writeEvents(w http.ResponseWriter, r *http.Request, f store.EventFilter) {
	items, next, err := s.st.ListEvents(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeEventList(w, items, next)
}

func writeEventList(w http.ResponseWriter, items []store.Event, next string) {
	out := EventList{Items: make([]Event, 0, len(items)), NextCursor: next}
	for _, e := range items {
		out.Items = append(out.Items, toEvent(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// followEvents streams the events f selects, one per line, as they are recorded,
// until the client leaves or the replica stops. Each event carries its cursor, so a
// client that reconnects with the last one it read resumes exactly there.
//
// The change feed says when a sandbox changed, which is when events are appended; a
// read every recheck interval also finds what no notification announced (a replica
// that died before sending one), and on PostgreSQL an event held back because an
// older transaction was still open.
func (s *Server) followEvents(w http.ResponseWriter, r *http.Request, f store.EventFilter) {
	ctx := r.Context()
	wake := make(chan struct{}, 1)
	stop := s.changes.Listen(func(c store.Change) {
		if c.Kind == store.ChangeSandbox || c.Kind == store.ChangeResync {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	// The first read happens before the answer starts, so that a bad cursor or
	// filter is an error envelope with its status rather than a cut stream.
	items, next, err := s.st.ListEvents(ctx, f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	recheck := time.NewTicker(s.recheck)
	defer recheck.Stop()
	limit, _ := store.PageLimit(f.Limit)
	for {
		for _, e := range items {
			if err := enc.Encode(toEvent(e)); err != nil {
				return // the client left
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		f.After = next
		if len(items) < limit {
			select {
			case <-wake:
			case <-recheck.C:
			case <-s.changes.Closed():
				return
			case <-ctx.Done():
				return
			}
		}
		items, next, err = s.st.ListEvents(ctx, f)
		if err != nil {
			if ctx.Err() == nil {
				// The stream ends; the client reconnects with the last cursor it read.
				s.log.Warn("follow events", "error", err)
			}
			return
		}
	}
}

// eventFilter reads the parameters both event listings take: the types (repeated,
// possibly comma-separated), the page size (absent is the store's default) and the
// cursor.
func eventFilter(vals *EventTypes, limit *int, cursor *string) (store.EventFilter, error) {
	f := store.EventFilter{After: deref(cursor), Limit: deref(limit)}
	if limit != nil && (*limit < 1 || *limit > store.MaxLimit) {
		return f, apierr.Invalid("limit must be between 1 and %d", store.MaxLimit)
	}
	if vals == nil {
		return f, nil
	}
	for _, v := range *vals {
		for t := range strings.SplitSeq(string(v), ",") {
			t = strings.TrimSpace(t)
			if !store.EventType(t).Valid() {
				return f, apierr.Invalid("unknown event type %q", t)
			}
			f.Types = append(f.Types, store.EventType(t))
		}
	}
	return f, nil
}

func toEvent(e store.Event) Event {
	out := Event{
		Seq: e.Seq, Cursor: e.Cursor, SandboxId: e.SandboxID, Org: e.Org, Project: e.Project,
		Time: e.At, Type: EventType(e.Type), To: SandboxState(e.To), Actor: e.Actor,
		Pool: strPtr(e.Pool), Code: strPtr(e.Code), Message: strPtr(e.Message),
	}
	if e.From != "" {
		from := SandboxState(e.From)
		out.From = &from
	}
	if e.Attempt != 0 {
		out.Attempt = &e.Attempt
	}
	if e.DurationMs != 0 {
		out.DurationMs = &e.DurationMs
	}
	if len(e.Candidates) > 0 {
		cs := make([]PlacementCandidate, 0, len(e.Candidates))
		for _, c := range e.Candidates {
			pc := PlacementCandidate{Pool: c.Pool, Reason: strPtr(c.Reason)}
			if c.Rank != 0 {
				pc.Rank = &c.Rank
			}
			cs = append(cs, pc)
		}
		out.Candidates = &cs
	}
	return out
}
