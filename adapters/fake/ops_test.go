package fake

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestExecEcho(t *testing.T) {
	a := New(Config{})
	ref := mustCreate(t, a, req("s")).Ref
	tests := []struct {
		name string
		req  api.ExecRequest
		want string
	}{
		{"command", api.ExecRequest{Command: "echo hi && ls"}, "echo hi && ls\n"},
		{"args", api.ExecRequest{Args: []string{"ls", "-l", "/tmp"}}, "ls -l /tmp\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Exec(bg, ref, tt.req)
			if err != nil || res != (api.ExecResult{Stdout: tt.want}) {
				t.Errorf("Exec = %+v, %v", res, err)
			}
		})
	}
	_, err := a.Exec(bg, ref, api.ExecRequest{})
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = a.Exec(bg, "fake_missing", api.ExecRequest{Command: "x"})
	wantCode(t, err, api.CodeNotFound)
	if err := a.Pause(bg, ref); err != nil {
		t.Fatal(err)
	}
	_, err = a.Exec(bg, ref, api.ExecRequest{Command: "x"})
	wantCode(t, err, api.CodeInvalidState)
	if err := a.Resume(bg, ref); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(bg, ref); err != nil {
		t.Fatal(err)
	}
	_, err = a.Exec(bg, ref, api.ExecRequest{Command: "x"})
	wantCode(t, err, api.CodeInvalidState)
}

func TestExecFunc(t *testing.T) {
	boom := errors.New("boom")
	var seen InstanceView
	a := New(Config{ExecFunc: func(_ context.Context, v InstanceView, r api.ExecRequest) (api.ExecResult, error) {
		seen = v
		switch r.Command {
		case "fail":
			return api.ExecResult{}, boom
		case "big":
			return api.ExecResult{Stdout: strings.Repeat("o", api.MaxExecOutputBytes+1), Stderr: "e"}, nil
		}
		return api.ExecResult{ExitCode: 3, Stdout: "out", Stderr: "err", DurationMs: 7}, nil
	}})
	inst := mustCreate(t, a, adapters.CreateRequest{ID: "s", Installation: "i", Env: map[string]string{"K": "V"}})
	res, err := a.Exec(bg, inst.Ref, api.ExecRequest{Command: "run"})
	if err != nil || res != (api.ExecResult{ExitCode: 3, Stdout: "out", Stderr: "err", DurationMs: 7}) {
		t.Errorf("Exec = %+v, %v", res, err)
	}
	if seen.Ref != inst.Ref || seen.Env["K"] != "V" || seen.Labels[adapters.LabelSandboxID] != "s" {
		t.Errorf("ExecFunc saw %+v", seen)
	}
	if _, err := a.Exec(bg, inst.Ref, api.ExecRequest{Command: "fail"}); !errors.Is(err, boom) {
		t.Errorf("Exec error = %v, want boom", err)
	}
	res, _ = a.Exec(bg, inst.Ref, api.ExecRequest{Command: "big"})
	if len(res.Stdout) != api.MaxExecOutputBytes || !res.Truncated || res.Stderr != "e" {
		t.Errorf("big output: %d bytes, truncated %v", len(res.Stdout), res.Truncated)
	}
	// Streaming is not capped.
	var n int
	if _, err := a.ExecStream(bg, inst.Ref, api.ExecRequest{Command: "big"}, func(ev api.ExecEvent) error {
		if ev.Stream == api.StreamStdout {
			n = len(ev.Data)
		}
		return nil
	}); err != nil || n != api.MaxExecOutputBytes+1 {
		t.Errorf("streamed %d bytes, %v", n, err)
	}
}

func TestExecStream(t *testing.T) {
	a := New(Config{ExecFunc: func(_ context.Context, _ InstanceView, r api.ExecRequest) (api.ExecResult, error) {
		if r.Command == "quiet" {
			return api.ExecResult{ExitCode: api.TimeoutExitCode, TimedOut: true}, nil
		}
		return api.ExecResult{ExitCode: 1, Stdout: "o", Stderr: "e"}, nil
	}})
	ref := mustCreate(t, a, req("s")).Ref
	var got []api.ExecEvent
	collect := func(ev api.ExecEvent) error { got = append(got, ev); return nil }
	st, err := a.ExecStream(bg, ref, api.ExecRequest{Command: "x"}, collect)
	want := []api.ExecEvent{{Stream: api.StreamStdout, Data: "o"}, {Stream: api.StreamStderr, Data: "e"}}
	if err != nil || st != (adapters.ExitStatus{Code: 1}) || !reflect.DeepEqual(got, want) {
		t.Errorf("ExecStream = %+v, %v, events %+v", st, err, got)
	}
	got = nil
	st, err = a.ExecStream(bg, ref, api.ExecRequest{Command: "quiet"}, collect)
	if err != nil || st != (adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}) || len(got) != 0 {
		t.Errorf("quiet ExecStream = %+v, %v, events %+v", st, err, got)
	}
	stopErr := errors.New("client gone")
	if _, err := a.ExecStream(bg, ref, api.ExecRequest{Command: "x"}, func(api.ExecEvent) error { return stopErr }); !errors.Is(err, stopErr) {
		t.Errorf("emit error = %v", err)
	}
	_, err = a.ExecStream(bg, "fake_missing", api.ExecRequest{Command: "x"}, collect)
	wantCode(t, err, api.CodeNotFound)
}

func TestLifecycleTransitions(t *testing.T) {
	type op struct {
		name string
		call func(*Adapter, string) error
	}
	stop := op{"stop", func(a *Adapter, r string) error { return a.Stop(bg, r) }}
	start := op{"start", func(a *Adapter, r string) error { return a.Start(bg, r) }}
	pause := op{"pause", func(a *Adapter, r string) error { return a.Pause(bg, r) }}
	resume := op{"resume", func(a *Adapter, r string) error { return a.Resume(bg, r) }}
	S := adapters.StateStopped
	R := adapters.StateRunning
	P := adapters.StatePaused
	tests := []struct {
		from adapters.InstanceState
		op   op
		want adapters.InstanceState // "" means invalid_state, state unchanged
	}{
		{R, stop, S}, {S, stop, S}, {P, stop, ""},
		{S, start, R}, {R, start, R}, {P, start, ""},
		{R, pause, P}, {P, pause, P}, {S, pause, ""},
		{P, resume, R}, {R, resume, R}, {S, resume, ""},
		{adapters.StatePending, stop, ""}, {adapters.StateError, start, ""},
		{adapters.StatePending, pause, ""}, {adapters.StateError, resume, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"/"+tt.op.name, func(t *testing.T) {
			a := New(Config{})
			ref := mustCreate(t, a, req("s")).Ref
			if err := a.SetState(ref, tt.from, ""); err != nil {
				t.Fatal(err)
			}
			err := tt.op.call(a, ref)
			want := tt.want
			if want == "" {
				wantCode(t, err, api.CodeInvalidState)
				want = tt.from
			} else if err != nil {
				t.Fatal(err)
			}
			if got, _ := a.Get(bg, ref); got.State != want {
				t.Errorf("state = %s, want %s", got.State, want)
			}
		})
	}
	a := New(Config{})
	for _, o := range []op{stop, start, pause, resume} {
		wantCode(t, o.call(a, "fake_missing"), api.CodeNotFound)
	}
}

func TestSnapshotsAndRestore(t *testing.T) {
	a := New(Config{})
	ref := mustCreate(t, a, req("src")).Ref
	if err := a.WriteFile(bg, ref, "/work/a.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []adapters.SnapshotKind{adapters.SnapshotDisk, adapters.SnapshotMemory} {
		snap, err := a.Snapshot(bg, ref, kind)
		if err != nil || !strings.HasPrefix(snap.Ref, "snap_") || snap.Kind != kind || snap.SizeBytes != 5 {
			t.Fatalf("Snapshot(%s) = %+v, %v", kind, snap, err)
		}
	}
	snap, _ := a.Snapshot(bg, ref, adapters.SnapshotDisk)
	// Later writes and the source's deletion do not reach the snapshot.
	_ = a.WriteFile(bg, ref, "/work/a.txt", []byte("changed"))
	_ = a.Delete(bg, ref)
	fork := mustCreate(t, a, adapters.CreateRequest{ID: "fork", Installation: "i", FromSnapshot: snap.Ref})
	if data, err := a.ReadFile(bg, fork.Ref, "/work/a.txt"); err != nil || string(data) != "hello" {
		t.Errorf("restored file = %q, %v", data, err)
	}
	for range 2 {
		if err := a.DeleteSnapshot(bg, snap.Ref); err != nil {
			t.Fatal(err)
		}
	}
	if a.Snapshots() != 2 {
		t.Errorf("Snapshots = %d, want 2", a.Snapshots())
	}
	_, err := a.Create(bg, adapters.CreateRequest{ID: "late", Installation: "i", FromSnapshot: snap.Ref})
	wantCode(t, err, api.CodeInvalidRequest)

	_, err = a.Snapshot(bg, fork.Ref, "vm")
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = a.Snapshot(bg, "fake_missing", adapters.SnapshotDisk)
	wantCode(t, err, api.CodeNotFound)
	_ = a.Stop(bg, fork.Ref)
	_, err = a.Snapshot(bg, fork.Ref, adapters.SnapshotMemory)
	wantCode(t, err, api.CodeInvalidState)
	if _, err := a.Snapshot(bg, fork.Ref, adapters.SnapshotDisk); err != nil {
		t.Errorf("disk snapshot of a stopped instance: %v", err)
	}
}

func TestExposePort(t *testing.T) {
	a := New(Config{})
	ref := mustCreate(t, a, req("s")).Ref
	url, err := a.ExposePort(bg, ref, 8080)
	if err != nil || url != "https://"+ref+"-8080.fake.invalid/" {
		t.Errorf("ExposePort = %q, %v", url, err)
	}
	for _, port := range []int{0, -1, 65536} {
		_, err := a.ExposePort(bg, ref, port)
		wantCode(t, err, api.CodeInvalidRequest)
	}
	if _, err := a.ExposePort(bg, ref, 65535); err != nil {
		t.Error(err)
	}
	_, err = a.ExposePort(bg, "fake_missing", 80)
	wantCode(t, err, api.CodeNotFound)
	_ = a.Pause(bg, ref)
	_, err = a.ExposePort(bg, ref, 80)
	wantCode(t, err, api.CodeInvalidState)
}
