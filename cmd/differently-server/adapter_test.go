package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

// binary is the differently-server built once for these tests, so they exercise the
// real command line in real child processes.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "differently-server-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "differently-server")
	// -buildvcs=auto: the environment may turn stamping off (GOFLAGS), and --version
	// names the commit only when the build recorded it.
	build := exec.Command("go", "build", "-race", "-buildvcs=auto", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building differently-server:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var servingLine = regexp.MustCompile(`on (http://\S+)`)

// serve starts `adapter serve` and returns its URL. The process is stopped with
// SIGTERM when the test ends, and must exit cleanly.
func serve(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"adapter", "serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Wait()
		t.Fatalf("adapter serve printed no address: %v; stderr: %s", err, stderr.String())
	}
	m := servingLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("unexpected first line %q", line)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("adapter serve did not exit cleanly on SIGTERM: %v; stderr: %s", err, stderr.String())
		}
	})
	return m[1]
}

func runTool(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running %v: %v", args, err)
		}
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestServeAndConformance(t *testing.T) {
	tests := []struct {
		name      string
		serveArgs []string
		checkArgs []string
		token     string
	}{
		{"devhost", []string{"--adapter", "devhost", "--root", "ROOT"}, nil, ""},
		{"devhost with token", []string{"--adapter", "devhost", "--root", "ROOT"}, nil, "s3cret-token"},
		{"fake", []string{"--adapter", "fake"}, []string{"--simulated-exec"}, ""},
		{"local", []string{"--adapter", "local", "--root", "ROOT"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "local" && os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
				t.Skip("DIFFERENTLY_SKIP_LOCAL=1: this host cannot run bwrap")
			}
			args := make([]string, len(tt.serveArgs))
			for i, a := range tt.serveArgs {
				args[i] = strings.ReplaceAll(a, "ROOT", t.TempDir())
			}
			env := []string{"DIFFERENTLY_ADAPTER_TOKEN=" + tt.token}
			url := serve(t, env, args...)
			out, code := runTool(t, env, append([]string{"adapter", "conformance", "--endpoint", url}, tt.checkArgs...)...)
			if code != 0 || strings.Contains(out, "FAIL") || !strings.Contains(out, "PASS create/idempotent") ||
				!strings.Contains(out, "PASS http/delete-missing") || !strings.Contains(out, "PASS http/unknown-path") {
				t.Fatalf("conformance exited %d:\n%s", code, out)
			}
			authRan := strings.Contains(out, "PASS http/auth/no-token") && strings.Contains(out, "PASS http/auth/wrong-token")
			authSkipped := strings.Contains(out, "SKIP http/auth/no-token") && strings.Contains(out, "authentication checks are skipped")
			if (tt.token != "" && !authRan) || (tt.token == "" && !authSkipped) {
				t.Errorf("token %t: the authentication checks did not run or skip as they should:\n%s", tt.token != "", out)
			}
		})
	}
}

func TestConformanceFailsOnWrongToken(t *testing.T) {
	url := serve(t, []string{"DIFFERENTLY_ADAPTER_TOKEN=right-token"}, "--adapter", "fake")
	out, code := runTool(t, []string{"DIFFERENTLY_ADAPTER_TOKEN=wrong-token"}, "adapter", "conformance", "--endpoint", url, "--simulated-exec")
	if code == 0 {
		t.Fatalf("conformance with a wrong token exited 0:\n%s", out)
	}
	if !strings.Contains(out, "unauthenticated") {
		t.Errorf("output does not say the token was refused:\n%s", out)
	}
	if strings.Contains(out, "right-token") || strings.Contains(out, "wrong-token") {
		t.Errorf("output leaks a token:\n%s", out)
	}
}

// TestConformanceFailsOpenPlugin: a plugin that answers without checking the token
// the operator gave must fail the raw authentication checks.
func TestConformanceFailsOpenPlugin(t *testing.T) {
	url := serve(t, []string{"DIFFERENTLY_ADAPTER_TOKEN="}, "--adapter", "fake")
	out, code := runTool(t, []string{"DIFFERENTLY_ADAPTER_TOKEN=operator-token"}, "adapter", "conformance", "--endpoint", url, "--simulated-exec")
	if code != 1 || !strings.Contains(out, "FAIL http/auth/no-token") || !strings.Contains(out, "FAIL http/auth/wrong-token") {
		t.Fatalf("exit %d, want 1 with the authentication checks failing:\n%s", code, out)
	}
}

func TestConformanceReportsFailures(t *testing.T) {
	// Without --simulated-exec the shell checks run against the fake's echo and fail:
	// the command must say so and exit non-zero.
	url := serve(t, nil, "--adapter", "fake")
	out, code := runTool(t, nil, "adapter", "conformance", "--endpoint", url)
	if code != 1 || !strings.Contains(out, "FAIL exec/exit-code") {
		t.Fatalf("exit %d, want 1 with exec/exit-code failing:\n%s", code, out)
	}
}

func TestServeRefusesOpenAddressWithoutToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.com:0"} {
		out, code := runTool(t, []string{"DIFFERENTLY_ADAPTER_TOKEN="}, "adapter", "serve", "--adapter", "fake", "--listen", addr)
		if code == 0 || !strings.Contains(out, "without a token") {
			t.Errorf("serve on %s without a token: exit %d, output %q", addr, code, out)
		}
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"adapter", "serve"}, "--adapter is required"},
		{[]string{"adapter", "serve", "--adapter", "opensandbox"}, "devhost, local or fake"},
		{[]string{"adapter", "serve", "--adapter", "fake", "--config-json", `{"nope":1}`}, "nope"},
		{[]string{"adapter", "serve", "--adapter", "fake", "--config-json", `[`}, "--config-json"},
		{[]string{"adapter", "conformance"}, "--endpoint is required"},
		{[]string{"adapter", "conformance", "--endpoint", "http://127.0.0.1:1"}, "cannot use"},
		{[]string{"adapter", "frobnicate"}, "unknown adapter command"},
	}
	for _, tt := range tests {
		out, code := runTool(t, nil, tt.args...)
		if code == 0 || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, output %q; want non-zero and %q", tt.args, code, out, tt.want)
		}
	}
}

func TestServeStopsOnContextCancel(t *testing.T) {
	// run() in process: cancelling its context is what SIGTERM does in main.
	ctx, cancel := context.WithCancel(t.Context())
	var out bytes.Buffer
	done := make(chan int, 1)
	r, w, _ := os.Pipe()
	go func() {
		done <- run(ctx, []string{"adapter", "serve", "--adapter", "fake", "--listen", "127.0.0.1:0"}, w, &out, func(string) string { return "" })
		w.Close()
	}()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d after cancel: %s", code, out.String())
	}
}

// TestServeDropsStreams: served, the fake's execStreamDropRate cuts a streamed exec's
// connection after some output, at the transport: the chunked body breaks off with
// no final event. The adapter client reports that as provider_unavailable after the
// output it got, and the backend goes on serving.
func TestServeDropsStreams(t *testing.T) {
	url := serve(t, nil, "--adapter", "fake", "--config-json", `{"execStreamDropRate": 1}`)
	ctx := t.Context()
	c, err := adapterhttp.NewClient(url, "")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := c.Create(ctx, adapters.CreateRequest{ID: "sbx_drop", Installation: "inst_drop"})
	if err != nil {
		t.Fatal(err)
	}
	const command = "echo cut short"

	// On the wire: 200, some output lines, then the body ends in the middle.
	resp, err := http.Post(url+"/adapter/v1/instances/"+inst.Ref+"/exec?stream=1", "application/json",
		strings.NewReader(`{"command": "`+command+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("status %d, body %q ending with %v; want 200 and a body cut off (unexpected EOF)", resp.StatusCode, raw, err)
	}
	var wire strings.Builder
	for line := range strings.Lines(string(raw)) {
		var ev api.ExecEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.IsFinal() || ev.Stream != api.StreamStdout {
			t.Fatalf("line %q of a dropped stream (%v): want output events only", line, err)
		}
		wire.WriteString(ev.Data)
	}
	if want := command + "\n"; wire.Len() == 0 || wire.Len() >= len(want) || !strings.HasPrefix(want, wire.String()) {
		t.Fatalf("a dropped stream carried %q, want a start of %q", wire.String(), want)
	}

	// Through the adapter client: the output, then provider_unavailable.
	var out strings.Builder
	_, err = c.ExecStream(ctx, inst.Ref, api.ExecRequest{Command: command}, func(ev api.ExecEvent) error {
		out.WriteString(ev.Data)
		return nil
	})
	if !api.IsCode(err, api.CodeProviderUnavailable) || out.Len() == 0 {
		t.Fatalf("ExecStream after %q: %v; want output, then provider_unavailable", out.String(), err)
	}

	// The backend is still there, its instance too.
	if res, err := c.Exec(ctx, inst.Ref, api.ExecRequest{Command: "echo still here"}); err != nil || res.Stdout != "echo still here\n" {
		t.Fatalf("Exec after the drops = %+v, %v", res, err)
	}
	if err := c.Health(ctx); err != nil {
		t.Fatalf("Health after the drops: %v", err)
	}
}

// A local pool that allows egress runs this binary inside each sandbox as its
// bridge to the proxy: curl there reaches the allowed loopback server through the
// proxy its environment names, and another port of the same host not at all.
func TestServeLocalWithEgress(t *testing.T) {
	if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
		t.Skip("DIFFERENTLY_SKIP_LOCAL=1: this host cannot run bwrap")
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s", r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, other, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	cfg := fmt.Sprintf(`{"egress": "allowlist", "egressAllow": ["127.0.0.1:%s"]}`, port)
	url := serve(t, nil, "--adapter", "local", "--root", t.TempDir(), "--config-json", cfg)
	c, err := adapterhttp.NewClient(url, "")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := c.Create(t.Context(), adapters.CreateRequest{ID: "egress", Installation: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), inst.Ref) })
	// --noproxy '': the sandbox's own NO_PROXY keeps 127.0.0.1 for its own loopback.
	for cmd, want := range map[string]string{
		"curl -sS --noproxy '' http://127.0.0.1:" + port + "/through":                          "upstream saw /through",
		"curl -sS --noproxy '' -o /dev/null -w '%{http_code}' http://127.0.0.1:" + other + "/": "403",
	} {
		res, err := c.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: cmd, TimeoutSeconds: 60})
		if err != nil || res.ExitCode != 0 || res.Stdout != want {
			t.Errorf("%s: %+v, %v; want stdout %q", cmd, res, err, want)
		}
	}
}
