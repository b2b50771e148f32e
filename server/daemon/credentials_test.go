package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
)

// The operator's allowlist end to end, on a daemon whose environment holds a secret
// off the list: the API refuses a pool naming it, and a pool created before the list
// was set is not built. The secret's value is in no answer and no log line, and the
// daemon never even reads it once the list is set.
func TestCredentialsAllowlistEndToEnd(t *testing.T) {
	const secret = "aws-secret-value-never-shown"
	dataDir := t.TempDir()
	var mu sync.Mutex
	var read []string
	getenv := func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		read = append(read, k)
		if k == "AWS_SECRET_ACCESS_KEY" {
			return secret
		}
		return ""
	}
	run := func(file string, logs io.Writer, fn func(call func(method, path string, body any) (int, string))) {
		t.Helper()
		cfg, err := config.Parse([]byte(file))
		if err != nil {
			t.Fatal(err)
		}
		d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: dataDir, Listen: "127.0.0.1:0", Config: cfg,
			Getenv: getenv, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon Run: %v", err)
			}
		}()
		tok, err := os.ReadFile(filepath.Join(dataDir, daemon.AdminTokenFile))
		if err != nil {
			t.Fatal(err)
		}
		fn(func(method, path string, body any) (int, string) {
			t.Helper()
			raw, _ := json.Marshal(body)
			req, _ := http.NewRequest(method, d.URL()+path, bytes.NewReader(raw))
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if strings.Contains(string(b), secret) {
				t.Errorf("%s %s answered with the secret: %s", method, path, b)
			}
			return resp.StatusCode, string(b)
		})
	}

	// Before the list: a pool naming the variable is created (and given its value).
	run("pools: []\n", io.Discard, func(call func(string, string, any) (int, string)) {
		if code, body := call("POST", "/v1/admin/pools", map[string]any{"name": "cloud", "adapter": "fake",
			"credentials": map[string]any{"env": "AWS_SECRET_ACCESS_KEY"}}); code != http.StatusCreated {
			t.Fatalf("create before the list: %d %s", code, body)
		}
	})

	mu.Lock()
	read = nil
	mu.Unlock()
	var logs logBuffer
	run("poolCredentials: {allowedEnv: [DAYTONA_*]}\npools: []\n", &logs, func(call func(string, string, any) (int, string)) {
		code, body := call("POST", "/v1/admin/pools", map[string]any{"name": "again", "adapter": "fake",
			"credentials": map[string]any{"env": "AWS_SECRET_ACCESS_KEY"}})
		if code != http.StatusBadRequest || !strings.Contains(body, "AWS_SECRET_ACCESS_KEY") || !strings.Contains(body, "invalid_request") {
			t.Errorf("create off the list: %d %s", code, body)
		}
		code, body = call("GET", "/v1/admin/pools/cloud", nil)
		var p struct {
			Healthy   bool   `json:"healthy"`
			LastError string `json:"lastError"`
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil || code != http.StatusOK {
			t.Fatalf("get pool: %d %s", code, body)
		}
		if p.Healthy || !strings.Contains(p.LastError, `"AWS_SECRET_ACCESS_KEY"`) || !strings.Contains(p.LastError, "poolCredentials.allowedEnv") {
			t.Errorf("pool stored before the list: %+v", p)
		}
		call("GET", "/v1/admin/pools", nil)
	})
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(read, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("the daemon read the refused variable: %v", read)
	}
	if !strings.Contains(logs.String(), "AWS_SECRET_ACCESS_KEY") || strings.Contains(logs.String(), secret) {
		t.Errorf("log lines of the refused pool:\n%s", logs.String())
	}
}
