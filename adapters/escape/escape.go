// Package escape is a table of escape attempts: commands a sandbox runs to reach
// what it must not (the daemon's token, data folder, environment and process,
// another sandbox's files, the network, the kernel's settings and the host's
// devices, processes that outlive the sandbox, more processes or memory than it
// was given). It runs against any adapter that runs
// real commands; each check says what leaked, so a test can assert that an
// isolating adapter (package local) leaks nothing and document what one that does
// not isolate (package devhost) exposes.
package escape

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// Host is what the checks plant and look at on the daemon's side.
type Host struct {
	// Adapter runs the sandboxes. Each check creates its own and deletes them.
	Adapter adapters.ExecutionAdapter
	// DataDir stands for the daemon's data folder: the checks plant an admin token
	// file and a database file in it. The adapter's root is usually inside it.
	DataDir string
	// Root is the adapter's own directory (sandbox records live there).
	Root string
	// PidsMax is the process limit the adapter was configured with; the fork bomb
	// tries twice as many.
	PidsMax int
	// MemoryMiB is asked for in the memory check's sandbox, which then tries to
	// use four times as much.
	MemoryMiB int64
	// Installation labels the sandboxes; any non-empty value.
	Installation string
}

// Check is one escape attempt. Run returns what leaked ("" when the sandbox was
// contained), or an error when the attempt itself could not be made.
type Check struct {
	Name string
	Run  func(ctx context.Context, h Host) (leak string, err error)
}

// Checks returns every check.
func Checks() []Check {
	return []Check{
		{"read-admin-token", readToken},
		{"write-database", writeDatabase},
		{"read-own-record", readOwnRecord},
		{"read-daemon-environment", readDaemonEnv},
		{"signal-daemon", signalDaemon},
		{"read-other-sandbox", readOtherSandbox},
		{"reach-host-network", reachNetwork},
		{"write-host-sysctl", writeSysctl},
		{"own-host-device", ownDevice},
		{"outlive-delete", outliveDelete},
		{"fork-bomb", forkBomb},
		{"exceed-memory", exceedMemory},
	}
}

func secret() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "escape-secret-" + hex.EncodeToString(b[:])
}

func (h Host) sandbox(ctx context.Context, r adapters.Resources) (string, func(), error) {
	id := "esc-" + secret()[len("escape-secret-"):]
	inst, err := h.Adapter.Create(ctx, adapters.CreateRequest{ID: id, Installation: h.Installation, Resources: r})
	if err != nil {
		return "", nil, fmt.Errorf("create sandbox: %w", err)
	}
	return inst.Ref, func() { _ = h.Adapter.Delete(context.WithoutCancel(ctx), inst.Ref) }, nil
}

func (h Host) run(ctx context.Context, ref, script string) (api.ExecResult, error) {
	res, err := h.Adapter.Exec(ctx, ref, api.ExecRequest{Command: script, TimeoutSeconds: 60})
	if err != nil {
		return res, fmt.Errorf("exec: %w", err)
	}
	return res, nil
}

// inSandbox runs script in a fresh sandbox.
func (h Host) inSandbox(ctx context.Context, script string) (api.ExecResult, error) {
	ref, done, err := h.sandbox(ctx, adapters.Resources{})
	if err != nil {
		return api.ExecResult{}, err
	}
	defer done()
	return h.run(ctx, ref, script)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func readToken(ctx context.Context, h Host) (string, error) {
	token := secret()
	path := filepath.Join(h.DataDir, "admin-token")
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		return "", err
	}
	res, err := h.inSandbox(ctx, "cat "+quote(path))
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, token) {
		return "read the admin token file " + path, nil
	}
	return "", nil
}

func writeDatabase(ctx context.Context, h Host) (string, error) {
	path := filepath.Join(h.DataDir, "differently.db")
	if err := os.WriteFile(path, []byte("db"), 0o600); err != nil {
		return "", err
	}
	if _, err := h.inSandbox(ctx, "echo tampered >> "+quote(path)); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if string(b) != "db" {
		return "wrote the database file " + path, nil
	}
	return "", nil
}

// readOwnRecord looks for the sandbox's own record in the adapter's root: it
// holds the environment the sandbox was created with, and is the daemon's.
func readOwnRecord(ctx context.Context, h Host) (string, error) {
	res, err := h.inSandbox(ctx, "ls "+quote(filepath.Join(h.Root, "sandboxes"))+"/*/meta.json")
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, "meta.json") {
		return "listed the adapter's sandbox records in " + h.Root, nil
	}
	return "", nil
}

func readDaemonEnv(ctx context.Context, h Host) (string, error) {
	own, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(own)
	res, err := h.inSandbox(ctx, fmt.Sprintf("sha256sum < /proc/%d/environ", os.Getpid()))
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, hex.EncodeToString(sum[:])) {
		return fmt.Sprintf("read the daemon's environment (/proc/%d/environ)", os.Getpid()), nil
	}
	return "", nil
}

// signalDaemon asks, with signal 0, whether the sandbox may signal the daemon's
// process. Signal 0 delivers nothing; a real signal would stop this test.
func signalDaemon(ctx context.Context, h Host) (string, error) {
	res, err := h.inSandbox(ctx, fmt.Sprintf("kill -0 %d && echo signalled", os.Getpid()))
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, "signalled") {
		return fmt.Sprintf("may signal the daemon (pid %d)", os.Getpid()), nil
	}
	return "", nil
}

func readOtherSandbox(ctx context.Context, h Host) (string, error) {
	other, done, err := h.sandbox(ctx, adapters.Resources{})
	if err != nil {
		return "", err
	}
	defer done()
	token := secret()
	res, err := h.run(ctx, other, "printf %s "+token+" > secret && pwd")
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("write the other sandbox's file: exit %d: %s", res.ExitCode, res.Stderr)
	}
	path := filepath.Join(strings.TrimSpace(res.Stdout), "secret")
	res, err = h.inSandbox(ctx, "cat "+quote(path))
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, token) {
		return "read another sandbox's file " + path, nil
	}
	return "", nil
}

// writeSysctl asks whether the sandbox may write kernel.core_pattern, whose
// value the kernel runs as host root when a process dumps core. Nothing is written.
func writeSysctl(ctx context.Context, h Host) (string, error) {
	res, err := h.inSandbox(ctx, "test -w /proc/sys/kernel/core_pattern && echo writable")
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, "writable") {
		return "may write /proc/sys/kernel/core_pattern", nil
	}
	return "", nil
}

// ownDevice asks whether the sandbox owns the host's /dev/null, and so may change
// its mode for everyone on the host. Nothing is changed.
func ownDevice(ctx context.Context, h Host) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/null", &st); err != nil {
		return "", err
	}
	res, err := h.inSandbox(ctx, "test -O /dev/null && stat -Lc %d:%i /dev/null")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(res.Stdout) == fmt.Sprintf("%d:%d", st.Dev, st.Ino) {
		return "owns the host's /dev/null", nil
	}
	return "", nil
}

func reachNetwork(ctx context.Context, h Host) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res, err := h.inSandbox(ctx, fmt.Sprintf("command -v bash >/dev/null || exit 99; bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' 2>/dev/null && echo connected", port))
	if err != nil {
		return "", err
	}
	if res.ExitCode == 99 {
		return "", errors.New("the sandbox has no bash to try with")
	}
	if strings.Contains(res.Stdout, "connected") {
		return fmt.Sprintf("connected to the host's 127.0.0.1:%d", port), nil
	}
	return "", nil
}

// outliveDelete leaves a process behind the way an attacker would: double fork,
// new session, no environment, out of the sandbox's directory. It must be gone
// once Delete returns (within a short bound, for the kernel to reap it).
func outliveDelete(ctx context.Context, h Host) (string, error) {
	ref, done, err := h.sandbox(ctx, adapters.Resources{})
	if err != nil {
		return "", err
	}
	defer done()
	// A unique sleep length marks the process on the host's /proc.
	mark := strconv.Itoa(100000+int(time.Now().UnixNano()%800000)) + ".5"
	script := fmt.Sprintf("(cd / && env -i setsid sh -c 'sleep %s' </dev/null >/dev/null 2>&1 &) ; echo started", mark)
	res, err := h.run(ctx, ref, script)
	if err != nil {
		return "", err
	}
	if !strings.Contains(res.Stdout, "started") {
		return "", fmt.Errorf("leave a process: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err := h.Adapter.Delete(ctx, ref); err != nil {
		return "", err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := findProcess("sleep\x00" + mark + "\x00")
		if len(pids) == 0 {
			return "", nil
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill() // not to leave it behind this test
				}
			}
			return fmt.Sprintf("a setsid child (pid %d) outlived Delete", pids[0]), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findProcess lists the host processes whose command line is cmdline.
func findProcess(cmdline string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == cmdline {
			out = append(out, pid)
		}
	}
	return out
}

func forkBomb(ctx context.Context, h Host) (string, error) {
	n := 2 * h.PidsMax
	// Each started sleep prints a line; a shell that cannot fork stops there.
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 30 & echo forked; i=$((i+1)); done 2>/dev/null; kill $(jobs -p) 2>/dev/null; true", n)
	res, err := h.inSandbox(ctx, script)
	if err != nil {
		return "", err
	}
	got := strings.Count(res.Stdout, "forked")
	switch {
	case got == 0:
		return "", fmt.Errorf("the sandbox started no process: exit %d: %s", res.ExitCode, res.Stderr)
	case got >= n:
		return fmt.Sprintf("ran %d processes at once; the limit is %d", got, h.PidsMax), nil
	}
	return "", nil
}

func exceedMemory(ctx context.Context, h Host) (string, error) {
	ref, done, err := h.sandbox(ctx, adapters.Resources{MemoryMiB: h.MemoryMiB})
	if err != nil {
		return "", err
	}
	defer done()
	want := 4 * h.MemoryMiB << 20
	// awk doubles a string until it holds four times the limit.
	script := fmt.Sprintf(`awk 'BEGIN { s = "x"; while (length(s) < %d) s = s s; print "held", length(s) }'`, want)
	res, err := h.run(ctx, ref, script)
	if err != nil {
		return "", err
	}
	if strings.Contains(res.Stdout, "held") {
		return fmt.Sprintf("held %d MiB with a limit of %d MiB", want>>20, h.MemoryMiB), nil
	}
	if res.ExitCode == 0 || res.ExitCode == 127 {
		return "", fmt.Errorf("awk did not run out of memory: exit %d: %s", res.ExitCode, res.Stderr)
	}
	return "", nil
}
