package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Code classifies an error. Adapters choose the code; the control plane reacts to it
// (retry, back off, mark a pool unhealthy, fail a sandbox) as the adapter
// specification's error table says, so picking the right one matters more than the
// message.
type Code string

const (
	// CodeInvalidRequest: the request can never succeed as written (a bad path, a missing
	// image or snapshot, malformed input). Create fails the sandbox at once.
	CodeInvalidRequest Code = "invalid_request"
	// CodeUnauthenticated: missing or wrong credentials on the protocol or API.
	CodeUnauthenticated Code = "unauthenticated"
	// CodeForbidden: authenticated, but not allowed.
	CodeForbidden Code = "forbidden"
	// CodeNotFound: the instance, snapshot or file does not exist.
	CodeNotFound Code = "not_found"
	// CodeInvalidState: the instance is in the wrong state for the call (exec on a
	// paused instance), or the call conflicts with another.
	CodeInvalidState Code = "invalid_state"
	// CodePayloadTooLarge: a body or file is over one of the limits in this package.
	CodePayloadTooLarge Code = "payload_too_large"
	// CodeUnsupportedCapability: no pool offers a requested capability.
	CodeUnsupportedCapability Code = "unsupported_capability"
	// CodeUnsupportedOperation: the backend cannot do this at all.
	CodeUnsupportedOperation Code = "unsupported_operation"
	// CodeInsufficientCapacity: no room right now (full node, plan cap, provider 429).
	// Provisioning requeues without counting the attempt.
	CodeInsufficientCapacity Code = "insufficient_capacity"
	// CodeSandboxFailed: the backend is up but this one sandbox failed. Provisioning
	// counts the attempt and backs off; the pool stays healthy.
	CodeSandboxFailed Code = "sandbox_failed"
	// CodeProviderUnavailable: the backend is unreachable, timed out, rejected the
	// credentials or answered 5xx. The pool is marked unhealthy until its next probe.
	CodeProviderUnavailable Code = "provider_unavailable"
	// CodeQuotaExceeded: the request would take a project over one of its quotas. It is
	// a public API code only (adapters never return it): retry after sandboxes of the
	// project have ended, or ask an operator for a larger quota.
	CodeQuotaExceeded Code = "quota_exceeded"
	// CodeIdempotencyKeyReused: a create repeated an Idempotency-Key of its project
	// with a different request. It is a public API code only: send the first
	// request again to get its sandbox, or use a new key for a new one.
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	// CodeInternal: anything unclassified. Create treats it like provider_unavailable.
	CodeInternal Code = "internal"
)

// Error is the one error type that crosses package and process boundaries. Its JSON
// form is the body of the error envelope {"error": {...}}.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// HTTPStatus is the status an error is served with, on the public API and on the
// adapter protocol alike.
func (e *Error) HTTPStatus() int { return e.Code.HTTPStatus() }

// Known reports whether c is one of this package's codes. A code from elsewhere (a
// remote plugin's answer) is anything its author wrote, so it must not become a
// metric label or a branch as is.
func (c Code) Known() bool {
	switch c {
	case CodeInvalidRequest, CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeInvalidState,
		CodePayloadTooLarge, CodeUnsupportedCapability, CodeUnsupportedOperation,
		CodeInsufficientCapacity, CodeSandboxFailed, CodeProviderUnavailable, CodeQuotaExceeded,
		CodeIdempotencyKeyReused, CodeInternal:
		return true
	}
	return false
}

// HTTPStatus maps a code to its HTTP status. Unknown codes are 500.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalidRequest:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeInvalidState:
		return http.StatusConflict
	case CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedCapability, CodeIdempotencyKeyReused:
		return http.StatusUnprocessableEntity
	case CodeUnsupportedOperation:
		return http.StatusNotImplemented
	case CodeQuotaExceeded:
		return http.StatusTooManyRequests
	case CodeInsufficientCapacity, CodeSandboxFailed, CodeProviderUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetail returns a copy of e with one more detail set.
func (e *Error) WithDetail(key string, value any) *Error {
	out := *e
	out.Details = make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		out.Details[k] = v
	}
	out.Details[key] = value
	return &out
}

// AsError finds the *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Message is err's text for people (a sandbox's reason, a pool's lastError, a preflight
// finding): err.Error() with the "code: " prefix of the *Error in err's chain taken off,
// since the code is for programs. Whatever wrappers around that *Error add stays, so
// "create: provider_unavailable: timed out" reads "create: timed out". An *Error without
// a message keeps its code, the only thing it says.
func Message(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	e := AsError(err)
	if e == nil || e.Message == "" {
		return text
	}
	return strings.Replace(text, e.Error(), e.Message, 1)
}

// CodeOf returns the code of the *Error in err's chain, CodeInternal for any other
// error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	if e := AsError(err); e != nil {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code Code) bool { return err != nil && CodeOf(err) == code }

// ErrorEnvelope is the JSON body of every error answer.
type ErrorEnvelope struct {
	Error *Error `json:"error"`
}
