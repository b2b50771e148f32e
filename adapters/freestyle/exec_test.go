package freestyle_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/api"
)

func TestExecDetails(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	ctx := t.Context()
	inst, err := e.a.Create(ctx, request("sbx_exec"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Exec(ctx, inst.Ref, api.ExecRequest{Args: []string{"printf", "%s|%s", "it's", "$(echo no)"}})
	if err != nil || res.Stdout != "it's|$(echo no)" {
		t.Fatalf("args: %+v, %v", res, err)
	}
	res, err = e.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: "pwd", Cwd: "/tmp/it's dir"})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("cwd that does not exist: %+v, %v; want a failed cd", res, err)
	}
	res, err = e.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: "wc -c", Stdin: "four"})
	if err != nil || strings.TrimSpace(res.Stdout) != "4" {
		t.Fatalf("stdin: %+v, %v", res, err)
	}
	res, err = e.a.Exec(ctx, inst.Ref, api.ExecRequest{Args: []string{"no-such-program-here"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing program: %+v, %v", res, err)
	}
	if _, err := e.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: "true", Env: map[string]string{"1X": "y"}}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("env name that is no shell identifier: %v", err)
	}
	if got := e.fake.LastExecEnv(inst.Ref); got != nil {
		t.Fatalf("refused exec reached the provider with env %v", got)
	}
}

// TestExecTimeouts: no timeout and a timeout over 300 s both send 300000 ms; a
// null statusCode is a timeout result.
func TestExecTimeouts(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	inst, err := e.a.Create(t.Context(), request("sbx_timeouts"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent []int64
	e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/exec-await") {
			return false
		}
		var body struct {
			TimeoutMs int64  `json:"timeoutMs"`
			Stdin     string `json:"stdin"`
		}
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		mu.Lock()
		sent = append(sent, body.TimeoutMs)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"stdout":"partial","stderr":"","statusCode":null}`)
		return true
	})
	for _, secs := range []int{0, 1000, 7} {
		res, err := e.a.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: "sleep 1000", TimeoutSeconds: secs})
		if err != nil || !res.TimedOut || res.ExitCode != api.TimeoutExitCode || res.Stdout != "partial" {
			t.Fatalf("timed out exec: %+v, %v", res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 3 || sent[0] != 300000 || sent[1] != 300000 || sent[2] != 7000 {
		t.Fatalf("timeoutMs sent %v, want [300000 300000 7000]", sent)
	}
}

func TestExecOnStoppedOrPausedIsInvalidState(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	ctx := t.Context()
	inst, err := e.a.Create(ctx, request("sbx_states"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.Pause(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Stop(ctx, inst.Ref); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("stop of a paused VM: %v", err)
	}
	if err := e.a.Resume(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Stop(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Resume(ctx, inst.Ref); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("resume of a stopped VM: %v", err)
	}
	if err := e.a.Pause(ctx, inst.Ref); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("pause of a stopped VM: %v", err)
	}
	if _, err := e.a.ReadFile(ctx, inst.Ref, "/tmp/x"); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("read on a stopped VM: %v", err)
	}
	if got, _ := e.a.Get(ctx, inst.Ref); got.State != adapters.StateStopped {
		t.Fatalf("state %q", got.State)
	}
}
