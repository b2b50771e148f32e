package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/daemon"
)

// A streamed exec still running when the shutdown grace is over is not cut off
// mid-stream: it ends with a final event saying the daemon is stopping, which a
// client can tell from a broken backend, and Run returns cleanly.
func TestShutdownEndsLongStreamsWithAFinalEvent(t *testing.T) {
	dir := t.TempDir()
	d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: filepath.Join(dir, "data"),
		Listen: "127.0.0.1:0", Getenv: func(string) string { return "" },
		ShutdownGrace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "data", daemon.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{t: t, url: d.URL(), token: strings.TrimSpace(string(tok))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"devhost"}}}, 202, &sb)
	for sb.State != "running" {
		if sb.State == "failed" {
			t.Fatalf("sandbox failed: %s", sb.Reason)
		}
		r.call("GET", "/v1/sandboxes/"+sb.ID+"/wait?state=running", nil, 200, &sb)
	}

	body, _ := json.Marshal(api.ExecRequest{Command: "echo started; sleep 60"})
	resp := r.do("POST", "/v1/sandboxes/"+sb.ID+"/exec?stream=1", strings.NewReader(string(body)))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.Contains(lines.Text(), "started") {
		t.Fatalf("first event %q, %v", lines.Text(), lines.Err())
	}
	cancel() // the daemon is told to stop while the command runs
	var last api.ExecEvent
	for lines.Scan() {
		if err := json.Unmarshal(lines.Bytes(), &last); err != nil {
			t.Fatalf("event %q: %v", lines.Text(), err)
		}
	}
	if last.Code != api.CodeProviderUnavailable || !strings.Contains(last.Error, "shutting down") {
		t.Errorf("the stream ended with %+v, want a final event saying the daemon is shutting down", last)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
