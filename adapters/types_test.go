package adapters_test

import (
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestCreateRequestValidate(t *testing.T) {
	ok := adapters.CreateRequest{ID: "sbx_1", Installation: "inst_1"}
	with := func(f func(*adapters.CreateRequest)) adapters.CreateRequest { r := ok; f(&r); return r }
	tests := []struct {
		name string
		req  adapters.CreateRequest
		ok   bool
	}{
		{"minimal", ok, true},
		{"full", with(func(r *adapters.CreateRequest) {
			r.Env = map[string]string{"A": "x=y"}
			r.TTLSeconds = 60
			r.Resources = adapters.Resources{CPU: 1}
		}), true},
		{"no id", with(func(r *adapters.CreateRequest) { r.ID = "" }), false},
		{"no installation", with(func(r *adapters.CreateRequest) { r.Installation = "" }), false},
		{"negative ttl", with(func(r *adapters.CreateRequest) { r.TTLSeconds = -1 }), false},
		{"bad env name", with(func(r *adapters.CreateRequest) { r.Env = map[string]string{"A=B": ""} }), false},
		{"NUL env value", with(func(r *adapters.CreateRequest) { r.Env = map[string]string{"A": "\x00"} }), false},
		{"negative resources", with(func(r *adapters.CreateRequest) { r.Resources.MemoryMiB = -1 }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.ok != (err == nil) || (err != nil && !api.IsCode(err, api.CodeInvalidRequest)) {
				t.Errorf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestSnapshotKindValidate(t *testing.T) {
	for kind, ok := range map[adapters.SnapshotKind]bool{adapters.SnapshotDisk: true, adapters.SnapshotMemory: true, "": false, "Disk": false} {
		if err := kind.Validate(); ok != (err == nil) {
			t.Errorf("%q: %v", kind, err)
		}
	}
}

func TestErrorHelpers(t *testing.T) {
	tests := []struct {
		err  *api.Error
		code api.Code
	}{
		{adapters.NotFound("x %d", 1), api.CodeNotFound},
		{adapters.Unsupported("pause"), api.CodeUnsupportedOperation},
		{adapters.Unavailable("x"), api.CodeProviderUnavailable},
		{adapters.InsufficientCapacity("x"), api.CodeInsufficientCapacity},
		{adapters.SandboxFailed("x"), api.CodeSandboxFailed},
		{adapters.InvalidRequest("x"), api.CodeInvalidRequest},
		{adapters.InvalidState("x"), api.CodeInvalidState},
		{adapters.TooLarge("x"), api.CodePayloadTooLarge},
	}
	for _, tt := range tests {
		if tt.err.Code != tt.code {
			t.Errorf("%v: code %q, want %q", tt.err, tt.err.Code, tt.code)
		}
	}
	if adapters.NotFound("x %d", 1).Message != "x 1" {
		t.Error("format args not applied")
	}
	if d := adapters.Unsupported("pause").Details["operation"]; d != "pause" {
		t.Errorf("Unsupported details.operation = %v", d)
	}
}
