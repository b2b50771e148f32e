package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/body"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

const contentTypeJSON = "application/json"

// publicError is the one place an error becomes what a client sees. An *api.Error keeps
// its code, except the two codes that only steer the scheduler: insufficient_capacity
// and sandbox_failed are shown as provider_unavailable (seed section 5), so clients
// need to handle one "try later" code. Anything without a code the client could act on
// becomes internal, with a message that reveals nothing; the caller logs the cause.
func publicError(err error) (e *api.Error, internal bool) {
	if errors.Is(err, store.ErrUnavailable) {
		// Logged like an internal error, but answered as the outage it is, which
		// clients retry.
		return api.Errorf(api.CodeProviderUnavailable, "the database is unavailable; try again"), true
	}
	e = api.AsError(err)
	if e == nil {
		return api.Errorf(api.CodeInternal, "internal error"), true
	}
	switch e.Code {
	case api.CodeInsufficientCapacity, api.CodeSandboxFailed:
		out := *e
		out.Code = api.CodeProviderUnavailable
		return &out, false
	case api.CodeInvalidRequest, api.CodeUnauthenticated, api.CodeForbidden, api.CodeNotFound,
		api.CodeInvalidState, api.CodePayloadTooLarge, api.CodeUnsupportedCapability,
		api.CodeUnsupportedOperation, api.CodeProviderUnavailable, api.CodeQuotaExceeded,
		api.CodeIdempotencyKeyReused:
		return e, false
	}
	// internal, or a code this version does not know: adapter internals (host paths,
	// backend messages) stay in the log.
	return api.Errorf(api.CodeInternal, "internal error"), true
}

// writeError answers with the error envelope.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = requestCause(r, err)
	e, internal := publicError(err)
	if internal {
		level := s.log.Error
		if clientGone(r, err) {
			// The client went away; nobody reads the answer.
			level = s.log.Debug
		}
		level("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if e.Code == api.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="differently"`)
	}
	if ra, ok := errors.AsType[*sandboxes.RetryAfterError](err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(ra.Seconds))
	} else if errors.Is(err, store.ErrUnavailable) {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.HTTPStatus(), api.ErrorEnvelope{Error: e})
}

// clientGone reports whether err is the client hanging up rather than a failure:
// the request's context was cancelled by net/http (not ended by the daemon's
// shutdown, whose cause is an *api.Error) and err says so, whether as the
// context's error or as the broken connection writing to the client met. net/http
// cancels the context as soon as a write to the client fails, so a broken pipe or a
// reset under a live context came from elsewhere: the database's connection or a
// backend's, which is a failure to log.
func clientGone(r *http.Request, err error) bool {
	if r.Context().Err() == nil || api.AsError(context.Cause(r.Context())) != nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// requestCause is err, or, when the request's context was ended by the daemon with
// an *api.Error as its cause (the end of a shutdown's grace), that cause: what
// failed is then the daemon's stop, not the command or the backend.
func requestCause(r *http.Request, err error) error {
	if err == nil || r.Context().Err() == nil {
		return err
	}
	if cause := context.Cause(r.Context()); api.AsError(cause) != nil {
		return cause
	}
	return err
}

// retryAfter is an error whose answer tells the client, with Retry-After, how many
// seconds to wait before trying again: the sandbox service's type, so that its
// refusals and this package's are sent the same way (writeError).
func retryAfter(err *api.Error, seconds int) error { return sandboxes.RetryAfter(err, seconds) }

// writeJSON marshals before writing so that a value that cannot be encoded still gets
// a well-formed error answer instead of half a body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(api.ErrorEnvelope{Error: api.Errorf(api.CodeInternal, "encoding the answer failed")})
	}
	h := w.Header()
	h.Set("Content-Type", contentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// decodeJSON reads one JSON value, strictly: an unknown field is a client speaking
// another version of the API, and dropping it silently would hide that; a key must
// name its field exactly, case included (jsonkeys.go); the body must be UTF-8, as
// JSON is, since encoding/json would otherwise replace what is not, and so must its
// \u escapes be (loneSurrogate). The body is
// already capped by limitBody. With optional set, an empty body leaves v as it is. A
// string holding a NUL character is refused (see text.go).
func decodeJSON(r *http.Request, v any, optional bool) error {
	if err := decodeAnyJSON(r, v, optional); err != nil {
		return err
	}
	if p := nulField(v); p != "" {
		return api.Errorf(api.CodeInvalidRequest, "%s holds a NUL character (\\u0000), which no stored text may hold", p)
	}
	return nil
}

// decodeAnyJSON is decodeJSON without the check for NUL characters, for a body none
// of whose text is stored (an exec's: its stdin is data, and ExecRequest.Validate
// refuses NUL where a command cannot take one).
func decodeAnyJSON(r *http.Request, v any, optional bool) error {
	data, err := body.ReadAll(r.Body, r.ContentLength)
	if err != nil {
		return bodyError(err)
	}
	return decodeBody(data, v, optional)
}

// decodeBody is decodeAnyJSON of a body already read.
func decodeBody(data []byte, v any, optional bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return api.Errorf(api.CodeInvalidRequest, "request body is empty")
	}
	if !utf8.Valid(data) {
		return api.Errorf(api.CodeInvalidRequest, "request body is not valid UTF-8")
	}
	if at := loneSurrogate(data); at >= 0 {
		return api.Errorf(api.CodeInvalidRequest,
			"request body is not valid UTF-8: the escape %s at byte %d is half of a UTF-16 surrogate pair", data[at:at+6], at)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return api.Errorf(api.CodeInvalidRequest, "request body holds more than one JSON value")
		}
		return bodyError(err)
	}
	return exactKeys(data, reflect.TypeOf(v))
}

// loneSurrogate returns the offset of the first \u escape in a string of the JSON
// text data that is a UTF-16 surrogate (U+D800 to U+DFFF) not paired as UTF-16
// pairs them (a high one, then a low one), or -1. encoding/json decodes such an
// escape to U+FFFD, so a body whose bytes are all UTF-8 would still carry text that
// is not, changed without a word. Malformed escapes are left to the decoder.
func loneSurrogate(data []byte) int {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(data) && data[i+1] != 'u' {
				i++ // a one-character escape, \\ included
				continue
			}
			r, ok := hex4(data, i+2)
			if !ok {
				continue
			}
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					if low, ok := hex4(data, i+8); ok && low >= 0xDC00 && low < 0xE000 {
						i += 11
						continue
					}
				}
				return i
			case r >= 0xDC00 && r < 0xE000:
				return i
			}
			i += 5
		}
	}
	return -1
}

// hex4 is the number the four hexadecimal digits at data[at:] spell.
func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func bodyError(err error) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return api.Errorf(api.CodePayloadTooLarge, "request body is over %d bytes", api.MaxJSONBodyBytes)
	}
	if errors.Is(err, io.EOF) {
		return api.Errorf(api.CodeInvalidRequest, "request body is empty")
	}
	return api.Errorf(api.CodeInvalidRequest, "malformed JSON body: %v", err)
}

// paramError is the generated router's handler for parameters it cannot bind.
func (s *Server) paramError(w http.ResponseWriter, r *http.Request, err error) {
	e := api.Errorf(api.CodeInvalidRequest, "%v", err)
	var name string
	switch pe := err.(type) {
	case *InvalidParamFormatError:
		name = pe.ParamName
	case *RequiredParamError:
		name = pe.ParamName
	case *RequiredHeaderError:
		name = pe.ParamName
	case *TooManyValuesForParamError:
		name = pe.ParamName
	case *UnmarshalingParamError:
		name = pe.ParamName
	}
	if name != "" {
		e = e.WithDetail("parameter", name)
	}
	s.writeError(w, r, e)
}

func errNoRoute(r *http.Request) error {
	return api.Errorf(api.CodeNotFound, "no route %s %s", r.Method, r.URL.Path)
}

func errMethod(r *http.Request) *api.Error {
	return api.Errorf(api.CodeInvalidRequest, "method %s is not allowed on %s", r.Method, r.URL.Path)
}
