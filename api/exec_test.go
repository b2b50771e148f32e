package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
)

func TestExecRequestValidate(t *testing.T) {
	tests := []struct {
		name string
		req  api.ExecRequest
		ok   bool
	}{
		{"command", api.ExecRequest{Command: "ls"}, true},
		{"args", api.ExecRequest{Args: []string{"ls", ""}}, true},
		{"everything", api.ExecRequest{Command: "ls", Env: map[string]string{"A": "b=c"}, Cwd: "/w", Stdin: "\x00binary", TimeoutSeconds: api.MaxExecTimeoutSeconds}, true},
		{"empty", api.ExecRequest{}, false},
		{"empty args", api.ExecRequest{Args: []string{}}, false},
		{"both", api.ExecRequest{Command: "ls", Args: []string{"ls"}}, false},
		{"empty program", api.ExecRequest{Args: []string{"", "x"}}, false},
		{"negative timeout", api.ExecRequest{Command: "ls", TimeoutSeconds: -1}, false},
		{"timeout over max", api.ExecRequest{Command: "ls", TimeoutSeconds: api.MaxExecTimeoutSeconds + 1}, false},
		{"NUL in command", api.ExecRequest{Command: "ls\x00"}, false},
		{"NUL in cwd", api.ExecRequest{Command: "ls", Cwd: "/\x00"}, false},
		{"NUL in arg", api.ExecRequest{Args: []string{"ls", "a\x00"}}, false},
		{"empty env name", api.ExecRequest{Command: "ls", Env: map[string]string{"": "x"}}, false},
		{"= in env name", api.ExecRequest{Command: "ls", Env: map[string]string{"A=B": "x"}}, false},
		{"NUL in env name", api.ExecRequest{Command: "ls", Env: map[string]string{"A\x00": "x"}}, false},
		{"NUL in env value", api.ExecRequest{Command: "ls", Env: map[string]string{"A": "x\x00"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.ok && err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			if !tt.ok && !api.IsCode(err, api.CodeInvalidRequest) {
				t.Fatalf("Validate = %v, want invalid_request", err)
			}
		})
	}
}

func TestExecEvents(t *testing.T) {
	final := api.ExitEvent(3, true)
	if !final.IsFinal() || *final.ExitCode != 3 || !final.TimedOut {
		t.Errorf("ExitEvent = %+v", final)
	}
	zero := api.ExitEvent(0, false)
	b, _ := json.Marshal(zero)
	if string(b) != `{"exitCode":0}` {
		t.Errorf("exit 0 event = %s; the exit code must survive omitempty", b)
	}
	if (api.ExecEvent{Stream: api.StreamStdout, Data: "x"}).IsFinal() {
		t.Error("an output event is not final")
	}
	if !(api.ExecEvent{Error: "boom"}).IsFinal() {
		t.Error("an error event is final")
	}
	// Two ExitEvents must not share the exit code's storage.
	a, c := api.ExitEvent(1, false), api.ExitEvent(2, false)
	if *a.ExitCode != 1 || *c.ExitCode != 2 {
		t.Errorf("exit codes %d %d", *a.ExitCode, *c.ExitCode)
	}
}

func TestTrustValidate(t *testing.T) {
	for _, tr := range []api.Trust{api.TrustPrivate, api.TrustExternal} {
		if err := tr.Validate(); err != nil || tr.String() != string(tr) {
			t.Errorf("%q: %v", tr, err)
		}
	}
	for _, tr := range []api.Trust{"", "Private", "public"} {
		err := tr.Validate()
		if !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), "private") {
			t.Errorf("%q: %v", tr, err)
		}
	}
}
