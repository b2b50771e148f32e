package adapterhttp_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// try(call()).ok(t) unwraps a (value, error) pair, failing the test on the error.
func try[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) ok(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code api.Code) *api.Error {
	t.Helper()
	if !api.IsCode(err, code) {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	return api.AsError(err)
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	mem.features = append(slices.Clone(allFeatures), "no.such.feature", adapters.FeatureSSH)
	_, c := serve(t, mem, "s3cret-token")

	if got := c.Info(); got.Kind != "remote" || got.Protocol != adapters.ProtocolVersion {
		t.Fatalf("Info before refresh = %+v", got)
	}
	noErr(t, c.Refresh(ctx))
	if got := c.Info(); got.Kind != "mem" || got.Version != "0.1" || got.Trust != api.TrustPrivate {
		t.Fatalf("Info after refresh = %+v", got)
	}
	caps := try(c.Capabilities(ctx)).ok(t)
	wantFeatures := slices.Sorted(slices.Values(append(slices.Clone(allFeatures), adapters.FeatureSSH)))
	if !slices.Equal(caps.Features, wantFeatures) || caps.MaxCPU != 4 || !slices.Equal(caps.Regions, []string{"lab"}) {
		t.Fatalf("capabilities = %+v, want features %v", caps, wantFeatures)
	}
	if capy := try(c.Capacity(ctx)).ok(t); !capy.Bounded || capy.FreeCPU != 3.5 || capy.FreeMemoryMiB != 2048 {
		t.Fatalf("capacity = %+v", capy)
	}
	noErr(t, c.Health(ctx))

	inst := try(c.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "inst_a", Env: map[string]string{"A": "1"}})).ok(t)
	if inst.SandboxID != "sbx_1" || inst.State != adapters.StateRunning || !strings.Contains(inst.Ref, "/") {
		t.Fatalf("created %+v", inst)
	}
	ref := inst.Ref
	if again := try(c.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "inst_a"})).ok(t); again.Ref != ref {
		t.Fatalf("second create ref %q, want %q", again.Ref, ref)
	}
	if got := try(c.Get(ctx, ref)).ok(t); got != inst {
		t.Fatalf("get = %+v, want %+v", got, inst)
	}
	if list := try(c.List(ctx, "inst_a")).ok(t); len(list) != 1 || list[0] != inst {
		t.Fatalf("list = %+v", list)
	}
	if list := try(c.List(ctx, "inst_other")).ok(t); list == nil || len(list) != 0 {
		t.Fatalf("list of another installation = %#v, want empty and not nil", list)
	}

	res := try(c.Exec(ctx, ref, api.ExecRequest{Command: "echo hi"})).ok(t)
	if res.Stdout != "hi\n" || res.ExitCode != 0 || res.DurationMs != 1 {
		t.Fatalf("exec = %+v", res)
	}
	if res := try(c.Exec(ctx, ref, api.ExecRequest{Command: "exit 7"})).ok(t); res.ExitCode != 7 || res.Stderr != "exiting\n" {
		t.Fatalf("exec exit 7 = %+v", res)
	}

	var events []api.ExecEvent
	st := try(c.ExecStream(ctx, ref, api.ExecRequest{Command: "words a b"}, func(ev api.ExecEvent) error {
		events = append(events, ev)
		return nil
	})).ok(t)
	wantEvents := []api.ExecEvent{
		{Stream: "stdout", Data: "a\n"}, {Stream: "stdout", Data: "b\n"}, {Stream: "stderr", Data: "done\n"},
	}
	if st != (adapters.ExitStatus{Code: 3}) || !slices.Equal(events, wantEvents) {
		t.Fatalf("stream = %+v %+v", st, events)
	}
	st = try(c.ExecStream(ctx, ref, api.ExecRequest{Command: "timeout"}, func(api.ExecEvent) error { return nil })).ok(t)
	if st != (adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}) {
		t.Fatalf("timed out stream = %+v", st)
	}

	content := []byte("bin\x00ary\xff")
	noErr(t, c.WriteFile(ctx, ref, "/work/a b.txt", content))
	noErr(t, c.WriteFile(ctx, ref, "/work/empty", nil))
	if got := try(c.ReadFile(ctx, ref, "/work/a b.txt")).ok(t); !bytes.Equal(got, content) {
		t.Fatalf("read %q, want %q", got, content)
	}
	if got := try(c.ReadFile(ctx, ref, "/work/empty")).ok(t); len(got) != 0 {
		t.Fatalf("read empty file = %q", got)
	}
	files := try(c.ListFiles(ctx, ref, "/work")).ok(t)
	if len(files) != 2 || files[0].Name != "a b.txt" || files[0].Size != int64(len(content)) || files[0].Mode != 0o644 {
		t.Fatalf("list files = %+v", files)
	}
	if files := try(c.ListFiles(ctx, ref, "/nowhere")).ok(t); files == nil || len(files) != 0 {
		t.Fatalf("empty listing = %#v, want empty and not nil", files)
	}
	_, err := c.ReadFile(ctx, ref, "/work/missing")
	wantCode(t, err, api.CodeNotFound)

	for _, step := range []struct {
		call func(context.Context, string) error
		want adapters.InstanceState
	}{
		{c.Stop, adapters.StateStopped}, {c.Start, adapters.StateRunning},
		{c.Pause, adapters.StatePaused}, {c.Resume, adapters.StateRunning},
	} {
		noErr(t, step.call(ctx, ref))
		if got := try(c.Get(ctx, ref)).ok(t); got.State != step.want {
			t.Fatalf("state = %s, want %s", got.State, step.want)
		}
	}

	snap := try(c.Snapshot(ctx, ref, adapters.SnapshotMemory)).ok(t)
	if snap.Kind != adapters.SnapshotMemory || snap.SizeBytes != 2 || !strings.Contains(snap.Ref, "/") {
		t.Fatalf("snapshot = %+v", snap)
	}
	fork := try(c.Create(ctx, adapters.CreateRequest{ID: "sbx_2", Installation: "inst_a", FromSnapshot: snap.Ref})).ok(t)
	if got := try(c.ReadFile(ctx, fork.Ref, "/work/a b.txt")).ok(t); !bytes.Equal(got, content) {
		t.Fatalf("fork read %q", got)
	}
	noErr(t, c.DeleteSnapshot(ctx, snap.Ref))
	noErr(t, c.DeleteSnapshot(ctx, snap.Ref)) // missing: still success
	_, err = c.Create(ctx, adapters.CreateRequest{ID: "sbx_3", Installation: "inst_a", FromSnapshot: snap.Ref})
	wantCode(t, err, api.CodeInvalidRequest)

	if url := try(c.ExposePort(ctx, ref, 8080)).ok(t); url != "https://8080.ports.example/" {
		t.Fatalf("url = %q", url)
	}

	noErr(t, c.Delete(ctx, ref))
	noErr(t, c.Delete(ctx, ref)) // missing: success
	_, err = c.Get(ctx, ref)
	wantCode(t, err, api.CodeNotFound)
}

func TestEnvelopeErrorsKeepTheirCode(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	_, c := serve(t, mem, "")
	inst := try(c.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)

	_, err := c.Get(ctx, "missing")
	if e := wantCode(t, err, api.CodeNotFound); !strings.Contains(e.Message, "missing") {
		t.Fatalf("message %q lost the adapter's words", e.Message)
	}
	_, err = c.Exec(ctx, "missing", api.ExecRequest{Command: "echo"})
	wantCode(t, err, api.CodeNotFound)
	_, err = c.ExecStream(ctx, "missing", api.ExecRequest{Command: "words a"}, func(api.ExecEvent) error { return nil })
	wantCode(t, err, api.CodeNotFound) // before the stream started, the code survives

	noErr(t, c.Stop(ctx, inst.Ref))
	_, err = c.Exec(ctx, inst.Ref, api.ExecRequest{Command: "echo hi"})
	wantCode(t, err, api.CodeInvalidState)
	wantCode(t, c.Pause(ctx, inst.Ref), api.CodeInvalidState)

	_, err = c.Exec(ctx, inst.Ref, api.ExecRequest{})
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = c.Create(ctx, adapters.CreateRequest{ID: "sbx_2"})
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = c.ExposePort(ctx, inst.Ref, 70000)
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = c.Snapshot(ctx, inst.Ref, "cpu")
	wantCode(t, err, api.CodeInvalidRequest)

	mem.setHealth(errors.New("disk full"))
	if e := wantCode(t, c.Health(ctx), api.CodeProviderUnavailable); !strings.Contains(e.Message, "disk full") {
		t.Fatalf("health message %q", e.Message)
	}
	mem.setHealth(adapters.InsufficientCapacity("no room"))
	wantCode(t, c.Health(ctx), api.CodeInsufficientCapacity)
}

func TestOptionalOperationsWithoutInterface(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	_, c := serve(t, basicAdapter{mem}, "")
	inst := try(c.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)

	caps := try(c.Capabilities(ctx)).ok(t)
	if !slices.Equal(caps.Features, []string{adapters.FeatureArchAMD64, adapters.FeatureExec}) {
		t.Fatalf("features of a basic adapter = %v", caps.Features)
	}
	calls := map[string]func() error{
		"exec.stream": func() error {
			_, err := c.ExecStream(ctx, inst.Ref, api.ExecRequest{Command: "echo"}, func(api.ExecEvent) error { return nil })
			return err
		},
		"files.read":  func() error { _, err := c.ReadFile(ctx, inst.Ref, "/a"); return err },
		"files.write": func() error { return c.WriteFile(ctx, inst.Ref, "/a", []byte("x")) },
		"files.list":  func() error { _, err := c.ListFiles(ctx, inst.Ref, "/"); return err },
		"stop":        func() error { return c.Stop(ctx, inst.Ref) },
		"start":       func() error { return c.Start(ctx, inst.Ref) },
		"pause":       func() error { return c.Pause(ctx, inst.Ref) },
		"resume":      func() error { return c.Resume(ctx, inst.Ref) },
		"snapshots.disk": func() error {
			_, err := c.Snapshot(ctx, inst.Ref, adapters.SnapshotDisk)
			return err
		},
		"snapshots.delete": func() error { return c.DeleteSnapshot(ctx, "snap") },
		"ports.expose":     func() error { _, err := c.ExposePort(ctx, inst.Ref, 80); return err },
	}
	for op, call := range calls {
		e := wantCode(t, call(), api.CodeUnsupportedOperation)
		if e.Details["operation"] != op {
			t.Errorf("%s: details = %v", op, e.Details)
		}
	}
}

func TestOptionalOperationsNotDeclared(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	mem.features = []string{adapters.FeatureExec, adapters.FeatureSnapshotsDisk}
	_, c := serve(t, mem, "")
	inst := try(c.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)

	wantCode(t, c.Pause(ctx, inst.Ref), api.CodeUnsupportedOperation)
	_, err := c.ReadFile(ctx, inst.Ref, "/a")
	wantCode(t, err, api.CodeUnsupportedOperation)
	_, err = c.ExecStream(ctx, inst.Ref, api.ExecRequest{Command: "words a"}, func(api.ExecEvent) error { return nil })
	wantCode(t, err, api.CodeUnsupportedOperation)
	_, err = c.Snapshot(ctx, inst.Ref, adapters.SnapshotMemory)
	wantCode(t, err, api.CodeUnsupportedOperation)
	if _, err := c.Snapshot(ctx, inst.Ref, adapters.SnapshotDisk); err != nil {
		t.Fatalf("declared disk snapshot: %v", err)
	}
}
