package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/opensandbox/ossfake"
)

// e2bSDKDir holds the suite written with E2B's published JavaScript SDK, pinned by its
// package-lock.json.
var e2bSDKDir = filepath.Join("..", "..", "e2e", "e2b")

// e2bPool is one kind of pool the SDK suite runs against: start returns a daemon
// with that pool, template is what the SDK asks for (a profile pinned to the pool),
// and features what the suite may expect of it (E2B_TEST_FEATURES in e2e/e2b/env.mjs;
// the tests needing one the pool lacks are skipped, saying so).
type e2bPool struct {
	name     string
	template string
	features string
	start    func(t *testing.T) (base, adminToken string)
}

var e2bPools = []e2bPool{
	// Real commands in a shell, stdin fed while they run, terminals, and a real
	// directory; no pause.
	{name: "devhost", template: "devhost", features: "exec,stdin,pty", start: startDevForE2B},
	// In memory: files and pause, but commands only echo, so what needs a shell
	// (commands, makeDir, rename, remove, and relative paths, which envd resolves
	// against the $HOME a shell reports) is skipped.
	{name: "fake", template: "fakebox", features: "pause", start: startDevForE2B},
	// OpenSandbox's published API, served by adapters/opensandbox/ossfake on
	// loopback: real commands in a directory per sandbox and pause, reached through
	// the opensandbox adapter as a production pool would be; no stdin or terminal
	// (the adapter has neither).
	{name: "opensandbox", template: "ossbox", features: "exec,pause", start: startOpenSandboxForE2B},
}

// startOpenSandboxForE2B is startDevForE2B with a pool named opensandbox on a fake
// OpenSandbox server, added through the admin API with its key in the daemon's
// environment.
func startOpenSandboxForE2B(t *testing.T) (string, string) {
	t.Helper()
	const keyVar = "E2B_TEST_OPENSANDBOX_KEY"
	key := "oss-" + strings.Repeat("k", 24)
	oss := ossfake.New(t, key)
	t.Setenv(keyVar, key) // the daemon, a child process, inherits it
	base, admin := startDevForE2B(t)
	pool := `{"name": "opensandbox", "adapter": "opensandbox", "trust": "private",
		"credentials": {"env": "` + keyVar + `"},
		"config": {"apiURL": "` + oss.URL() + `", "useServerProxy": true, "runtime": "docker"}}`
	if status, body := adminCall(t, "POST", base+"/v1/admin/pools", admin, pool); status != http.StatusCreated {
		t.Fatalf("adding the opensandbox pool: %d %s", status, body)
	}
	return base, admin
}

// TestE2BSDK runs e2e/e2b with node against a daemon per pool: E2B's own SDK, unmodified,
// is the client, so the front door at /e2b is held to what the SDK really sends and
// expects rather than to our reading of E2B's spec.
func TestE2BSDK(t *testing.T) {
	node := npmInstall(t)
	for _, pool := range e2bPools {
		t.Run(pool.name, func(t *testing.T) {
			base, admin := pool.start(t)
			key := createProjectToken(t, base, admin)
			putTemplateProfile(t, base, admin, pool.template, pool.name)
			requireE2BFrontDoor(t, base, key)
			runSDKSuite(t, node, []string{
				"E2B_API_URL=" + base + "/e2b",
				"E2B_SANDBOX_URL=" + base + "/e2b/envd",
				"E2B_API_KEY=" + key,
				"E2B_TEST_TEMPLATE=" + pool.template,
				"E2B_TEST_FEATURES=" + pool.features,
				// A developer's own E2B settings must not send the SDK elsewhere.
				"E2B_DEBUG=", "E2B_DOMAIN=", "E2B_ACCESS_TOKEN=",
			})
		})
	}
}

var (
	npmOnce sync.Once
	npmNode string
	npmErr  error
)

// npmInstall installs the suite's locked dependencies once per test binary and returns
// node's path. A machine without node or npm fails the test: the suite is part of
// `make test`, not an optional extra.
func npmInstall(t *testing.T) string {
	t.Helper()
	npmOnce.Do(func() {
		node, err := exec.LookPath("node")
		if err != nil {
			npmErr = fmt.Errorf("node is needed for the E2B SDK tests (Node 20.18.1 or later): %w", err)
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			npmErr = fmt.Errorf("npm is needed for the E2B SDK tests: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = e2bSDKDir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", e2bSDKDir, err, out)
			return
		}
		npmNode = node
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return npmNode
}

// startDevForE2B starts a development daemon: SQLite, and the devhost and fake pools.
func startDevForE2B(t *testing.T) (string, string) {
	t.Helper()
	dataDir := t.TempDir()
	d := startDev(t, dataDir)
	var base string
	for _, l := range d.stdout {
		if m := servingLine.FindStringSubmatch(l); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("the daemon printed no address: %q", d.stdout)
	}
	// The daemon's log goes with a failure. It is read once the process is gone, as
	// its copier writes the buffer until then; startDev's own cleanup then finds it
	// stopped.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
		t.Logf("daemon log (last 8 KiB):\n%s", tail(d.stderr.String(), 8<<10))
	})
	token, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return base, strings.TrimSpace(string(token))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// createProjectToken makes the key the SDK sends: E2B keys belong to a team, as
// project tokens belong to a project.
func createProjectToken(t *testing.T, base, admin string) string {
	t.Helper()
	status, body := adminCall(t, "POST", base+"/v1/admin/tokens", admin,
		`{"scope": "project", "project": "e2b-sdk", "name": "E2B SDK tests"}`)
	var created struct{ Secret string }
	if status != http.StatusCreated || json.Unmarshal(body, &created) != nil || created.Secret == "" {
		t.Fatalf("creating a project token: %d %s", status, body)
	}
	return created.Secret
}

// putTemplateProfile defines the profile an E2B templateID names (docs/e2b.md): here
// one whose template the pool under test serves, placed on that pool, as an operator
// moving an E2B program would define one per E2B template it uses.
func putTemplateProfile(t *testing.T, base, admin, name, pool string) {
	t.Helper()
	body := `{"template": "` + name + `", "placement": {"allowedPools": ["` + pool + `"]}}`
	if status, body := adminCall(t, "PUT", base+"/v1/admin/profiles/"+name, admin, body); status != http.StatusOK {
		t.Fatalf("defining profile %s: %d %s", name, status, body)
	}
}

// adminCall sends a JSON body to the native API with the admin token and returns
// the answer's status and body.
func adminCall(t *testing.T, method, url, admin, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// requireE2BFrontDoor fails at once, with one clear line, when the daemon does not
// serve /e2b, rather than with a dozen SDK errors. The key goes as a bearer token too:
// without a front door the API's authentication would answer 401 to X-API-KEY alone
// before the router could answer 404.
func requireE2BFrontDoor(t *testing.T, base, key string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/e2b/v2/sandboxes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		t.Fatalf("this daemon has no E2B front door: GET /e2b/v2/sandboxes answered 404 (%s)", bytes.TrimSpace(body))
	default:
		t.Fatalf("GET /e2b/v2/sandboxes with a project key: %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
}

// runSDKSuite runs every e2e/e2b/*.test.mjs and fails with node's report when one fails.
func runSDKSuite(t *testing.T, node string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec")
	cmd.Dir = e2bSDKDir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("E2B SDK suite: %v\n%s", err, out)
	}
	t.Logf("E2B SDK suite:\n%s", out)
}
