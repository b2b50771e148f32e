package client_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoClientExample builds examples/go-client and runs it against a real daemon, so
// the example cannot rot.
func TestGoClientExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dd := startDaemon(t)
	bin := filepath.Join(t.TempDir(), "go-client")
	build := exec.Command("go", "build", "-o", bin, "./examples/go-client")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Without the environment it says what is missing and fails.
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = cleanEnv()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "DIFFERENTLY_ENDPOINT") {
		t.Fatalf("without env: %v, stderr %q", err, stderr.String())
	}

	var stdout bytes.Buffer
	stderr.Reset()
	cmd = exec.CommandContext(ctx, bin, "-pool", "devhost")
	cmd.Env = append(cleanEnv(), "DIFFERENTLY_ENDPOINT="+dd.url, "DIFFERENTLY_TOKEN="+dd.token)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go-client: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(stderr.String(), "done\n") {
		t.Errorf("stderr lacks the command's stderr:\n%s", stderr.String())
	}
	for _, want := range []string{"tick 1\ntick 2\ntick 3\n", "exit code 0",
		"hello.txt: hello from go-client", "terminated sbx"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr.String(), dd.token) {
		t.Error("the example printed the token")
	}
}

// cleanEnv is the test's environment without any DIFFERENTLY_ variable, so the
// developer's own settings cannot leak into the run.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIFFERENTLY_") {
			env = append(env, kv)
		}
	}
	return env
}
