package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/scheduler"
)

// replica is one running daemon and a client for its API.
type replica struct {
	t      *testing.T
	url    string
	token  string
	passes chan scheduler.Result
	stop   func()
}

// start runs a development daemon on dataDir (and on dbURL when set) on a loopback
// port until the returned replica is stopped.
func start(t *testing.T, dataDir, dbURL string) *replica {
	t.Helper()
	cfg := config.Default()
	cfg.Database.URL = dbURL
	return startConfig(t, dataDir, cfg)
}

// startConfig is start with a config file of the test's (its database url empty for
// the data directory's SQLite).
func startConfig(t *testing.T, dataDir string, cfg *config.Config, mods ...func(*daemon.Options)) *replica {
	t.Helper()
	r := &replica{t: t, passes: make(chan scheduler.Result, 64)}
	opts := daemon.Options{
		Dev:     true,
		DataDir: dataDir,
		Listen:  "127.0.0.1:0",
		Config:  cfg,
		Getenv:  func(string) string { return "" },
		OnSchedulerPass: func(res scheduler.Result) {
			select {
			case r.passes <- res:
			default: // a test that is not waiting must not block the scheduler
			}
		},
	}
	for _, m := range mods {
		m(&opts)
	}
	d, err := daemon.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r.url = d.URL()
	tok, err := os.ReadFile(filepath.Join(dataDir, daemon.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(tok))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var stopped bool
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon Run: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

// call sends a JSON request and decodes a JSON answer into out (when not nil),
// failing the test unless the status is want.
func (r *replica) call(method, path string, body any, want int, out any) {
	r.t.Helper()
	var rd io.Reader
	if b, ok := body.([]byte); ok {
		rd = bytes.NewReader(b)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	resp := r.do(method, path, rd)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		r.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			r.t.Fatalf("%s %s: decoding %q: %v", method, path, data, err)
		}
	}
}

func (r *replica) do(method, path string, body io.Reader) *http.Response {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, body)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

type sandbox struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	Pool         string `json:"pool"`
	Reason       string `json:"reason"`
	FromSnapshot string `json:"fromSnapshot"`
}

// waitState waits, pass by pass of the scheduler, until the sandbox is in state.
func (r *replica) waitState(id, state string) sandbox {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var sb sandbox
		r.call("GET", "/v1/sandboxes/"+id, nil, 200, &sb)
		if sb.State == state {
			return sb
		}
		if sb.State == "failed" {
			r.t.Fatalf("sandbox %s failed: %s", id, sb.Reason)
		}
		select {
		case <-r.passes:
		case <-deadline:
			r.t.Fatalf("sandbox %s is %s after 30 s, want %s (%s)", id, sb.State, state, sb.Reason)
		}
	}
}

func (r *replica) exec(id, command string) api.ExecResult {
	r.t.Helper()
	var res api.ExecResult
	r.call("POST", "/v1/sandboxes/"+id+"/exec", api.ExecRequest{Command: command}, 200, &res)
	return res
}

func TestEndToEndSQLite(t *testing.T) {
	walkthrough(t, "")
}

func TestEndToEndPostgres(t *testing.T) {
	walkthrough(t, pgtest.SchemaURL(t))
}

// walkthrough is the newcomer's tour of the README, through real HTTP: pools,
// a sandbox on devhost, exec plain and streamed, files, stop and start, snapshot and
// fork, delete, and a restart that finds everything as it was.
func walkthrough(t *testing.T, dbURL string) {
	dataDir := t.TempDir()
	r := start(t, dataDir, dbURL)

	var pools struct {
		Items []struct {
			Name    string `json:"name"`
			Healthy bool   `json:"healthy"`
		} `json:"items"`
	}
	r.call("GET", "/v1/admin/pools", nil, 200, &pools)
	// local joins them where bwrap runs, which CI makes sure of.
	names := make([]string, len(pools.Items))
	for i, p := range pools.Items {
		names[i] = p.Name
	}
	want := []string{"devhost", "fake", "local"}
	if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" && len(names) == 2 {
		want = want[:2]
	}
	if !slices.Equal(names, want) {
		t.Fatalf("pools: %+v, want %v", pools.Items, want)
	}
	for _, p := range pools.Items {
		if !p.Healthy {
			t.Errorf("pool %s is not healthy", p.Name)
		}
	}

	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{
		"placement": map[string]any{"allowedPools": []string{"devhost"}},
		"labels":    map[string]string{"team": "e2e"},
		"env":       map[string]string{"GREETING": "hello"},
	}, 202, &sb)
	// A start slot is free and nothing is queued: the replica that answers starts the
	// sandbox at once.
	if sb.State != "provisioning" {
		t.Fatalf("new sandbox is %s, want provisioning", sb.State)
	}
	sb = r.waitState(sb.ID, "running")
	if sb.Pool != "devhost" {
		t.Fatalf("placed on %s", sb.Pool)
	}

	if res := r.exec(sb.ID, `echo "$GREETING"`); res.ExitCode != 0 || res.Stdout != "hello\n" {
		t.Fatalf("exec: %+v", res)
	}
	events := r.stream(sb.ID, "echo one; echo two >&2; exit 3")
	final := events[len(events)-1]
	if final.ExitCode == nil || *final.ExitCode != 3 {
		t.Fatalf("stream final event: %+v", events)
	}

	r.call("PUT", "/v1/sandboxes/"+sb.ID+"/files/content?path=notes/a.txt", []byte("kept\n"), 204, nil)
	resp := r.do("GET", "/v1/sandboxes/"+sb.ID+"/files/content?path=notes/a.txt", nil)
	content, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(content) != "kept\n" {
		t.Fatalf("read file: %d %q", resp.StatusCode, content)
	}

	r.call("POST", "/v1/sandboxes/"+sb.ID+"/stop", nil, 200, &sb)
	if sb.State != "stopped" {
		t.Fatalf("after stop: %s", sb.State)
	}
	r.call("POST", "/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: "true"}, 409, nil)
	r.call("POST", "/v1/sandboxes/"+sb.ID+"/start", nil, 200, &sb)
	if sb.State != "running" {
		t.Fatalf("after start: %s", sb.State)
	}

	var snap struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	r.call("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", map[string]string{"kind": "disk"}, 201, &snap)
	var fork sandbox
	r.call("POST", "/v1/sandboxes/"+sb.ID+"/fork", map[string]any{}, 202, &fork)
	fork = r.waitState(fork.ID, "running")
	if res := r.exec(fork.ID, "cat notes/a.txt"); res.Stdout != "kept\n" {
		t.Fatalf("fork does not hold the source's file: %+v", res)
	}

	r.call("DELETE", "/v1/sandboxes/"+sb.ID, nil, 202, nil)
	r.waitState(sb.ID, "terminated")
	r.call("DELETE", "/v1/sandboxes/"+sb.ID, nil, 202, nil) // idempotent

	// Restart on the same data: pools, sandboxes and the token are all still there.
	r.stop()
	r2 := start(t, dataDir, dbURL)
	if r2.token != r.token {
		t.Fatal("restart replaced the admin token")
	}
	r2.call("GET", "/v1/admin/pools", nil, 200, &pools)
	if len(pools.Items) != len(want) {
		t.Fatalf("pools after restart: %+v", pools.Items)
	}
	var gone, forked sandbox
	r2.call("GET", "/v1/sandboxes/"+sb.ID, nil, 200, &gone)
	r2.call("GET", "/v1/sandboxes/"+fork.ID, nil, 200, &forked)
	if gone.State != "terminated" || forked.State != "running" {
		t.Fatalf("after restart: %s is %s, %s is %s", sb.ID, gone.State, fork.ID, forked.State)
	}
	if res := r2.exec(fork.ID, "cat notes/a.txt"); res.Stdout != "kept\n" {
		t.Fatalf("exec after restart: %+v", res)
	}
	r2.call("DELETE", "/v1/sandboxes/"+fork.ID, nil, 202, nil)
	r2.waitState(fork.ID, "terminated")
}

// stream runs a streamed exec and returns every event, checking that exactly the
// last one is final.
func (r *replica) stream(id, command string) []api.ExecEvent {
	r.t.Helper()
	body, _ := json.Marshal(api.ExecRequest{Command: command})
	resp := r.do("POST", "/v1/sandboxes/"+id+"/exec?stream=1", bytes.NewReader(body))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		data, _ := io.ReadAll(resp.Body)
		r.t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var events []api.ExecEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			r.t.Fatalf("stream line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
	}
	var stdout, stderr strings.Builder
	for i, ev := range events {
		if ev.IsFinal() != (i == len(events)-1) {
			r.t.Fatalf("final event not exactly last: %s", fmt.Sprint(events))
		}
		switch ev.Stream {
		case api.StreamStdout:
			stdout.WriteString(ev.Data)
		case api.StreamStderr:
			stderr.WriteString(ev.Data)
		}
	}
	if stdout.String() != "one\n" || stderr.String() != "two\n" {
		r.t.Fatalf("stream output %q %q", stdout.String(), stderr.String())
	}
	return events
}
