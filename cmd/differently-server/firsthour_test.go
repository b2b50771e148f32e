package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// --help names every flag the daemon takes, in the --name form of the docs.
func TestHelpListsEveryDaemonFlag(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"--dev", "--help"}} {
		var out bytes.Buffer
		if code := run(context.Background(), args, &out, &out, func(string) string { return "" }); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, out.String())
		}
		newDaemonFlags().fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(out.String(), "--"+f.Name+" ") {
				t.Errorf("%q does not list --%s:\n%s", args, f.Name, out.String())
			}
		})
	}
}

// A daemon that cannot listen says so before it creates its data folder, its
// database or an admin token.
func TestDaemonFailsOnListenBeforeWriting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	for _, tc := range []struct{ listen, want string }{
		{busy.Addr().String(), "address already in use"},
		// A port alone is the loopback address's, so this is the same busy address.
		{busyPort, "address already in use"},
		{"localhost", `listen address "localhost" needs host:port, e.g. 127.0.0.1:8700`},
	} {
		dataDir := filepath.Join(t.TempDir(), "data")
		cmd := exec.CommandContext(t.Context(), binary, "--dev", "--data-dir", dataDir, "--listen", tc.listen)
		cmd.Env = append(os.Environ(), "DIFFERENTLY_DATABASE_URL=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
			t.Fatalf("--listen %s: %v, want exit 1; stderr %s", tc.listen, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("--listen %s: stderr does not say %q:\n%s", tc.listen, tc.want, stderr.String())
		}
		if stdout.Len() > 0 {
			t.Errorf("--listen %s: printed %q", tc.listen, stdout.String())
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--listen %s: the data folder was created (%v)", tc.listen, err)
		}
	}
}

// devDaemon is a development daemon in a child process.
type devDaemon struct {
	cmd    *exec.Cmd
	stdout []string // the lines up to the admin token file's
	stderr *bytes.Buffer
}

// startDev starts a development daemon on dataDir and reads its output up to the
// line naming the admin token file, the last it prints on start.
func startDev(t *testing.T, dataDir string) *devDaemon {
	t.Helper()
	cmd := exec.Command(binary, "--dev", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DIFFERENTLY_DATABASE_URL=")
	d := &devDaemon{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = d.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewReader(out)
	for {
		line, err := lines.ReadString('\n')
		if line != "" {
			d.stdout = append(d.stdout, strings.TrimSuffix(line, "\n"))
		}
		if strings.HasPrefix(line, "admin token file:") {
			go func() { _, _ = io.Copy(io.Discard, lines) }()
			return d
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("daemon printed %q and no admin token file; stderr %s", d.stdout, d.stderr.String())
		}
	}
}

// Every development start says where the admin token is, also when it prints no new
// token; a second daemon on the same data folder is refused with the first one's
// PID; a SIGKILLed daemon leaves no lock behind.
func TestDevDaemonTokenFileAndDataDirLock(t *testing.T) {
	dataDir := t.TempDir()
	tokenFile := filepath.Join(dataDir, "admin-token")
	first := startDev(t, dataDir)
	if last := first.stdout[len(first.stdout)-1]; last != "admin token file: "+tokenFile {
		t.Errorf("first start's last line %q does not name %s", last, tokenFile)
	}

	second := exec.CommandContext(t.Context(), binary, "--dev", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	second.Env = append(os.Environ(), "DIFFERENTLY_DATABASE_URL=")
	out, err := second.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("second daemon on the same data folder: %v, want exit 1; output %s", err, out)
	}
	for _, want := range []string{"in use", "pid " + strconv.Itoa(first.cmd.Process.Pid), "--data-dir", "PostgreSQL"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second daemon's refusal does not say %q: %s", want, out)
		}
	}
	if strings.Contains(string(out), "admin token") || strings.Contains(string(out), "listening") {
		t.Errorf("the refused daemon got as far as %s", out)
	}

	// SIGKILL: the lock goes with the process.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	third := startDev(t, dataDir)
	if len(third.stdout) != 2 || !strings.HasPrefix(third.stdout[0], "differently-server listening on ") ||
		third.stdout[1] != "admin token file: "+tokenFile {
		t.Errorf("restart printed %q, want the address and the admin token file", third.stdout)
	}
	_ = third.cmd.Process.Signal(syscall.SIGTERM)
	if err := third.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v; stderr %s", err, third.stderr.String())
	}
}
