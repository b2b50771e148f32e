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
	"github.com/different-ai/differently/adapters/httpx"
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

// jsonLimit stands in for httpx.MaxJSONBody, which an exec answer of 70 MB used to
// go over: a few megabytes of output go over this one as surely, and quickly.
const jsonLimit = 1 << 20

// limited returns an environment whose client refuses JSON answers over jsonLimit,
// and a running VM.
func limited(t *testing.T) (*env, string) {
	t.Helper()
	e := newEnv(t, freestyle.Config{}, freestyle.WithClientOptions(httpx.WithMaxJSONBody(jsonLimit)))
	inst, err := e.a.Create(t.Context(), request("sbx_big"))
	if err != nil {
		t.Fatal(err)
	}
	return e, inst.Ref
}

// TestExecOutputOverTheCap: a command writing more than any buffer holds is a
// result: its exit code, the first api.MaxExecOutputBytes of each stream and
// Truncated. A VM answer over the limit still fails, so the limit is in force.
func TestExecOutputOverTheCap(t *testing.T) {
	e, ref := limited(t)
	const mib = api.MaxExecOutputBytes
	as, bs := strings.Repeat("a", mib), strings.Repeat("b", mib)
	tests := []struct {
		command        string
		exit           int
		stdout, stderr string
		truncated      bool
	}{
		{"head -c 3000000 /dev/zero | tr '\\0' a", 0, as, "", true},
		{"head -c 3000000 /dev/zero | tr '\\0' b >&2; echo out; exit 3", 3, "out\n", bs, true},
		{"head -c 3000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2", 0, as, bs, true},
		{"head -c 1048576 /dev/zero | tr '\\0' a", 0, as, "", false},
	}
	for _, tt := range tests {
		res, err := e.a.Exec(t.Context(), ref, api.ExecRequest{Command: tt.command})
		if err != nil {
			t.Fatalf("%s: %v", tt.command, err)
		}
		if res.ExitCode != tt.exit || res.Truncated != tt.truncated || res.Stdout != tt.stdout || res.Stderr != tt.stderr {
			t.Errorf("%s: exit %d truncated %v, %d bytes of stdout, %d of stderr; want %d, %v, %d, %d", tt.command,
				res.ExitCode, res.Truncated, len(res.Stdout), len(res.Stderr), tt.exit, tt.truncated, len(tt.stdout), len(tt.stderr))
		}
	}
	e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, ref) {
			return false
		}
		_, _ = io.WriteString(w, `{"id":"`+ref+`","state":"running","note":"`+strings.Repeat("n", jsonLimit)+`"}`)
		return true
	})
	if _, err := e.a.Get(t.Context(), ref); !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Errorf("a VM answer over the limit: %v", err)
	}
}

// TestExecAnswerShapes: the status code is found wherever it is in the answer, and
// unknown members are skipped, however large; an answer that is not the JSON object
// expected is provider_unavailable, never a result.
func TestExecAnswerShapes(t *testing.T) {
	big := strings.Repeat("b", 3_000_000)
	kept := big[:api.MaxExecOutputBytes]
	tests := []struct {
		name, body     string
		exit           int
		stdout, stderr string
		truncated      bool
		err            string
	}{
		{"status code last", `{"stdout":"` + big + `","stderr":"` + big + `","statusCode":5}`, 5, kept, kept, true, ""},
		{"null status code last", `{"stdout":"` + big + `","stderr":"e","statusCode":null}`, api.TimeoutExitCode, kept, "e", true, ""},
		{"unknown members", `{"usage":{"ms":[1,2]},"log":"` + big + `","statusCode":2,"stdout":"o","stderr":"e"}`, 2, "o", "e", false, ""},
		{"cut short", `{"statusCode":0,"stdout":"abc`, 0, "", "", false, "malformed answer to POST /v5/vms/"},
		{"not JSON", `<html>`, 0, "", "", false, "malformed answer"},
		{"stderr not a string", `{"statusCode":0,"stdout":"","stderr":[]}`, 0, "", "", false, "malformed answer"},
		{"status code not a number", `{"statusCode":"1","stdout":"","stderr":""}`, 0, "", "", false, "malformed answer"},
		{"trailing data", `{"statusCode":0,"stdout":"","stderr":""} {}`, 0, "", "", false, "malformed answer"},
	}
	e, ref := limited(t)
	for _, tt := range tests {
		e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/exec-await") {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, tt.body)
			return true
		})
		res, err := e.a.Exec(t.Context(), ref, api.ExecRequest{Command: "true"})
		switch {
		case tt.err != "":
			if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %+v, %v; want provider_unavailable saying %q", tt.name, res, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case res.ExitCode != tt.exit || res.Stdout != tt.stdout || res.Stderr != tt.stderr || res.Truncated != tt.truncated:
			t.Errorf("%s: exit %d, stdout %.10q (%d bytes), stderr %.10q (%d bytes), truncated %v", tt.name,
				res.ExitCode, res.Stdout, len(res.Stdout), res.Stderr, len(res.Stderr), res.Truncated)
		}
	}
}
