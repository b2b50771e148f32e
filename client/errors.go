package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/textcut"
)

// APIError is a non-2xx answer from the daemon. Every wrapper returns it, so
// errors.As(err, &apiErr) tells an API refusal (look at Code) from a transport
// failure (which is not an APIError and wraps the underlying error).
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the error envelope's code; empty when the body was not an envelope (a
	// proxy's error page, say).
	Code api.Code
	// Message is the envelope's message, or the start of a non-envelope body.
	Message string
	// Details carries structured context, such as operation, pool and adapter on a
	// 501 unsupported_operation.
	Details map[string]any
	// RetryAfter is how long the answer's Retry-After header asks the caller to wait
	// before trying again (a 429 or 503, typically); zero when it asks nothing.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "differently: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + string(e.Code))
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// IsNotFound reports whether err is an API answer of 404 Not Found.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// IsCode reports whether err is an API answer carrying code: an error envelope
// (*APIError), or the final event of a stream that failed after output
// (*StreamError).
func IsCode(err error, code api.Code) bool {
	if e, ok := errors.AsType[*APIError](err); ok {
		return e.Code == code
	}
	if e, ok := errors.AsType[*StreamError](err); ok {
		return e.Code == code
	}
	return false
}

// StreamError is the failure a streamed exec's final event reports once output has
// started: the status line is gone, so the daemon sends the error envelope's code
// and message in the event instead. Code is provider_unavailable when the backend's
// stream broke off; it is empty from a daemon that predates the event's code.
type StreamError struct {
	Code    api.Code
	Message string
}

func (e *StreamError) Error() string {
	if e.Code == "" {
		return "differently: exec stream failed: " + e.Message
	}
	return "differently: exec stream failed: " + string(e.Code) + ": " + e.Message
}

// maxErrorBody bounds how much of an error answer is read: envelopes are small, and
// a misbehaving proxy must not make the client buffer a large page.
const maxErrorBody = 64 << 10

// newAPIError reads an error answer's body (without closing it) into an APIError.
// The request's bearer token is removed from what the answer quotes: a proxy (or a
// daemon) echoing the request must not hand it to whoever prints the error, such as
// Terraform's diagnostics or a log.
func newAPIError(resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var redact *adapters.Redactor
	if resp.Request != nil {
		if auth := resp.Request.Header.Get("Authorization"); auth != "" {
			redact = adapters.NewRedactor(auth)
			// A token this short is no secret, and would take ordinary words with it.
			if token := strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")); len(token) >= minRedactedToken {
				redact.Add(token)
			}
		}
	}
	e := apiErrorFromBody(resp.StatusCode, body, redact)
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), answeredAt(resp))
	return e
}

// answeredAt is when the daemon sent resp by its own clock (its Date header), which
// a Retry-After date is read against so that the client's clock skew does not
// count; the client's clock when the answer has no Date.
func answeredAt(resp *http.Response) time.Time {
	if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		return t
	}
	return time.Now()
}

// minRedactedToken is the shortest token removed from error text on its own.
const minRedactedToken = 8

// minPartialSecret is the shortest piece of a secret removed from the end of a body
// cut inside it: shorter ones tell too little to matter.
const minPartialSecret = 4

// maxMessage bounds the message quoted from a body that is not an envelope.
const maxMessage = 512

func apiErrorFromBody(status int, body []byte, redact *adapters.Redactor) *APIError {
	e := &APIError{Status: status}
	var env api.ErrorEnvelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != "" {
		scrubbed := redact.Error(env.Error)
		e.Code = scrubbed.Code
		e.Message = scrubbed.Message
		e.Details = scrubbed.Details
		return e
	}
	// Read up to maxErrorBody, the body may end inside an echoed token, a piece that
	// String, matching whole secrets, cannot see: it goes first. Then the message is
	// scrubbed before it is cut short, so that no piece of the token survives that cut.
	e.Message = redact.String(strings.TrimSpace(redact.TrimPartial(string(body), minPartialSecret)))
	if len(e.Message) > maxMessage {
		e.Message = textcut.Prefix(e.Message, maxMessage) + "…"
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// transportError wraps a failure to get an answer at all. It is deliberately not an
// APIError; context errors stay visible to errors.Is.
func transportError(err error) error {
	return fmt.Errorf("differently: %w", err)
}
