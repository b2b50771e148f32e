package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
)

// FuzzExecRequest decodes arbitrary bytes as an exec request body and validates it.
// Validate must never panic, must refuse only with invalid_request, and whatever it
// accepts must have the shape the adapters rely on: exactly one of command and args,
// a program name, a timeout in range and no NUL byte anywhere a C string goes.
func FuzzExecRequest(f *testing.F) {
	for _, s := range []string{
		`{"command":"echo hi"}`,
		`{"args":["ls","-l"],"cwd":"sub","env":{"A":"1"},"stdin":"x","timeoutSeconds":5}`,
		`{"command":"x","args":["y"]}`,
		`{"args":[""]}`,
		`{"args":[]}`,
		`{}`,
		`{"command":"a\u0000b"}`,
		`{"command":"x","cwd":"\u0000"}`,
		`{"args":["x","\u0000"]}`,
		`{"command":"x","env":{"":"v"}}`,
		`{"command":"x","env":{"A=B":"v"}}`,
		`{"command":"x","env":{"A":"\u0000"}}`,
		`{"command":"x","timeoutSeconds":-1}`,
		`{"command":"x","timeoutSeconds":7200}`,
		`{"command":"x","timeoutSeconds":7201}`,
		`{"command":"x","timeoutSeconds":99999999999999999999}`,
		`{"command":"x","timeoutSeconds":1e3}`,
		`{"command":"\xff\xfe"}`,
		`{"command":{"nested":[[[[{}]]]]}}`,
		`[` + strings.Repeat(`[`, 100) + `]`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req api.ExecRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		checkExecRequest(t, req)
		// What is accepted survives the wire: the decoded form validates the same way.
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("marshal %+v: %v", req, err)
		}
		var again api.ExecRequest
		if err := json.Unmarshal(raw, &again); err != nil {
			t.Fatalf("unmarshal %s: %v", raw, err)
		}
		if (req.Validate() == nil) != (again.Validate() == nil) {
			t.Fatalf("Validate differs after a round trip: %+v vs %+v", req, again)
		}
	})
}

func checkExecRequest(t *testing.T, req api.ExecRequest) {
	t.Helper()
	err := req.Validate()
	if err != nil {
		if e := api.AsError(err); e == nil || e.Code != api.CodeInvalidRequest {
			t.Fatalf("Validate(%+v) = %v, want an invalid_request *api.Error", req, err)
		}
		return
	}
	if (req.Command == "") == (len(req.Args) == 0) {
		t.Fatalf("accepted %+v without exactly one of command and args", req)
	}
	if len(req.Args) > 0 && req.Args[0] == "" {
		t.Fatalf("accepted %+v with an empty program", req)
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > api.MaxExecTimeoutSeconds {
		t.Fatalf("accepted timeoutSeconds %d", req.TimeoutSeconds)
	}
	nul := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
	if nul(req.Command) || nul(req.Cwd) {
		t.Fatalf("accepted a NUL byte in %+v", req)
	}
	for _, a := range req.Args {
		if nul(a) {
			t.Fatalf("accepted a NUL byte in args %q", req.Args)
		}
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || nul(v) {
			t.Fatalf("accepted env %q=%q", k, v)
		}
	}
}
