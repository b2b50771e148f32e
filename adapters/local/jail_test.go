package local

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// newAdapter builds an adapter in a fresh root; a host that cannot run bwrap fails
// the test unless DIFFERENTLY_SKIP_LOCAL=1.
func newAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := New(t.Context(), Config{Root: t.TempDir()})
	if err != nil {
		if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
			t.Skipf("DIFFERENTLY_SKIP_LOCAL=1: %v", err)
		}
		t.Fatalf("local adapter: %v (set DIFFERENTLY_SKIP_LOCAL=1 to skip on a host without bwrap)", err)
	}
	return a
}

func create(t *testing.T, a *Adapter, env map[string]string) string {
	t.Helper()
	id := fmt.Sprintf("t%d", time.Now().UnixNano())
	inst, err := a.Create(t.Context(), adapters.CreateRequest{ID: id, Installation: "test", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Delete(context.Background(), inst.Ref) })
	return inst.Ref
}

// running starts command (which must print "started" first) as a streamed exec and
// returns once it has; wait returns the exec's error.
func running(t *testing.T, a *Adapter, ref, command string) func() error {
	t.Helper()
	started := make(chan struct{})
	done := make(chan error, 1)
	// Cancelled at cleanup, so that a test that failed early does not wait out
	// the command.
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	go func() {
		var once bool
		_, err := a.ExecStream(ctx, ref, api.ExecRequest{Command: command, TimeoutSeconds: 120},
			func(ev api.ExecEvent) error {
				if !once && strings.Contains(ev.Data, "started") {
					once = true
					close(started)
				}
				return nil
			})
		if !once {
			close(started)
		}
		done <- err
	}()
	<-started
	wait := sync.OnceValue(func() error { return <-done })
	t.Cleanup(func() {
		cancel()
		_ = wait()
	})
	return wait
}

// waitFor polls cond until it holds or a bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hostProcess reports whether a host process runs "sleep <arg>".
func hostProcess(arg string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == "sleep\x00"+arg+"\x00" {
			return true
		}
	}
	return false
}

// Stop and Delete end a running command and what it left in a new session.
func TestStopAndDeleteKillEverything(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	for i, op := range []string{"stop", "delete"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			ref := create(t, a, nil)
			mark := strconv.Itoa(200000+i) + "." + strconv.FormatInt(time.Now().UnixNano()%1000, 10)
			done := running(t, a, ref, "setsid sleep "+mark+" & echo started; wait")
			waitFor(t, "the setsid child runs", func() bool { return hostProcess(mark) })
			var err error
			if op == "stop" {
				err = a.Stop(t.Context(), ref)
			} else {
				err = a.Delete(t.Context(), ref)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := done(); err == nil {
				t.Error("the running exec ended without an error")
			}
			waitFor(t, "the setsid child is gone", func() bool { return !hostProcess(mark) })
		})
	}
}

// Pause freezes what runs; a paused sandbox refuses execs; resume lets it go on.
func TestPauseFreezes(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	if !a.jail.cg.canFreeze() {
		t.Skip("no cgroup freezer on this host; the adapter does not offer pause (see its capabilities)")
	}
	ref := create(t, a, nil)
	done := running(t, a, ref, "echo started; sleep 600")
	name := a.jail.cgroupName(ref)
	if err := a.Pause(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frozen", func() bool { return a.jail.cg.frozen(name) })
	if _, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "true"}); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("exec while paused: %v, want invalid_state", err)
	}
	if err := a.Resume(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "thawed", func() bool { return !a.jail.cg.frozen(name) })
	// Stopped while paused: the frozen command must still die.
	if err := a.Pause(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if err := done(); err == nil {
		t.Error("the paused command ended without an error on stop")
	}
	if err := a.Pause(t.Context(), ref); !api.IsCode(err, api.CodeInvalidState) {
		t.Errorf("pause of a stopped sandbox: %v, want invalid_state", err)
	}
}

// A command gets the sandbox's environment and a default PATH and HOME, nothing of
// the daemon's, and cannot make user namespaces of its own.
func TestCommandEnvironment(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	ref := create(t, a, map[string]string{"GREETING": "hi"})
	res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "env; id -un", Env: map[string]string{"EXTRA": "1"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	var names []string
	for line := range strings.Lines(strings.TrimSpace(res.Stdout)) {
		if k, _, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			names = append(names, k)
		}
	}
	for _, n := range names {
		if !slices.Contains([]string{"PATH", "HOME", "PWD", "SHLVL", "GREETING", "EXTRA", "_", "OLDPWD"}, n) {
			t.Errorf("unexpected variable %s in the command's environment:\n%s", n, res.Stdout)
		}
	}
	if !strings.Contains(res.Stdout, "GREETING=hi") || !strings.Contains(res.Stdout, "HOME="+a.SandboxDir(ref)) ||
		!strings.HasSuffix(res.Stdout, "sandbox\n") {
		t.Errorf("environment or user:\n%s", res.Stdout)
	}
	if !a.jail.disableUserns {
		t.Logf("bwrap %s cannot refuse nested user namespaces (0.8 can)", a.jail.bwrap)
		return
	}
	res, err = a.Exec(t.Context(), ref, api.ExecRequest{Command: "unshare -U true"})
	if err != nil || res.ExitCode == 0 {
		t.Errorf("a nested user namespace was allowed: %+v, %v", res, err)
	}
}

// A command bwrap cannot start is an internal error, health says why, and the next
// command still runs.
func TestStartFailure(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	ref := create(t, a, nil)
	bwrap := a.jail.bwrap
	a.jail.bwrap = "/nonexistent/bwrap"
	_, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "true"})
	herr := a.Health(t.Context())
	a.jail.bwrap = bwrap
	if !api.IsCode(err, api.CodeInternal) {
		t.Fatalf("exec with bwrap missing: %v, want internal", err)
	}
	if !api.IsCode(herr, api.CodeProviderUnavailable) {
		t.Errorf("health with bwrap missing: %v, want provider_unavailable", herr)
	}
	if err := a.Health(t.Context()); err != nil {
		t.Errorf("health: %v", err)
	}
	if res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "echo ok"}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("exec after: %+v, %v", res, err)
	}
}

// Errors name this adapter, not devhost whose code serves both.
func TestErrorsSayLocal(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	ref := create(t, a, nil)
	_, err := a.ListFiles(t.Context(), ref, "../../etc")
	if !api.IsCode(err, api.CodeInvalidRequest) || !strings.HasPrefix(api.Message(err), "local: ") {
		t.Errorf("ListFiles outside the sandbox: %v, want invalid_request starting local:", err)
	}
	_, err = a.Get(t.Context(), "nosuch")
	if !api.IsCode(err, api.CodeNotFound) || !strings.HasPrefix(api.Message(err), "local: ") {
		t.Errorf("Get of a missing instance: %v, want not_found starting local:", err)
	}
}

// A command on a terminal through bwrap: the terminal, its size and typed keys
// reach it.
func TestExecPTYThroughTheJail(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	ref := create(t, a, nil)
	input := make(chan []byte, 1)
	var out strings.Builder
	sent := false
	st, err := a.ExecPTY(t.Context(), ref, api.ExecRequest{Command: `test -t 0 && echo on-a-tty; stty size; read -r line; echo "got $line"`},
		adapters.TermSize{Cols: 90, Rows: 20}, input, nil, func(_ string, data []byte) error {
			out.Write(data)
			if !sent && strings.Contains(out.String(), "20 90") {
				sent = true
				input <- []byte("keys\r")
			}
			return nil
		})
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if err != nil || st.Code != 0 || !strings.Contains(got, "on-a-tty\n20 90\n") || !strings.Contains(got, "got keys\n") {
		t.Fatalf("ExecPTY = %+v, %v; output %q", st, err, got)
	}
	// The terminal is the command's controlling terminal: an interactive shell
	// has job control.
	out.Reset()
	st, err = a.ExecPTY(t.Context(), ref, api.ExecRequest{Args: []string{"bash", "-i", "-c", "echo interactive"}},
		adapters.TermSize{Cols: 80, Rows: 24}, nil, nil, func(_ string, data []byte) error { out.Write(data); return nil })
	if err != nil || st.Code != 0 || !strings.Contains(out.String(), "interactive") || strings.Contains(out.String(), "job control") {
		t.Fatalf("bash -i on the terminal: %+v, %v; output %q", st, err, out.String())
	}
}
