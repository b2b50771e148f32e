package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDevDaemon runs the README's first command in a child process: it starts,
// prints its address and the admin token once, serves, and exits 0 on SIGTERM; a
// second start on the same data keeps the token and prints none.
func TestDevDaemon(t *testing.T) {
	dataDir := t.TempDir()
	for i, wantToken := range []bool{true, false} {
		cmd := exec.Command(binary, "--dev", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "DIFFERENTLY_DATABASE_URL=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReader(out)
		first, _ := lines.ReadString('\n')
		if strings.HasPrefix(first, "admin token") != wantToken {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("start %d: first line %q (stderr %s)", i, first, stderr.String())
		}
		line := first
		if wantToken {
			line, _ = lines.ReadString('\n')
		}
		m := servingLine.FindStringSubmatch(line)
		if m == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("start %d: no address in %q (stderr %s)", i, line, stderr.String())
		}
		token, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
		if err != nil {
			t.Fatal(err)
		}
		if wantToken && !strings.Contains(first, strings.TrimSpace(string(token))) {
			t.Errorf("printed token differs from the admin-token file")
		}
		if info, err := os.Stat(filepath.Join(dataDir, "admin-token")); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("admin-token mode: %v %v", info.Mode(), err)
		}
		req, _ := http.NewRequest("GET", m[1]+"/v1/admin/pools", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("start %d: GET pools: %v %v", i, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("start %d: exit after SIGTERM: %v; stderr %s", i, err, stderr.String())
		}
	}
}

func TestPreflightCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "db.sqlite")+"\npools:\n  - name: sim\n    adapter: fake\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "db.sqlite")+"\npools:\n  - name: lab\n    adapter: remote\n    maxConcurency: 3\n    config: {endpoint: 'http://127.0.0.1:1'}\n    credentials: {env: LAB_TOKEN}\n"), 0o600)
	missingCred := filepath.Join(dir, "cred.yaml")
	os.WriteFile(missingCred, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "db.sqlite")+"\npools:\n  - name: lab\n    adapter: remote\n    config: {endpoint: 'http://127.0.0.1:1'}\n    credentials: {env: LAB_TOKEN_UNSET}\n"), 0o600)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"good in dev", []string{"preflight", "--dev", "--config", good}, 0, "ok"},
		{"fake refused outside dev", []string{"preflight", "--config", good}, 1, "development mode"},
		{"unknown key named", []string{"preflight", "--config", bad}, 1, "maxConcurency"},
		{"missing credential named", []string{"preflight", "--config", missingCred}, 1, "LAB_TOKEN_UNSET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := runTool(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, want %d; output lacks %q:\n%s", code, tt.code, tt.want, out)
			}
		})
	}
}

func TestTokenCreateCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "db.sqlite")+"\n"), 0o600)
	out, code := runTool(t, nil, "token", "create", "--admin", "--config", cfg)
	if code != 0 || !strings.HasPrefix(out, "dly_") {
		t.Fatalf("token create: exit %d: %s", code, out)
	}
	if out, code := runTool(t, nil, "token", "create", "--config", cfg); code == 0 {
		t.Fatalf("token create without a scope succeeded: %s", out)
	}
	// The API's rules for organisation and project names hold here too, before any
	// secret is made.
	for _, args := range [][]string{
		{"--project", "ci", "--org", ""},
		{"--project", "bad\tname"},
		{"--project", strings.Repeat("p", 129)},
		{"--admin", "--org", "acme"},
		{"--admin", "--name", strings.Repeat("n", 256)},
	} {
		out, code := runTool(t, nil, append([]string{"token", "create", "--config", cfg}, args...)...)
		if code == 0 || strings.Contains(out, "dly_") ||
			!strings.Contains(out, "printable characters") && !strings.Contains(out, "organisation") && !strings.Contains(out, "255 bytes") {
			t.Errorf("token create %q: exit %d: %s", args, code, out)
		}
	}
	// Refused before the database is opened (and migrated).
	fresh := filepath.Join(dir, "fresh.yaml")
	os.WriteFile(fresh, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "fresh.sqlite")+"\n"), 0o600)
	if _, code := runTool(t, nil, "token", "create", "--config", fresh, "--project", "bad\tname"); code == 0 {
		t.Fatal("a bad project name was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "fresh.sqlite")); err == nil {
		t.Error("a refused token create opened the database")
	}
	if out, code := runTool(t, nil, "token", "create", "--config", cfg, "--project", "ci"); code != 0 || !strings.HasPrefix(out, "dly_") {
		t.Fatalf("token create --project ci: exit %d: %s", code, out)
	}
}

// The first SIGTERM starts a graceful stop that waits for a streamed exec in
// flight (the grace here is an hour); a second one ends the process at once.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	dataDir := t.TempDir()
	cmd := exec.Command(binary, "--dev", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--shutdown-grace", "1h")
	cmd.Env = append(os.Environ(), "DIFFERENTLY_DATABASE_URL=")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(out)
	var base string
	for base == "" {
		line, err := lines.ReadString('\n')
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no address printed: %v (stderr %s)", err, stderr.String())
		}
		if m := servingLine.FindStringSubmatch(line); m != nil {
			base = m[1]
		}
	}
	// exited is closed once the process is gone; exitErr is then Wait's answer.
	exited := make(chan struct{})
	var exitErr error
	go func() {
		_, _ = io.Copy(io.Discard, lines)
		exitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	token, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var sb struct{ ID, State string }
	decode := func(resp *http.Response) {
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil {
			t.Fatal(err)
		}
	}
	decode(call("POST", "/v1/sandboxes", `{"placement": {"allowedPools": ["devhost"]}}`))
	for sb.State != "running" {
		decode(call("GET", "/v1/sandboxes/"+sb.ID+"/wait?state=running", ""))
	}
	// The command says its PID so that the test can end it: the daemon dies too
	// abruptly here to end it itself.
	stream := call("POST", "/v1/sandboxes/"+sb.ID+"/exec?stream=1", `{"command": "echo started $$; exec sleep 600"}`)
	defer stream.Body.Close()
	var first struct{ Data string }
	if err := json.NewDecoder(stream.Body).Decode(&first); err != nil || !strings.HasPrefix(first.Data, "started ") {
		t.Fatalf("stream: %q %v", first.Data, err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(first.Data, "started "))); err == nil {
		defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	} else {
		t.Errorf("no PID in %q", first.Data)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	// The graceful stop has begun when the daemon says so.
	for {
		// The channel is taken before the buffer is read, so that a write in between
		// closes it rather than being missed.
		changed := stderr.changed()
		if strings.Contains(stderr.String(), "shutting down") {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the first SIGTERM ended the process (%v) while a stream was in flight", exitErr)
		case <-changed:
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if exitErr == nil {
			t.Error("the second signal's exit was a success")
		}
	case <-time.After(time.Minute):
		t.Fatal("a second SIGTERM did not end the process")
	}
}

// syncBuffer is a buffer written by a child's stderr copier and read by the test,
// with a channel that signals each write.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	wake chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// changed returns a channel closed at the next write.
func (b *syncBuffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

// A config file whose pool names a credentials variable off the operator's allowlist
// does not start, and says which variable and which setting, never the value.
func TestDaemonRefusesACredentialOffTheAllowlist(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "db.sqlite")+"\n"+
		"poolCredentials:\n  allowedEnv: [LAB_*]\npools:\n  - name: lab\n    adapter: remote\n"+
		"    config: {endpoint: 'http://127.0.0.1:1'}\n    credentials: {env: AWS_SECRET_ACCESS_KEY}\n"), 0o600)
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string {
		if k == "AWS_SECRET_ACCESS_KEY" {
			return "aws-secret-value"
		}
		return ""
	}
	code := runDaemon(t.Context(), []string{"--config", path, "--listen", "127.0.0.1:0"}, &stdout, &stderr, getenv)
	out := stdout.String() + stderr.String()
	if code != 1 || !strings.Contains(out, `pools[0].credentials.env: credentials.env "AWS_SECRET_ACCESS_KEY" is not among`) ||
		!strings.Contains(out, "poolCredentials.allowedEnv") || strings.Contains(out, "aws-secret-value") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// --version names the build, and the commit it came from when the build recorded
// one (a build inside the repository does).
func TestVersion(t *testing.T) {
	out, code := runTool(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "differently-server ") {
		t.Fatalf("exit %d: %q", code, out)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if rev := strings.TrimSpace(string(head)); !strings.Contains(out, "commit "+rev) {
			t.Errorf("%q does not name commit %s", out, rev)
		}
	}
}

// dataDir outside development mode is ignored with a warning, said before the start.
func TestDataDirOutsideDevWarns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("database:\n  url: sqlite://"+filepath.Join(dir, "db.sqlite")+"\ndataDir: /var/lib/differently\n"), 0o600)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // no need to serve: the warning comes first
	var stdout, stderr bytes.Buffer
	runDaemon(ctx, []string{"--config", path, "--listen", "127.0.0.1:0"}, &stdout, &stderr, func(string) string { return "" })
	if !strings.Contains(stderr.String(), "dataDir in the config file applies to --dev only") {
		t.Fatalf("no warning:\n%s", stderr.String())
	}
}
