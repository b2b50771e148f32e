package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/daemon/daemontest"
)

// binary is the differently command built once for these tests: they run the real
// command line in child processes against a real daemon.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "differently-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "differently")
	build := exec.Command("go", "build", "-race", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building differently:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// devDaemon is a development daemon (SQLite, the devhost and fake pools) serving on
// loopback for one test, in this process.
type devDaemon struct {
	url, token, dataDir string
	c                   *client.Client
}

func startDaemon(t *testing.T) *devDaemon {
	t.Helper()
	d := daemontest.Start(t, nil)
	return &devDaemon{url: d.URL, token: d.Token, dataDir: d.DataDir, c: d.Client}
}

// devPools names the pools the daemon has, read through the API rather than the
// command under test: dev mode adds local only where this host can run bwrap.
func (dd *devDaemon) devPools(t *testing.T) []string {
	t.Helper()
	pools, err := dd.c.ListPools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return names
}

// cli runs the binary with an environment of its own: a home, config and data folder
// of the test's, so that nothing of the machine's user leaks in.
type cli struct {
	t   *testing.T
	env []string
}

func (dd *devDaemon) cli(t *testing.T, extraEnv ...string) *cli {
	home := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"DIFFERENTLY_ENDPOINT=" + dd.url,
		"DIFFERENTLY_TOKEN=" + dd.token,
		// The race detector waits a second at every exit by default, for reports
		// of goroutines still running: the commands here are many and short.
		"GORACE=atexit_sleep_ms=0",
	}
	return &cli{t: t, env: append(env, extraEnv...)}
}

type result struct {
	stdout, stderr string
	code           int
}

func (c *cli) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = c.env
	return cmd
}

// run runs the binary to its end, with stdin as its input.
func (c *cli) runIn(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		c.t.Fatalf("differently %s: %v", strings.Join(args, " "), err)
	}
	return result{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn("", args...)
}

// ok runs the binary and fails the test unless it exits 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("differently %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// json runs the binary with -o json and decodes its output into v.
func (c *cli) json(v any, args ...string) {
	c.t.Helper()
	r := c.ok(append([]string{"-o", "json"}, args...)...)
	// Decoding into a value used before would keep the fields this answer leaves out.
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("differently %s -o json: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

// fails runs the binary and checks that it exits with code and says each of want
// on one line of stderr.
func (c *cli) fails(code int, want []string, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code {
		c.t.Errorf("differently %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	line := strings.TrimSpace(r.stderr)
	if strings.Count(line, "\n") > 0 {
		c.t.Errorf("differently %s: the error is not one line: %q", strings.Join(args, " "), r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			c.t.Errorf("differently %s: stderr %q does not say %q", strings.Join(args, " "), line, w)
		}
	}
	return r
}

// lines reads a child's output line by line onto a channel, for tests that act while
// the command runs.
func lines(t *testing.T, r io.Reader) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// await reads lines until one contains want, failing after the deadline.
func await(t *testing.T, ch <-chan string, want string, seen *[]string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("output ended without %q; saw %q", want, *seen)
			}
			*seen = append(*seen, l)
			if strings.Contains(l, want) {
				return
			}
		case <-deadline.C:
			t.Fatalf("no %q within 30s; saw %q", want, *seen)
		}
	}
}

// labelled returns the sandboxes carrying label, in every state.
func (dd *devDaemon) labelled(t *testing.T, label string) []client.Sandbox {
	t.Helper()
	l, err := dd.c.ListSandboxes(t.Context(), &client.ListSandboxesParams{Label: &[]string{label},
		State: &[]client.SandboxState{"queued", "provisioning", "running", "stopped", "paused", "terminating", "terminated", "failed"}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// slowPool registers a fake pool whose Creates take latency, for waits long enough to
// interrupt or to watch.
func (dd *devDaemon) slowPool(t *testing.T, name string, latency time.Duration) {
	t.Helper()
	_, err := dd.c.CreatePool(t.Context(), client.PoolSpec{Name: name, Adapter: "fake",
		Config: &map[string]any{"createLatencyMs": latency.Milliseconds()}})
	if err != nil {
		t.Fatal(err)
	}
}

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}
