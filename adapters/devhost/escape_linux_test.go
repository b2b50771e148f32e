package devhost

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
)

// gone reports whether pid has ended: no such process, or a zombie nobody reaped
// yet (the escaped processes are reparented, and their new parent reaps them in its
// own time).
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ")".
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// waitGone polls /proc until pid has ended. A kill is delivered at once but takes
// effect when the process next runs; the bound only turns a survivor into a failure
// instead of a hang.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for range 2000 {
		if gone(pid) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run() // not to leave it behind
	t.Fatalf("%s: process %d, which left its process group with setsid, is still running", what, pid)
}

// marked lists the processes that carry sandbox id's marker.
func marked(a *Adapter, id string) []int {
	prefix := markerVar + "=" + a.track.key + ":" + id + ":"
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || gone(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && hasEntry(env, markerVar, func(v []byte) bool { return bytes.HasPrefix(v, []byte(prefix)) }) {
			out = append(out, pid)
		}
	}
	return out
}

// escapee leaves a sleeper in a session of its own, which writes its pid to
// escaped.pid once it is there; the command waits for that, so that it cannot end
// (and have its group killed) before the sleeper has left the group.
const escapee = `setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped.pid; exec sleep 1000' </dev/null >/dev/null 2>&1 &
while [ ! -e escaped.pid ]; do sleep 0.01; done`

func readPid(t *testing.T, a *Adapter, id string) int {
	t.Helper()
	data, err := a.ReadFile(context.Background(), id, "escaped.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestSetsidProcessesDie: a process a command moved into a session of its own
// (setsid) dies with the command, on Stop and on Delete, as Info.Description says:
// with a cgroup per command where the host allows one, and by the environment
// marker where it does not. Each case runs both ways on a host with cgroup v2.
func TestSetsidProcessesDie(t *testing.T) {
	for _, mode := range []string{"cgroup", "marker"} {
		t.Run(mode, func(t *testing.T) {
			a := newAdapter(t)
			if mode == "marker" {
				a.track.cgroup = ""
			} else if a.track.cgroup == "" {
				t.Skip("no usable cgroup v2 hierarchy on this host")
			}
			ctx := context.Background()

			t.Run("command end", func(t *testing.T) {
				create(t, a, "sbx_end", nil)
				res, err := a.Exec(ctx, "sbx_end", api.ExecRequest{Command: escapee})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("Exec = %+v, %v", res, err)
				}
				waitGone(t, readPid(t, a, "sbx_end"), "after the command ended")
			})

			// The command goes on running, holding the instance, until Stop or
			// Delete; the file tells when the sleeper has been started.
			for _, end := range []string{"stop", "delete"} {
				t.Run(end, func(t *testing.T) {
					id := "sbx_" + end
					create(t, a, id, nil)
					done := make(chan error, 1)
					go func() {
						_, err := a.Exec(ctx, id, api.ExecRequest{Command: escapee + "; exec sleep 1000"})
						done <- err
					}()
					var pid int
					for i := 0; pid == 0; i++ {
						if data, err := a.ReadFile(ctx, id, "escaped.pid"); err == nil {
							pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
						} else if i > 2000 {
							t.Fatal("the command never wrote escaped.pid")
						} else {
							time.Sleep(5 * time.Millisecond)
						}
					}
					if end == "stop" {
						if err := a.Stop(ctx, id); err != nil {
							t.Fatal(err)
						}
						wantCode(t, <-done, api.CodeInvalidState)
					} else {
						if err := a.Delete(ctx, id); err != nil {
							t.Fatal(err)
						}
						wantCode(t, <-done, api.CodeNotFound)
					}
					waitGone(t, pid, "after "+end)
					if left := marked(a, id); len(left) > 0 {
						t.Fatalf("processes %v of %s are still running", left, id)
					}
				})
			}
		})
	}
}

// TestMarkerCannotBeOverridden: the sandbox's env and the call's cannot replace the
// marker, which would let a command hide its processes from Stop and Delete.
func TestMarkerCannotBeOverridden(t *testing.T) {
	a := newAdapter(t)
	create(t, a, "sbx_m", map[string]string{markerVar: "x"})
	res, err := a.Exec(context.Background(), "sbx_m", api.ExecRequest{Command: "echo $" + markerVar, Env: map[string]string{markerVar: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := a.track.key + ":sbx_m:"; !strings.HasPrefix(res.Stdout, want) {
		t.Fatalf("marker = %q, want %s...", res.Stdout, want)
	}
}

// cleanupCgroups removes the cgroups of a's sandboxes that a test left (it need not
// delete its sandboxes), so that test runs do not pile them up on the host.
func cleanupCgroups(a *Adapter) {
	if a.track.cgroup == "" {
		return
	}
	entries, _ := os.ReadDir(a.track.cgroup)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), a.track.key+"-") {
			killCgroup(filepath.Join(a.track.cgroup, e.Name()))
		}
	}
}

// shedder leaves a sleeper that sheds the marker (env -i) and the process group
// (setsid) but keeps working in the sandbox's directory, so only the sweep by
// working directory finds it.
const shedder = `env -i PATH=/usr/bin:/bin setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped.pid; exec sleep 1000' </dev/null >/dev/null 2>&1 &
while [ ! -e escaped.pid ]; do sleep 0.01; done`

// TestStopKillsByCwdUnderSymlinkedRoot: /proc/<pid>/cwd shows the resolved path, so
// the sweep by working directory must compare it with the resolved root; a root
// reached through a symlink must not let a sandbox's processes survive Stop.
func TestStopKillsByCwdUnderSymlinkedRoot(t *testing.T) {
	for _, mode := range []string{"plain", "symlink"} {
		t.Run(mode, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "root")
			if mode == "symlink" {
				if err := os.Mkdir(filepath.Join(base, "real"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("real", root); err != nil {
					t.Fatal(err)
				}
			}
			a, err := New(root)
			if err != nil {
				t.Fatal(err)
			}
			// Without a cgroup, which would find the sleeper anyway.
			a.track.cgroup = ""
			ctx := context.Background()
			create(t, a, "s1", nil)
			res, err := a.Exec(ctx, "s1", api.ExecRequest{Command: shedder})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Exec = %+v, %v", res, err)
			}
			pid := readPid(t, a, "s1")
			if err := a.Stop(ctx, "s1"); err != nil {
				t.Fatal(err)
			}
			waitGone(t, pid, "after stop")
		})
	}
}

// TestExitCleanupDoesNotHoldTheCommand: what runs after a command's end to kill what
// it left (a cgroup drain that may wait seconds, or many sweep rounds) must not hold
// the command's lock: Stop and Delete kill commands while holding the table of every
// command, and would stall every exec of every sandbox behind that clean-up.
func TestExitCleanupDoesNotHoldTheCommand(t *testing.T) {
	a := newAdapter(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	a.track.beforeKillExec = func() {
		close(entered)
		<-release
	}
	ctx := context.Background()
	create(t, a, "s1", nil)
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec(ctx, "s1", api.ExecRequest{Command: "true"})
		done <- err
	}()
	<-entered
	var p *proc
	a.procs.mu.Lock()
	for q := range a.procs.m["s1"] {
		p = q
	}
	a.procs.mu.Unlock()
	if p == nil {
		close(release)
		t.Fatal("the command is not in the table while its clean-up runs")
	}
	if !p.mu.TryLock() {
		close(release)
		<-done
		t.Fatal("the command's lock is held while what it left is being killed")
	}
	p.mu.Unlock()
	// So Stop goes through at once rather than after the clean-up.
	if err := a.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
}

// TestStopSparesOtherUsersInTree: the sweep by working directory kills only the
// daemon's own processes. Another user's process that works in the sandbox's
// directory (an operator's shell, say) is none of the sandbox's, and a daemon
// running as root could otherwise kill anything.
func TestStopSparesOtherUsersInTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv")
	}
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "s1", nil)
	// setpriv changes its user after the working directory is set; the directory
	// is root's, 0700, so the process could not enter it as nobody.
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "1000")
	cmd.Dir = a.fsDir("s1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	for i := 0; ; i++ {
		status, _ := os.ReadFile("/proc/" + pid + "/status")
		if bytes.Contains(status, []byte("\nUid:\t65534\t")) {
			break
		}
		if i > 2000 {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the process never became uid 65534")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.Stop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// A SIGKILL from Stop, once sent, decides how it ends, whether or not it has
	// taken effect yet; so the SIGTERM here tells a survivor from a victim.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the other user's process ended with %v, want killed by SIGTERM after Stop", cmd.ProcessState)
	}
}

// TestFailedExecGroupLeavesNoSandboxCgroup: when a command's own cgroup cannot be
// made (here a limit on descendants refuses it), the sandbox's cgroup made for it
// just before is not left behind empty.
func TestFailedExecGroupLeavesNoSandboxCgroup(t *testing.T) {
	parent := findCgroup("differently-devhost-test-" + randomSuffix())
	if parent == "" {
		t.Skip("no usable cgroup v2 hierarchy on this host")
	}
	t.Cleanup(func() { removeCgroup(parent) })
	if err := os.WriteFile(filepath.Join(parent, "cgroup.max.descendants"), []byte("1"), 0); err != nil {
		t.Skipf("cannot limit descendants: %v", err)
	}
	tr := &tracker{key: "k", cgroup: parent}
	if g := tr.newExecGroup("s1", "e1"); g != nil {
		g.started()
		t.Fatalf("made %s despite the limit", g.dir)
	}
	if _, err := os.Stat(tr.sandboxCgroup("s1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sandbox cgroup after a failed command cgroup: %v, want it gone", err)
	}
}

// TestDeletedSandboxCgroupsArePruned: a sandbox cgroup that outlived its sandbox (a
// Delete whose drain ran out of time leaves it) is removed by a later Delete and by
// the next daemon's New; an existing sandbox's cgroup is kept.
func TestDeletedSandboxCgroupsArePruned(t *testing.T) {
	a := newAdapter(t)
	if a.track.cgroup == "" {
		t.Skip("no usable cgroup v2 hierarchy on this host")
	}
	ctx := context.Background()
	create(t, a, "live", nil)
	create(t, a, "other", nil)
	leftover := func() string {
		dir := filepath.Join(a.track.sandboxCgroup("gone"), "e1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Dir(dir)
	}
	live := a.track.sandboxCgroup("live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"delete", "new"} {
		dir := leftover()
		if how == "delete" {
			if err := a.Delete(ctx, "other"); err != nil {
				t.Fatal(err)
			}
		} else if _, err := New(a.Root()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after %s: cgroup of a deleted sandbox: %v, want it gone", how, err)
		}
		if _, err := os.Stat(live); err != nil {
			t.Fatalf("after %s: cgroup of an existing sandbox: %v", how, err)
		}
	}
}
