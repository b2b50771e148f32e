package e2b

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// apiError is E2B's error body (the Error schema of its openapi.yml): the HTTP
// status again as a number, and a message.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// statusOf is the one mapping from the sandbox service's errors to E2B's answers:
// the status, the message a client may see, and whether the cause is internal (to
// be logged, never shown). E2B's SDKs act on the status alone (404: kill returns
// false; 401: a bad key; 429: a rate limit), so every code of package api lands
// on the nearest status E2B's API documents.
func statusOf(err error) (status int, message string, internal bool) {
	if errors.Is(err, store.ErrUnavailable) {
		return http.StatusServiceUnavailable, "the database is unavailable; try again", true
	}
	e := api.AsError(err)
	if e == nil {
		return http.StatusInternalServerError, "internal error", true
	}
	switch e.Code {
	case api.CodeInvalidRequest, api.CodeUnsupportedCapability, api.CodePayloadTooLarge:
		return http.StatusBadRequest, e.Message, false
	case api.CodeUnsupportedOperation:
		// The pool lacks the operation: the request cannot succeed as made, which
		// E2B's API says with 400; the message names the pool and its adapter.
		return http.StatusBadRequest, e.Message, false
	case api.CodeUnauthenticated:
		return http.StatusUnauthorized, e.Message, false
	case api.CodeForbidden:
		return http.StatusForbidden, e.Message, false
	case api.CodeNotFound:
		return http.StatusNotFound, e.Message, false
	case api.CodeInvalidState, api.CodeIdempotencyKeyReused:
		return http.StatusConflict, e.Message, false
	case api.CodeQuotaExceeded:
		return http.StatusTooManyRequests, e.Message, false
	case api.CodeInsufficientCapacity, api.CodeSandboxFailed, api.CodeProviderUnavailable:
		return http.StatusServiceUnavailable, e.Message, false
	}
	return http.StatusInternalServerError, "internal error", true
}

// writeError answers err in E2B's shape, logging what it does not show.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	body := h.errorBody(r, err)
	var ra *sandboxes.RetryAfterError
	if errors.As(err, &ra) && ra.Seconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra.Seconds))
	}
	writeJSON(w, body.Code, body)
}

// errorBody is err in E2B's shape, for an answer or a part of one (a fork's
// result), logging what it does not show.
func (h *handler) errorBody(r *http.Request, err error) *apiError {
	status, msg, internal := statusOf(err)
	if internal && r.Context().Err() == nil {
		h.log.Error("e2b request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	return &apiError{Code: status, Message: msg}
}
