package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
)

// exec prints each line as the command writes it, stdout and stderr apart, and exits
// with the command's code; a command killed by --timeout exits 124.
func TestExecStreams(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)
	var sb client.Sandbox
	c.json(&sb, "create", "--pool", "devhost", "--template", "devhost", "--wait")

	// The command waits for a file that the test makes only once it has read the first
	// line: the line must have come while the command was still running.
	cmd := c.command("exec", sb.Id, "echo first; echo oops >&2; while [ ! -e go ]; do sleep 0.05; done; echo second; exit 7")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	out := lines(t, stdout)
	var seen []string
	await(t, out, "first", &seen)
	c.ok("exec", sb.Id, "touch go")
	await(t, out, "second", &seen)
	for range out {
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("exec exited %d (%v), want the command's 7; stderr %s", code, err, stderr.String())
	}
	if strings.Join(seen, "\n") != "first\nsecond" {
		t.Errorf("stdout: %q", seen)
	}
	if stderr.String() != "oops\n" {
		t.Errorf("stderr: %q", stderr.String())
	}

	// Ctrl-C during the command: 130.
	long := c.command("exec", sb.Id, "echo ready; while :; do sleep 0.05; done")
	longOut, err := long.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = long.Process.Kill() })
	out = lines(t, longOut)
	await(t, out, "ready", &seen)
	if err := long.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range out {
	}
	_ = long.Wait()
	if code := long.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exec exited %d after Ctrl-C, want 130", code)
	}

	if r := c.run("exec", "--timeout", "1s", sb.Id, "sleep 30"); r.code != 124 {
		t.Errorf("exec --timeout: exit %d, want 124; stderr %s", r.code, r.stderr)
	}
	if r := c.runIn("to the command", "exec", "-i", sb.Id, "cat"); r.stdout != "to the command" || r.code != 0 {
		t.Errorf("exec -i: %+v", r)
	}
	if r := c.run("exec", sb.Id, "sh", "-c", "exit 3"); r.code != 3 {
		t.Errorf("exec of argv: exit %d, want 3", r.code)
	}
	// differently's own failures are 125, apart from any command's.
	c.fails(execFailed, []string{"not_found"}, "exec", "sbx_missing", "true")
	c.fails(exitUsage, []string{"no command"}, "exec", sb.Id)
}

// run creates, runs and deletes: its exit code is the command's, and a Ctrl-C, during
// the wait for the sandbox or during the command, leaves no sandbox behind.
func TestRun(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)

	r := c.run("run", "-l", "run=plain", "--", "sh", "-c", "echo hello; echo apart >&2; exit 4")
	if r.code != 4 || r.stdout != "hello\n" || !strings.Contains(r.stderr, "apart\n") {
		t.Errorf("run: %+v", r)
	}
	for _, sb := range dd.labelled(t, "run=plain") {
		if sb.State != client.Terminated {
			t.Errorf("run left %s %s", sb.Id, sb.State)
		}
	}

	dd.slowPool(t, "slow", 2*time.Second)
	// A wait that runs out is its own exit code.
	c.fails(exitTimeout, []string{"waiting for sandbox", "deadline exceeded", "--wait-timeout"},
		"-q", "create", "--pool", "slow", "--wait", "--wait-timeout", "1s")
	tests := []struct {
		name, label string
		args        []string
		stream      string // where the line to interrupt on shows
		line        string
	}{
		{"during the wait", "run=wait", []string{"--pool", "slow", "--", "echo", "never"}, "stderr", "waiting for sandbox"},
		{"during the command", "run=exec", []string{"--", "sh", "-c", "echo started; while :; do sleep 0.05; done"}, "stdout", "started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := c.command(append([]string{"run", "-l", tt.label}, tt.args...)...)
			pipe := cmd.StdoutPipe
			if tt.stream == "stderr" {
				pipe = cmd.StderrPipe
			}
			rd, err := pipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			out := lines(t, rd)
			var seen []string
			await(t, out, tt.line, &seen)
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			for l := range out {
				seen = append(seen, l)
			}
			_ = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Errorf("run exited %d after Ctrl-C, want 130; %s: %q", code, tt.stream, seen)
			}
			left := dd.labelled(t, tt.label)
			if len(left) != 1 {
				t.Errorf("run made %d sandboxes: %+v", len(left), left)
			}
			for _, sb := range left {
				if sb.State != client.Terminated {
					t.Errorf("run left %s %s after Ctrl-C", sb.Id, sb.State)
				}
			}
		})
	}
}
