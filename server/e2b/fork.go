package e2b

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// maxForks is E2B's bound on a fork's count.
const maxForks = 100

type forkBody struct {
	Timeout *int64 `json:"timeout"`
	Count   *int   `json:"count"`
}

// forkResult is E2B's SandboxForkResult: one fork's sandbox or its error.
type forkResult struct {
	Sandbox *sandbox  `json:"sandbox,omitempty"`
	Error   *apiError `json:"error,omitempty"`
}

// fork is the service's fork, count times: each is a snapshot of the source and a
// copy restored from it on the source's pool, keeping its profile, resources, env
// and metadata, living timeout seconds (default DefaultTimeoutSeconds). Unlike
// E2B's, each fork takes its own snapshot. As E2B's, a request whose first fork
// cannot start fails as a whole; a later fork's failure is its entry's error. The
// answer comes once every fork runs, or CreateWait has passed for it.
func (h *handler) fork(w http.ResponseWriter, r *http.Request) {
	var body forkBody
	if err := h.decode(w, r, &body, true); err != nil {
		h.writeError(w, r, err)
		return
	}
	ttl, err := checkTimeout(body.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	count := 1
	if body.Count != nil {
		if count = *body.Count; count < 1 || count > maxForks {
			h.writeError(w, r, apierr.Invalid("count must be from 1 to %d", maxForks))
			return
		}
	}
	src, err := h.live(r, chi.URLParam(r, "id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	c := callerOf(ctx)
	results := make([]forkResult, count)
	queued := make([]*store.Sandbox, count)
	for i := range count {
		child, err := h.svc.Fork(ctx, c, src.ID, sandboxes.ForkRequest{TTLSeconds: &ttl})
		if err != nil {
			if i == 0 {
				h.writeError(w, r, err)
				return
			}
			results[i].Error = h.errorBody(r, err)
			continue
		}
		queued[i] = &child
	}
	for i, child := range queued {
		if child == nil {
			continue
		}
		sb, ok, err := h.await(ctx, c, child.ID, []store.State{store.StateRunning}, CreateWait, child, nil)
		switch {
		case err != nil:
			results[i].Error = h.errorBody(r, err)
		case !ok:
			return // the client left
		case sb.State == store.StateFailed:
			results[i].Error = h.errorBody(r, api.Errorf(api.CodeSandboxFailed, "fork %s failed to start: %s", sb.ID, sb.Reason))
		case gone(sb.State):
			results[i].Error = h.errorBody(r, api.Errorf(api.CodeNotFound, "fork %s ended while starting", sb.ID))
		default:
			s := h.toSandbox(sb)
			results[i].Sandbox = &s
		}
	}
	writeJSON(w, http.StatusCreated, results)
}
