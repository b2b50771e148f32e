package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/different-ai/differently/api"
)

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		code api.Code
		want int
	}{
		{api.CodeInvalidRequest, http.StatusBadRequest},
		{api.CodeUnauthenticated, http.StatusUnauthorized},
		{api.CodeForbidden, http.StatusForbidden},
		{api.CodeNotFound, http.StatusNotFound},
		{api.CodeInvalidState, http.StatusConflict},
		{api.CodePayloadTooLarge, http.StatusRequestEntityTooLarge},
		{api.CodeUnsupportedCapability, http.StatusUnprocessableEntity},
		{api.CodeUnsupportedOperation, http.StatusNotImplemented},
		{api.CodeInsufficientCapacity, http.StatusServiceUnavailable},
		{api.CodeSandboxFailed, http.StatusServiceUnavailable},
		{api.CodeProviderUnavailable, http.StatusServiceUnavailable},
		{api.CodeQuotaExceeded, http.StatusTooManyRequests},
		{api.CodeIdempotencyKeyReused, http.StatusUnprocessableEntity},
		{api.CodeInternal, http.StatusInternalServerError},
		{"made_up", http.StatusInternalServerError},
		{"", http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			if got := tt.code.HTTPStatus(); got != tt.want {
				t.Errorf("Code.HTTPStatus = %d, want %d", got, tt.want)
			}
			if got := (&api.Error{Code: tt.code}).HTTPStatus(); got != tt.want {
				t.Errorf("Error.HTTPStatus = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestErrorJSON(t *testing.T) {
	tests := []struct {
		name string
		err  *api.Error
		want string
	}{
		{"no details", api.Errorf(api.CodeNotFound, "sandbox %s", "sbx_1"),
			`{"error":{"code":"not_found","message":"sandbox sbx_1"}}`},
		{"details", api.Errorf(api.CodeUnsupportedOperation, "no").WithDetail("operation", "pause"),
			`{"error":{"code":"unsupported_operation","message":"no","details":{"operation":"pause"}}}`},
		{"empty message kept", &api.Error{Code: api.CodeInternal},
			`{"error":{"code":"internal","message":""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(api.ErrorEnvelope{Error: tt.err})
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got %s, want %s", b, tt.want)
			}
			var back api.ErrorEnvelope
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Error.Code != tt.err.Code || back.Error.Message != tt.err.Message {
				t.Errorf("round trip = %+v", back.Error)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	if got := (&api.Error{Code: api.CodeNotFound}).Error(); got != "not_found" {
		t.Errorf("got %q", got)
	}
	if got := api.Errorf(api.CodeNotFound, "x %d", 1).Error(); got != "not_found: x 1" {
		t.Errorf("got %q", got)
	}
}

func TestWithDetailCopies(t *testing.T) {
	base := api.Errorf(api.CodeInvalidRequest, "bad").WithDetail("a", 1)
	derived := base.WithDetail("b", 2)
	if len(base.Details) != 1 || len(derived.Details) != 2 || derived.Details["a"] != 1 {
		t.Errorf("base %v, derived %v", base.Details, derived.Details)
	}
	if over := base.WithDetail("a", 3); base.Details["a"] != 1 || over.Details["a"] != 3 {
		t.Errorf("overwriting a detail changed the original: %v", base.Details)
	}
}

func TestCodeOfAndAsError(t *testing.T) {
	notFound := api.Errorf(api.CodeNotFound, "gone")
	tests := []struct {
		name   string
		err    error
		want   api.Code
		wantAs *api.Error
	}{
		{"nil", nil, "", nil},
		{"plain", errors.New("x"), api.CodeInternal, nil},
		{"direct", notFound, api.CodeNotFound, notFound},
		{"wrapped", fmt.Errorf("get: %w", notFound), api.CodeNotFound, notFound},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", notFound)), api.CodeNotFound, notFound},
		{"joined", errors.Join(errors.New("x"), notFound), api.CodeNotFound, notFound},
		{"formatted not wrapped", fmt.Errorf("get: %v", notFound), api.CodeInternal, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := api.CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf = %q, want %q", got, tt.want)
			}
			if got := api.AsError(tt.err); got != tt.wantAs {
				t.Errorf("AsError = %v, want %v", got, tt.wantAs)
			}
			if tt.want != "" && !api.IsCode(tt.err, tt.want) {
				t.Errorf("IsCode(%q) = false", tt.want)
			}
		})
	}
	if api.IsCode(nil, "") || api.IsCode(nil, api.CodeInternal) {
		t.Error("IsCode(nil) must be false")
	}
}

func TestCodeKnown(t *testing.T) {
	for _, c := range []api.Code{api.CodeInvalidRequest, api.CodeUnauthenticated, api.CodeForbidden,
		api.CodeNotFound, api.CodeInvalidState, api.CodePayloadTooLarge, api.CodeUnsupportedCapability,
		api.CodeUnsupportedOperation, api.CodeInsufficientCapacity, api.CodeSandboxFailed,
		api.CodeProviderUnavailable, api.CodeQuotaExceeded, api.CodeInternal} {
		if !c.Known() {
			t.Errorf("%s is not known", c)
		}
	}
	for _, c := range []api.Code{"", "req_123", "Internal"} {
		if c.Known() {
			t.Errorf("%q is known", c)
		}
	}
}

func TestMessage(t *testing.T) {
	unavailable := api.Errorf(api.CodeProviderUnavailable, "backend timed out")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain error", errors.New("disk full"), "disk full"},
		{"api error", unavailable, "backend timed out"},
		{"api error without message", &api.Error{Code: api.CodeInternal}, "internal"},
		{"wrapped api error", fmt.Errorf("create: %w", unavailable), "create: backend timed out"},
		{"wrapped twice", fmt.Errorf("pool p: %w", fmt.Errorf("create: %w", unavailable)),
			"pool p: create: backend timed out"},
		{"api error joined with a cause", fmt.Errorf("%w: %w", unavailable, context.Canceled),
			"backend timed out: context canceled"},
		{"wrapped api error without message", fmt.Errorf("health: %w", &api.Error{Code: api.CodeInternal}),
			"health: internal"},
		{"code text in a plain error is kept", errors.New("internal: not an api error"),
			"internal: not an api error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := api.Message(tt.err); got != tt.want {
				t.Errorf("Message = %q, want %q", got, tt.want)
			}
		})
	}
}
