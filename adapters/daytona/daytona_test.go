package daytona

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/daytona/daytonafake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

func TestCreateBody(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	req := request(ids.New("inst"))
	req.TTLSeconds = 61
	req.Resources = adapters.Resources{CPU: 2, MemoryMiB: 4096, DiskGiB: 5}
	inst, err := a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if inst.State != adapters.StateRunning || inst.SandboxID != req.ID || inst.Region != "eu" {
		t.Fatalf("instance %+v", inst)
	}
	sb, ok := fake.Sandbox(inst.Ref)
	if !ok {
		t.Fatal("sandbox not in the fake")
	}
	if sb.Name != req.ID || sb.Target != "eu" || sb.Snapshot != "base-snap" || sb.Env["BASE"] != "from-create" {
		t.Errorf("sandbox %+v", sb)
	}
	if sb.Labels["team"] != "blue" || sb.Labels[adapters.LabelSandboxID] != req.ID || sb.Labels[adapters.LabelInstallation] != req.Installation {
		t.Errorf("labels %v", sb.Labels)
	}
	if sb.AutoStopInterval == nil || *sb.AutoStopInterval != 0 {
		t.Errorf("autoStopInterval %v, want an explicit 0", sb.AutoStopInterval)
	}
	if sb.TTLMinutes != 2 {
		t.Errorf("ttlMinutes %d for 61 s, want 2 (rounded up)", sb.TTLMinutes)
	}
	if err := a.RenewTTL(t.Context(), inst.Ref, 3600); err != nil {
		t.Fatal(err)
	}
	if sb, _ := fake.Sandbox(inst.Ref); sb.TTLMinutes != 60 {
		t.Errorf("renewed ttlMinutes %d, want 60", sb.TTLMinutes)
	}

	// A template overrides the configured snapshot.
	req = request(req.Installation)
	req.Template = "other-snap"
	inst, err = a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if sb, _ := fake.Sandbox(inst.Ref); sb.Snapshot != "other-snap" {
		t.Errorf("snapshot %q, want the template", sb.Snapshot)
	}
	req = request(req.Installation)
	req.Template = "no-such-snap"
	if _, err := a.Create(t.Context(), req); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("unknown template: %v, want invalid_request", err)
	}
}

// A response lost on the way back must not lead to a second sandbox.
func TestCreateAfterDroppedResponse(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	var dropped atomic.Bool
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/sandbox" || !dropped.CompareAndSwap(false, true) {
			return false
		}
		fake.ServeHTTP(httptest.NewRecorder(), r) // the sandbox is made...
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // ...and the answer lost
		}
		return true
	})
	req := request(ids.New("inst"))
	if _, err := a.Create(t.Context(), req); !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("first create: %v, want provider_unavailable", err)
	}
	inst, err := a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if fake.Creates() != 1 || inst.SandboxID != req.ID || inst.State != adapters.StateRunning {
		t.Fatalf("creates %d, instance %+v", fake.Creates(), inst)
	}
}

func TestCreateFailedSandbox(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	fake.FailCreates("no space left on runner")
	_, err := a.Create(t.Context(), request(ids.New("inst")))
	if !api.IsCode(err, api.CodeSandboxFailed) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("got %v, want sandbox_failed with the reason", err)
	}
	if fake.Count() != 0 {
		t.Errorf("the failed sandbox was left behind")
	}
}

func TestCreateFromMissingSnapshot(t *testing.T) {
	a, _ := setup(t, ClassContainer)
	req := request(ids.New("inst"))
	req.FromSnapshot = "dly-snap_missing"
	if _, err := a.Create(t.Context(), req); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("got %v, want invalid_request", err)
	}
}

func TestListPagesAndSkipsDeleted(t *testing.T) {
	// Options are set before the server serves, as the fake's fields require.
	a, fake := setup(t, ClassContainer, func(f *daytonafake.Server) { f.PageSize = 2 })
	mine, other := ids.New("inst"), ids.New("inst")
	var refs []string
	for range 5 {
		inst, err := a.Create(t.Context(), request(mine))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, inst.Ref)
	}
	if _, err := a.Create(t.Context(), request(other)); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(t.Context(), refs[0]); err != nil {
		t.Fatal(err)
	}
	list, err := a.List(t.Context(), mine)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 4 {
		t.Fatalf("list returned %d instances, want 4 (5 made, 1 destroying): %+v", len(list), list)
	}
	for _, inst := range list {
		if inst.Ref == refs[0] || inst.SandboxID == "" {
			t.Errorf("unexpected instance %+v", inst)
		}
	}

	// A page failing in the middle fails the whole List.
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/sandbox" && r.URL.Query().Get("cursor") != "" {
			http.Error(w, `{"statusCode":502,"error":"Bad Gateway","message":"upstream"}`, http.StatusBadGateway)
			return true
		}
		return false
	})
	list, err = a.List(t.Context(), mine)
	if !api.IsCode(err, api.CodeProviderUnavailable) || list != nil {
		t.Fatalf("list with a failing second page: %d instances, %v; want provider_unavailable and nothing", len(list), err)
	}
}

func TestExecDetails(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	inst, err := a.Create(t.Context(), request(ids.New("inst")))
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Value
	fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/process/execute") {
			var body map[string]any
			_ = json.Unmarshal(readBody(r), &body)
			sent.Store(body)
		}
		return false
	})
	res, err := a.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: "echo out; echo err >&2; echo more"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "out\nerr\nmore\n" || res.Stderr != "" || res.ExitCode != 0 {
		t.Errorf("combined output: %+v", res)
	}
	if body := sent.Load().(map[string]any); body["timeout"] != float64(defaultExecTimeout) {
		t.Errorf("timeout sent %v, want %d when unset", body["timeout"], defaultExecTimeout)
	}
	res, err = a.Exec(t.Context(), inst.Ref, api.ExecRequest{Args: []string{"printf", "%s|%s", "it's", `"$X" \n`}})
	if err != nil || res.Stdout != `it's|"$X" \n` {
		t.Errorf("args with quotes: %q, %v", res.Stdout, err)
	}
	_, err = a.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: "cat", Stdin: "x"})
	if e := api.AsError(err); e == nil || e.Code != api.CodeUnsupportedOperation || e.Details["operation"] != "exec.stdin" {
		t.Errorf("stdin: %v, want unsupported_operation exec.stdin", err)
	}
}

func TestReadFileTooLarge(t *testing.T) {
	a, _ := setup(t, ClassContainer)
	inst, err := a.Create(t.Context(), request(ids.New("inst")))
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file one byte over the limit costs no disk.
	res, err := a.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: "truncate -s 104857601 big"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("truncate: %+v %v", res, err)
	}
	if _, err := a.ReadFile(t.Context(), inst.Ref, "big"); !api.IsCode(err, api.CodePayloadTooLarge) {
		t.Fatalf("read of a 100 MiB + 1 file: %v, want payload_too_large", err)
	}
}

func TestExposePortSignedForAnHour(t *testing.T) {
	a, fake := setup(t, ClassContainer)
	inst, err := a.Create(t.Context(), request(ids.New("inst")))
	if err != nil {
		t.Fatal(err)
	}
	u, err := a.ExposePort(t.Context(), inst.Ref, 3000)
	if err != nil || !strings.HasPrefix(u, "https://3000-") {
		t.Fatalf("url %q, %v", u, err)
	}
	if sb, _ := fake.Sandbox(inst.Ref); sb.PreviewSeconds != previewURLSeconds {
		t.Errorf("expiresInSeconds %d, want %d", sb.PreviewSeconds, previewURLSeconds)
	}
}
