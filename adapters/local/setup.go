package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/devhost"
)

// newJail finds bwrap and the host's cgroups. The parts that depend on the root
// directory are set by setup, once devhost has resolved it.
func newJail(c Config) (*jail, error) {
	if runtime.GOOS != "linux" {
		return nil, adapters.Unavailable("local: sandboxes need Linux namespaces; this host runs %s", runtime.GOOS)
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, adapters.Unavailable("local: %v", errNoBwrap)
	}
	help, _ := exec.Command(bwrap, "--help").CombinedOutput()
	return &jail{bwrap: bwrap, cg: probeCgroups(), pidsMax: c.PidsMax, acceptUnenforced: c.IgnoreResources,
		// bwrap 0.8 and later; older ones (Ubuntu 22.04 has 0.6) still isolate.
		disableUserns: bytes.Contains(help, []byte("--disable-userns")),
		privateDev:    os.Geteuid() == 0}, nil
}

// probeWait bounds the probe command; bwrap starts in milliseconds.
const probeWait = 30 * time.Second

// setup finishes the jail and proves it: a command run through it exactly as a
// sandbox's would be must succeed. A host without unprivileged user namespaces,
// or a container that forbids mounting /proc, fails here rather than on every exec.
func (a *Adapter) setup(ctx context.Context) error {
	root := a.Root()
	a.jail.key = keyOf(root)
	a.jail.etc = filepath.Join(root, "etc")
	if a.jail.egress != nil {
		a.jail.sockets = filepath.Join(root, "egress")
		if err := os.MkdirAll(a.jail.sockets, 0o700); err != nil {
			return adapters.Unavailable("local: %v", err)
		}
	}
	if err := writeEtc(a.jail.etc); err != nil {
		return adapters.Unavailable("local: write %s: %v", a.jail.etc, err)
	}
	a.jail.prune(func(id string) bool {
		dir := a.SandboxDir(id)
		return dir != "" && exists(filepath.Dir(dir))
	})
	err := a.probe(ctx)
	if err != nil && a.jail.privateDev {
		// Device nodes may not work where the root lies (a nodev mount), or
		// cannot be made (no CAP_MKNOD): the host's are better than none.
		a.jail.privateDev = false
		if err = a.probe(ctx); err == nil {
			a.jail.devNote = "Sandboxes see the host's device nodes (no private ones could be made or used under the root), and could change their modes."
		}
	}
	return err
}

// probe runs a command through the jail as a sandbox's would run.
func (a *Adapter) probe(ctx context.Context) error {
	root := a.Root()

	var b [6]byte
	_, _ = rand.Read(b[:])
	id := "probe-" + hex.EncodeToString(b[:])
	dir := filepath.Join(root, "probe", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return adapters.Unavailable("local: %v", err)
	}
	defer os.RemoveAll(filepath.Dir(dir))
	defer a.jail.Remove(id)
	defer a.jail.Kill(id)

	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var out bytes.Buffer
	cmd := &exec.Cmd{
		Path: "/bin/sh", Args: []string{"/bin/sh", "-c", "test -w . && ! test -e " + root + "/sandboxes && : > /dev/null && head -c 1 /dev/urandom > /dev/null"},
		Dir: dir, Env: []string{"PATH=" + sandboxPATH, "HOME=" + dir},
		Stdout: &out, Stderr: &out,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		// The output is copied from a pipe, which a process of the namespace that
		// outlived bwrap could hold open: Wait must not wait on it for ever.
		WaitDelay: time.Second,
	}
	started, exited, err := a.jail.Wrap(devhost.JailSandbox{ID: id, Dir: dir}, cmd)
	if err != nil {
		return adapters.Unavailable("local: bwrap probe: %v", err)
	}
	err = cmd.Start()
	if serr := started(err); err != nil {
		return adapters.Unavailable("local: bwrap probe: %v", err)
	} else if serr != nil {
		_ = cmd.Process.Kill()
		a.jail.Kill(id)
		_ = cmd.Wait()
		if exited != nil {
			exited()
		}
		return adapters.Unavailable("local: bwrap probe: %v", serr)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if exited != nil {
			exited()
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return adapters.Unavailable("local: bwrap probe: %v", ctx.Err())
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if a.jail.egress != nil {
				return adapters.Unavailable("local: bwrap cannot run sandboxes on this host, or %s cannot be their egress bridge "+
					"(a program serving pools with egress: allowlist must call local.RunBridge first in main) (%v): %s",
					a.jail.bridge, err, bytes.TrimSpace(out.Bytes()))
			}
			return adapters.Unavailable("local: bwrap cannot run sandboxes on this host (%v): %s", err, bytes.TrimSpace(out.Bytes()))
		}
		return adapters.Unavailable("local: bwrap probe: %v", err)
	}
	return nil
}
