package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// openStream starts a streamed exec and returns the answer with its body unread.
func (e *env) openStream(id string, req api.ExecRequest) *http.Response {
	e.t.Helper()
	raw, _ := json.Marshal(req)
	r, err := http.NewRequest("POST", e.url+"/v1/sandboxes/"+id+"/exec?stream=1", bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+e.admin)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readEvents(t *testing.T, sc *bufio.Scanner, n int) []api.ExecEvent {
	t.Helper()
	var out []api.ExecEvent
	for len(out) < n && sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	if len(out) < n {
		t.Fatalf("stream ended after %d events (%v): %v", len(out), out, sc.Err())
	}
	return out
}

func TestExec(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		dev := e.running(e.admin, "devhost")

		var res api.ExecResult
		e.do(e.admin, "POST", "/v1/sandboxes/"+dev.ID+"/exec", api.ExecRequest{Command: "echo hello; echo oops >&2; exit 3"}).
			want(t, http.StatusOK).decode(t, &res)
		if res.Stdout != "hello\n" || res.Stderr != "oops\n" || res.ExitCode != 3 {
			t.Fatalf("exec: %+v", res)
		}
		e.do(e.admin, "POST", "/v1/sandboxes/"+dev.ID+"/exec", api.ExecRequest{}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)

		// Streamed: the first line arrives while the command still waits for a file
		// that the test writes only after reading it, so output cannot have been
		// buffered until the end.
		resp := e.openStream(dev.ID, api.ExecRequest{Command: "echo first; while [ ! -f gate ]; do sleep 0.01; done; echo second >&2; exit 7"})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("stream answer %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(resp.Body)
		if ev := readEvents(t, sc, 1)[0]; ev.Stream != "stdout" || ev.Data != "first\n" {
			t.Fatalf("first event %+v", ev)
		}
		e.do(e.admin, "PUT", "/v1/sandboxes/"+dev.ID+"/files/content?path=gate", "").want(t, http.StatusNoContent)
		evs := readEvents(t, sc, 2)
		if evs[0].Stream != "stderr" || evs[0].Data != "second\n" || evs[1].ExitCode == nil || *evs[1].ExitCode != 7 {
			t.Fatalf("events %+v", evs)
		}
		if sc.Scan() {
			t.Fatalf("line after the final event: %s", sc.Text())
		}

		// A pool without exec.stream: one buffered stdout event, then the exit.
		ns := e.running(e.admin, "nostream")
		resp = e.openStream(ns.ID, api.ExecRequest{Command: "hello"})
		body, _ := io.ReadAll(resp.Body)
		lines := strings.Split(strings.TrimSpace(string(body)), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `"stream":"stdout"`) || !strings.Contains(lines[1], `"exitCode":0`) {
			t.Fatalf("fallback stream: %s", body)
		}
		// An error before any output keeps its status and envelope.
		resp = e.openStream("sbx_nope", api.ExecRequest{Command: "true"})
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("stream on a missing sandbox: %d", resp.StatusCode)
		}

		// Exec on a stopped sandbox.
		e.do(e.admin, "POST", "/v1/sandboxes/"+dev.ID+"/stop", nil).want(t, http.StatusOK)
		e.do(e.admin, "POST", "/v1/sandboxes/"+dev.ID+"/exec", api.ExecRequest{Command: "true"}).
			want(t, http.StatusConflict, api.CodeInvalidState)
	})
}

func TestUnsupportedOperation(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		dev := e.running(e.admin, "devhost")
		for _, tc := range []struct{ path, op string }{
			{"/pause", "pause"},
			{"/ports", "ports.expose"},
			{"/snapshots", "snapshot.memory"},
		} {
			var body any
			switch tc.path {
			case "/ports":
				body = map[string]int{"port": 8080}
			case "/snapshots":
				body = map[string]string{"kind": "memory"}
			}
			got := e.do(e.admin, "POST", "/v1/sandboxes/"+dev.ID+tc.path, body).
				want(t, http.StatusNotImplemented, api.CodeUnsupportedOperation).apiError(t)
			d := got.Details
			if d["operation"] != tc.op || d["pool"] != "devhost" || d["adapter"] != "devhost" {
				t.Fatalf("%s: details %v", tc.path, d)
			}
		}
		// resume asks for paused first: a running sandbox is already where it would go.
		e.do(e.admin, "POST", "/v1/sandboxes/"+dev.ID+"/resume", nil).want(t, http.StatusOK)
	})
}

func TestFiles(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		for _, pool := range []string{"devhost", "fake"} {
			sb := e.running(e.admin, pool)
			base := "/v1/sandboxes/" + sb.ID + "/files"
			e.do(e.admin, "PUT", base+"/content?path=dir/a.txt", "hello file").want(t, http.StatusNoContent)
			got := e.do(e.admin, "GET", base+"/content?path=dir/a.txt", nil).want(t, http.StatusOK)
			if string(got.body) != "hello file" || got.header.Get("Content-Type") != "application/octet-stream" {
				t.Fatalf("%s read %q (%s)", pool, got.body, got.header.Get("Content-Type"))
			}
			var list httpapi.FileList
			e.do(e.admin, "GET", base+"?path=dir", nil).want(t, http.StatusOK).decode(t, &list)
			if len(list.Items) != 1 || list.Items[0].Name != "a.txt" || list.Items[0].Size != 10 {
				t.Fatalf("%s list %+v", pool, list.Items)
			}
			e.do(e.admin, "GET", base+"/content?path=dir/missing", nil).want(t, http.StatusNotFound, api.CodeNotFound)
			e.do(e.admin, "GET", base+"/content", nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
		sb := e.running(e.admin, "fake")
		target := "/v1/sandboxes/" + sb.ID + "/files/content?path=big"
		// Declared length: refused before reading. Chunked: refused at the limit.
		e.request(e.admin, "PUT", target, io.LimitReader(zeros{}, api.MaxFileBytes+1), nil).
			want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
		e.request(e.admin, "PUT", target, io.MultiReader(io.LimitReader(zeros{}, api.MaxFileBytes+1)), nil).
			want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
		e.do(e.admin, "GET", target, nil).want(t, http.StatusNotFound, api.CodeNotFound)
		// Exactly the limit is accepted.
		e.request(e.admin, "PUT", target, io.MultiReader(io.LimitReader(zeros{}, api.MaxFileBytes)), nil).want(t, http.StatusNoContent)
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		sb := e.running(e.admin, "fake")
		base := "/v1/sandboxes/" + sb.ID
		step := func(op string, status int, want httpapi.SandboxState) {
			t.Helper()
			r := e.do(e.admin, "POST", base+"/"+op, nil).want(t, status)
			if status == http.StatusOK {
				var got httpapi.Sandbox
				r.decode(t, &got)
				if got.State != want {
					t.Fatalf("%s: %s, want %s", op, got.State, want)
				}
			}
		}
		step("start", 200, httpapi.Running) // already running
		step("resume", 200, httpapi.Running)
		step("stop", 200, httpapi.Stopped)
		step("stop", 200, httpapi.Stopped)
		step("pause", 409, "")
		step("start", 200, httpapi.Running)
		step("pause", 200, httpapi.Paused)
		e.do(e.admin, "POST", base+"/exec", api.ExecRequest{Command: "x"}).want(t, http.StatusConflict, api.CodeInvalidState)
		step("stop", 409, "")
		step("resume", 200, httpapi.Running)
		var res api.ExecResult
		e.do(e.admin, "POST", base+"/exec", api.ExecRequest{Command: "x"}).want(t, http.StatusOK).decode(t, &res)

		var url httpapi.PortResponse
		e.do(e.admin, "POST", base+"/ports", map[string]int{"port": 8080}).want(t, http.StatusOK).decode(t, &url)
		if !strings.Contains(url.Url, "8080") {
			t.Fatalf("url %q", url.Url)
		}
		e.do(e.admin, "POST", base+"/ports", map[string]int{"port": 0}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		// A queued sandbox has nothing to operate on yet.
		q := e.createSandbox(e.admin, "fake", nil)
		e.do(e.admin, "POST", "/v1/sandboxes/"+q.Id+"/stop", nil).want(t, http.StatusConflict, api.CodeInvalidState)
	})
}

func TestSnapshotsAndFork(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		src := e.running(e.admin, "devhost")
		base := "/v1/sandboxes/" + src.ID
		e.do(e.admin, "PUT", base+"/files/content?path=kept.txt", "state").want(t, http.StatusNoContent)

		var sn httpapi.Snapshot
		e.do(e.admin, "POST", base+"/snapshots", map[string]any{}).want(t, http.StatusCreated).decode(t, &sn)
		if sn.Kind != "disk" || sn.SandboxId != src.ID || sn.State != "ready" || *sn.Pool != "devhost" {
			t.Fatalf("snapshot %+v", sn)
		}
		var list httpapi.SnapshotList
		e.do(e.admin, "GET", base+"/snapshots", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 1 || list.Items[0].Id != sn.Id {
			t.Fatalf("snapshots %+v", list)
		}
		e.do(e.admin, "GET", "/v1/snapshots/"+sn.Id, nil).want(t, http.StatusOK)
		other := e.projectToken("default", "other")
		e.do(other, "GET", "/v1/snapshots/"+sn.Id, nil).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(other, "DELETE", "/v1/snapshots/"+sn.Id, nil).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(other, "POST", "/v1/sandboxes", map[string]any{"fromSnapshot": sn.Id}).want(t, http.StatusNotFound, api.CodeNotFound)

		// A sandbox restored from the snapshot lands on the snapshot's pool.
		var restored httpapi.Sandbox
		e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"fromSnapshot": sn.Id}).want(t, http.StatusAccepted).decode(t, &restored)
		if *restored.FromSnapshot != sn.Id {
			t.Fatalf("restored %+v", restored)
		}

		var fork httpapi.Sandbox
		e.do(e.admin, "POST", base+"/fork", map[string]any{"labels": map[string]string{"copy": "yes"}}).
			want(t, http.StatusAccepted).decode(t, &fork)
		if fork.State != httpapi.Queued || fork.FromSnapshot == nil || fork.Placement == nil ||
			strings.Join(*fork.Placement.AllowedPools, ",") != "devhost" || fork.Labels["copy"] != "yes" {
			t.Fatalf("fork %+v", fork)
		}
		e.do(e.admin, "GET", "/v1/snapshots/"+*fork.FromSnapshot, nil).want(t, http.StatusOK)
		e.provision(fork.Id)
		got := e.do(e.admin, "GET", "/v1/sandboxes/"+fork.Id+"/files/content?path=kept.txt", nil).want(t, http.StatusOK)
		if string(got.body) != "state" {
			t.Fatalf("forked file %q", got.body)
		}

		e.do(e.admin, "DELETE", "/v1/snapshots/"+sn.Id, nil).want(t, http.StatusNoContent)
		e.do(e.admin, "DELETE", "/v1/snapshots/"+sn.Id, nil).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(e.admin, "POST", base+"/snapshots", map[string]any{"kind": "weird"}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
	})
}

// With the access log on, every request is one line with its method, path, status
// and caller, and never its token or query.
func TestAccessLog(t *testing.T) {
	onSQLite(t, func(t *testing.T, st store.Store) {
		var buf syncBuffer
		e := newEnvWith(t, st, func(o *httpapi.Options) {
			o.AccessLog = true
			o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		})
		e.do(e.admin, "GET", "/v1/sandboxes?label=team%3Dsecret-team", nil).want(t, http.StatusOK)
		e.do("", "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized)
		out := buf.String()
		for _, want := range []string{
			`msg=request method=GET path=/v1/sandboxes route=/v1/sandboxes status=200`,
			`msg=request method=GET path=/v1/sandboxes route=/v1/sandboxes status=401`,
			`userAgent=Go-http-client/1.1`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("access log lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, e.admin) || strings.Contains(out, "secret-team") {
			t.Errorf("the access log holds the token or the query:\n%s", out)
		}
	})
}
