package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// onTerminal runs the binary with a pseudo-terminal as its stdin, stdout and stderr,
// as in a person's shell, and returns all it wrote there and its exit code.
func (c *cli) onTerminal(extraEnv []string, args ...string) (string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append([]string{}, c.env...), extraEnv...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		c.t.Fatal(err)
	}
	defer tty.Close()
	var out bytes.Buffer
	// The terminal's side gives EIO once the child and every copy of its side are
	// gone: that is the end of the output.
	_, err = io.Copy(&out, tty)
	if err != nil && !errors.Is(err, syscall.EIO) {
		c.t.Fatal(err)
	}
	_ = cmd.Wait()
	return out.String(), cmd.ProcessState.ExitCode()
}

// On a terminal: tables in colour with a bold header, a spinner on the wait, errors
// with a red mark; none of it with NO_COLOR (but the spinner), and none of it piped.
func TestTerminal(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t, "TERM=xterm-256color", "NO_COLOR=")
	dd.slowPool(t, "slow", 500*time.Millisecond)

	out, code := c.onTerminal(nil, "create", "--pool", "slow", "--wait")
	if code != 0 {
		t.Fatalf("create --wait on a terminal: exit %d\n%q", code, out)
	}
	for _, want := range []string{
		"⠋\x1b[0m waiting for sandbox", // the spinner's first frame, painted
		"\r\x1b[K",                     // and its line cleared at the end
		"\x1b[01mID\x1b[0m",            // a bold header
		"\x1b[32mrunning\x1b[0m",       // the state in green
	} {
		if !strings.Contains(out, want) {
			t.Errorf("create --wait on a terminal does not show %q:\n%q", want, out)
		}
	}
	// The columns line up although escapes surround every cell.
	rows := strings.Split(strings.TrimSpace(stripANSI(out[strings.Index(out, "\x1b[01mID"):])), "\r\n")
	if len(rows) != 2 || strings.Index(rows[0], "STATE") != strings.Index(rows[1], "running") {
		t.Errorf("the table is not aligned:\n%s", strings.Join(rows, "\n"))
	}

	out, code = c.onTerminal([]string{"NO_COLOR=1"}, "create", "--pool", "slow", "--wait")
	if code != 0 || strings.Contains(out, "\x1b[3") || strings.Contains(out, "\x1b[01m") || !strings.Contains(out, "⠋ waiting for sandbox") {
		t.Errorf("NO_COLOR: exit %d, colours, or no spinner:\n%q", code, out)
	}

	out, code = c.onTerminal(nil, "get", "sbx_missing")
	if code != exitNotFound || !strings.Contains(out, "\x1b[31merror:\x1b[0m 404 not_found") {
		t.Errorf("an error on a terminal: exit %d\n%q", code, out)
	}

	// Piped: the wait said once, on stderr, and no escape anywhere.
	r := c.run("create", "--pool", "slow", "--wait")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, "\x1b") || strings.Contains(r.stderr, "⠋") ||
		!strings.HasPrefix(r.stderr, "waiting for sandbox") || !strings.HasPrefix(r.stdout, "ID ") {
		t.Errorf("create --wait piped: %+v", r)
	}
}

// stripANSI removes the escape sequences of colours and line clearing.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
