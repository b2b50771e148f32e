package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/daytona/daytonafake"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/adapters/freestyle/freestylefake"
	"github.com/different-ai/differently/adapters/opensandbox/ossfake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
)

// syncBuffer is a log destination several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Failure modes of a faultyBackend. Every mode that answers echoes the request it
// got, headers and all, the way badly behaved servers and proxies do.
const (
	modeOK        = "ok"
	modeHang      = "hang"      // hold the request until the client gives up
	modeReset     = "reset"     // drop the connection without an answer
	modeMalformed = "malformed" // 200 with half a JSON document quoting the request
	modeCut       = "cut"       // 500 whose text puts the credential across a message's 500-byte cut
	modePrefix    = "prefix"    // 500 quoting the credential without its last four characters
	modeEncoded   = "encoded"   // 500 quoting the credential in base64 (a Basic header) and hex
)

// failureModes are run in this order; 404 comes last because a Delete answered 404
// succeeds, which ends the sandbox the termination checks rely on.
var failureModes = []string{"401", "403", "500", "502", modeCut, modePrefix, modeEncoded, modeMalformed, modeReset, modeHang, "404"}

// faultyBackend fronts a working fake backend on a loopback port and fails on demand.
type faultyBackend struct {
	name   string
	remote bool // answers errors in the adapter protocol's envelope
	next   http.Handler
	srv    *httptest.Server
	mode   atomic.Value // string
	failed atomic.Int64 // requests answered with a failure
	// release ends every hanging request when the test ends.
	release chan struct{}
}

func newFaultyBackend(t *testing.T, name string, remote bool, next http.Handler) *faultyBackend {
	b := &faultyBackend{name: name, remote: remote, next: next, release: make(chan struct{})}
	b.mode.Store(modeOK)
	b.srv = httptest.NewServer(b)
	t.Cleanup(b.srv.Close)
	t.Cleanup(func() { close(b.release) })
	return b
}

func (b *faultyBackend) set(mode string) { b.mode.Store(mode) }

func (b *faultyBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode := b.mode.Load().(string)
	if mode == modeOK {
		b.next.ServeHTTP(w, r)
		return
	}
	b.failed.Add(1)
	cred := r.Header.Get("Authorization")
	if k := r.Header.Get("OPEN-SANDBOX-API-KEY"); k != "" {
		cred = k
	}
	echo := fmt.Sprintf("refused %s %s with headers %v", r.Method, r.URL, r.Header)
	if b.remote {
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
	}
	switch mode {
	case modeHang:
		// The server notices a client that gave up only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-b.release:
		}
		return
	case modeReset:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	case modeMalformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","message":"`+echo)
		return
	case modeCut:
		echo = strings.Repeat("p", 480) + cred + " and more"
		mode = "500"
	case modePrefix:
		echo = "key " + cred[:max(0, len(cred)-4)] + "**** is not valid"
		mode = "500"
	case modeEncoded:
		echo = "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+cred)) +
			" (hex " + hex.EncodeToString([]byte(cred)) + ", " + base64.RawURLEncoding.EncodeToString([]byte(cred)) + ") refused"
		mode = "500"
	}
	status, _ := strconv.Atoi(mode)
	if b.remote && status >= 500 && r.URL.Query().Get("stream") == "1" {
		// A failure after a streamed exec started: only words are left.
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintf(w, "{\"stream\":\"stdout\",\"data\":\"partial\"}\n{\"error\":%q}\n", echo)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body any = map[string]any{"code": "REFUSED", "message": echo, "headers": r.Header}
	if b.remote {
		code := map[int]api.Code{401: api.CodeUnauthenticated, 403: api.CodeForbidden, 404: api.CodeNotFound}[status]
		if code == "" {
			code = api.CodeInternal
		}
		body = api.ErrorEnvelope{Error: api.Errorf(code, "%s", echo).WithDetail("headers", r.Header)}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// leakRig is the daemon's wiring (store, pool manager with the real registry and
// credentials from the environment, scheduler, reconciler, API) with one logger
// writing into a buffer, and a record of every answer the API gave.
type leakRig struct {
	t        *testing.T
	st       store.Store
	clk      *clock.Manual
	logs     *syncBuffer
	url      string
	admin    string
	project  string
	manager  *pools.Manager
	sched    *scheduler.Scheduler
	quick    *scheduler.Scheduler // short timeouts, for the hanging backend
	secrets  map[string]string    // what each secret is -> the secret
	mu       sync.Mutex
	answers  []string
	redacted int // answers and reasons that show a credential was scrubbed
}

func randomSecret(prefix string) string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func newLeakRig(t *testing.T, st store.Store, keys map[string]string) *leakRig {
	ctx := context.Background()
	r := &leakRig{t: t, st: st, logs: &syncBuffer{}, secrets: map[string]string{},
		clk: clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))}
	logger := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	inst, err := st.InstallationID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return keys[k] }
	r.manager = pools.NewManager(st, pools.DefaultRegistry(false), r.clk,
		pools.Options{Getenv: getenv, Logger: logger, ProbeTimeout: 300 * time.Millisecond,
			// Every failure mode meets a Create in turn: the breaker must not pause the
			// pool after the third.
			Breaker: pools.BreakerOptions{Threshold: 1000}})
	// Provisioning waits for the fakes' readiness polls (a second or two); the quick
	// scheduler gives up on a hanging backend sooner.
	r.sched, err = scheduler.New(st, r.manager, r.clk, scheduler.Options{Installation: inst, Logger: logger,
		MaxAttempts: 1, ProvisionTimeout: 20 * time.Second, TerminateTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.quick, err = scheduler.New(st, r.manager, r.clk, scheduler.Options{Installation: inst, Logger: logger,
		MaxAttempts: 1, ProvisionTimeout: 300 * time.Millisecond, TerminateTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := reconcile.New(st, r.manager, r.clk, reconcile.Options{Installation: inst, Logger: logger,
		CallTimeout: 300 * time.Millisecond})
	h, err := httpapi.New(httpapi.Options{
		Store: st, Pools: r.manager, Scheduler: nopNotify{}, Changes: feed(t, st), Reconciler: rec, Clock: r.clk,
		Installation: inst, AdapterKinds: pools.DefaultRegistry(false).Kinds, DevOnlyKinds: []string{"devhost", "fake"},
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	e := &env{t: t, st: st, clk: r.clk}
	r.admin = e.token(store.Token{Scope: store.ScopeAdmin, Name: "admin"})
	r.project = e.projectToken("acme", "web")
	r.secrets["admin token"] = r.admin
	r.secrets["project token"] = r.project
	for k, v := range keys {
		r.secrets["pool credential "+k] = v
	}
	return r
}

type nopNotify struct{}

func (nopNotify) Notify() {}

func (nopNotify) Wake(store.State) {}

// do sends a request and records the whole answer: status, headers and body.
func (r *leakRig) do(token, method, path string, body any) response {
	return r.doWithin(0, token, method, path, body)
}

func (r *leakRig) doWithin(timeout time.Duration, token, method, path string, body any) response {
	r.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if timeout > 0 {
			return response{}
		}
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var hdr strings.Builder
	_ = resp.Header.Write(&hdr)
	r.mu.Lock()
	r.answers = append(r.answers, fmt.Sprintf("%s %s -> %s\n%s\n%s", method, path, resp.Status, hdr.String(), raw))
	if bytes.Contains(raw, []byte(adapters.Redacted)) {
		r.redacted++
	}
	r.mu.Unlock()
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

func (r *leakRig) refresh() {
	r.t.Helper()
	if err := r.manager.Refresh(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// healthy probes until pool is healthy again. A probe has 300 ms, which a loaded
// machine running the race detector sometimes misses; a pool left unhealthy would
// keep the next create queued, and the sweep would report that instead of what it
// checks.
func (r *leakRig) healthy(pool string) {
	r.t.Helper()
	for range 5 {
		r.refresh()
		if v, ok := r.manager.View(pool); ok && v.Healthy {
			return
		}
	}
	v, _ := r.manager.View(pool)
	r.t.Fatalf("pool %s stays unhealthy with its backend answering: %v", pool, v.LastError)
}

// running creates a sandbox on pool through the API and provisions it.
func (r *leakRig) running(pool string) httpapi.Sandbox {
	r.t.Helper()
	var sb httpapi.Sandbox
	r.do(r.project, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{pool}}}).
		want(r.t, http.StatusAccepted).decode(r.t, &sb)
	if _, err := r.sched.ProvisionOnce(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.do(r.project, "GET", "/v1/sandboxes/"+sb.Id, nil).want(r.t, http.StatusOK).decode(r.t, &sb)
	if sb.State != httpapi.Running {
		r.t.Fatalf("sandbox on %s is %s: %s", pool, sb.State, deref(sb.Reason))
	}
	return sb
}

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		return *p
	}
	return zero
}

// sweep drives every call that reaches backend b while it fails in each mode.
func (r *leakRig) sweep(b *faultyBackend, spec map[string]any) {
	t, ctx := r.t, context.Background()
	var p httpapi.Pool
	r.do(r.admin, "POST", "/v1/admin/pools", spec).want(t, http.StatusCreated).decode(t, &p)
	if !deref(p.Healthy) {
		t.Fatalf("pool %s is not healthy before the faults: %s", b.name, deref(p.LastError))
	}
	sb := r.running(b.name)
	base := "/v1/sandboxes/" + sb.Id
	doomed := r.running(b.name)
	r.do(r.project, "DELETE", "/v1/sandboxes/"+doomed.Id, nil).want(t, http.StatusAccepted)
	var snap httpapi.Snapshot
	if res := r.do(r.project, "POST", base+"/snapshots", map[string]any{}); res.status == http.StatusCreated {
		res.decode(t, &snap)
	}
	failedBefore := b.failed.Load()

	for _, mode := range failureModes {
		// A create placed while the pool is healthy, whose Create then fails.
		b.set(modeOK)
		r.healthy(b.name)
		var victim httpapi.Sandbox
		r.do(r.project, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{b.name}}}).
			want(t, http.StatusAccepted).decode(t, &victim)
		b.set(mode)
		sched := r.sched
		if mode == modeHang {
			sched = r.quick
		}
		if _, err := sched.ProvisionOnce(ctx); err != nil {
			t.Fatal(err)
		}
		var got httpapi.Sandbox
		r.do(r.project, "GET", "/v1/sandboxes/"+victim.Id, nil).want(t, http.StatusOK).decode(t, &got)
		if got.State != httpapi.Failed {
			t.Fatalf("%s %s: a create against the failing backend left the sandbox %s (%s)", b.name, mode, got.State, deref(got.Reason))
		}

		// Probes, and what the admin routes show of them.
		r.refresh()
		r.do(r.admin, "GET", "/v1/admin/pools", nil).want(t, http.StatusOK)
		r.do(r.admin, "GET", "/v1/admin/pools/"+b.name, nil).want(t, http.StatusOK).decode(t, &p)
		if mode != modeMalformed && (deref(p.Healthy) || deref(p.LastError) == "") {
			// (A probe that does not read the answer's body passes a malformed one.)
			t.Fatalf("%s %s: the failing pool looks healthy: %+v", b.name, mode, p)
		}
		r.do(r.admin, "GET", "/v1/admin/trust", nil).want(t, http.StatusOK)
		// Placement quotes the pool's last error to the tenant.
		var waiting httpapi.Sandbox
		r.do(r.project, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{b.name}}}).
			want(t, http.StatusAccepted).decode(t, &waiting)
		r.do(r.project, "DELETE", "/v1/sandboxes/"+waiting.Id, nil).want(t, http.StatusAccepted)
		r.do(r.project, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)

		// Every operation on a running sandbox that calls the backend.
		if mode == modeHang {
			r.doWithin(300*time.Millisecond, r.project, "POST", base+"/exec", api.ExecRequest{Command: "true"})
		} else {
			for _, op := range []struct {
				method, path string
				body         any
			}{
				{"POST", "/exec", api.ExecRequest{Command: "echo hi"}},
				{"POST", "/exec?stream=1", api.ExecRequest{Command: "echo hi"}},
				{"GET", "/files/content?path=a.txt", nil},
				{"PUT", "/files/content?path=a.txt", "content"},
				{"GET", "/files?path=.", nil},
				{"POST", "/stop", nil},
				{"POST", "/pause", nil},
				{"POST", "/ports", map[string]int{"port": 8080}},
				{"PATCH", "", map[string]any{"ttlSeconds": 600}},
				{"POST", "/snapshots", map[string]any{}},
				{"POST", "/fork", map[string]any{}},
			} {
				if mode == modeMalformed && (op.path == "/stop" || op.path == "/pause" || strings.HasPrefix(op.path, "/files/content")) {
					// A call that ignores the answer's body succeeds, and the sandbox
					// must stay running for the modes after this one; a file read
					// answered 200 returns the answer as the file's bytes, which are
					// data, passed on as they are.
					continue
				}
				res := r.do(r.project, op.method, base+op.path, op.body)
				// Where the backend is called, the call fails (PATCH calls it only
				// where the backend keeps its own expiry, and a malformed answer
				// may go unread).
				failed := res.status/100 != 2 || strings.Contains(op.path, "stream") && bytes.Contains(res.body, []byte(`{"error":`))
				if !failed && op.method != "PATCH" && mode != modeMalformed {
					t.Fatalf("%s %s: %s %s succeeded against the failing backend: %s", b.name, mode, op.method, op.path, res.body)
				}
			}
			if snap.Id != "" {
				r.do(r.project, "DELETE", "/v1/snapshots/"+snap.Id, nil)
			}
		}

		// Termination and reconciliation, in the background and on demand.
		if _, err := sched.TerminateOnce(ctx); err != nil {
			t.Fatal(err)
		}
		r.do(r.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusOK)
	}
	if b.failed.Load() == failedBefore {
		t.Fatalf("%s: no request ever met a fault", b.name)
	}

	// An unreachable backend, through the admin routes that change a pool.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	cfg := map[string]any{}
	for k, v := range spec["config"].(map[string]any) {
		cfg[k] = v
	}
	for _, k := range []string{"apiURL", "endpoint"} {
		if _, ok := cfg[k]; ok {
			cfg[k] = dead.URL
		}
	}
	r.do(r.admin, "PATCH", "/v1/admin/pools/"+b.name, map[string]any{"config": cfg}).want(t, http.StatusOK).decode(t, &p)
	if deref(p.Healthy) {
		t.Fatalf("%s: healthy with its backend gone", b.name)
	}
	r.do(r.project, "POST", base+"/exec", api.ExecRequest{Command: "true"}).want(t, http.StatusServiceUnavailable)
	r.do(r.admin, "PUT", "/v1/admin/pools/"+b.name, spec).want(t, http.StatusOK)

	// Back to normal: the doomed sandbox goes.
	b.set(modeOK)
	r.refresh()
	if _, err := r.sched.TerminateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var gone httpapi.Sandbox
	r.do(r.project, "GET", "/v1/sandboxes/"+doomed.Id, nil).want(t, http.StatusOK).decode(t, &gone)
	if gone.State != httpapi.Terminated {
		t.Fatalf("%s: doomed sandbox is %s (%s)", b.name, gone.State, deref(gone.Reason))
	}
}

// check looks for every secret, and every 12-byte piece of one, in everything the
// rig saw: answers, log lines, the database's sandboxes and pools, the pool views
// and the metrics.
func (r *leakRig) check() {
	t, ctx := r.t, context.Background()
	r.do("", "GET", "/metrics", nil).want(t, http.StatusOK)
	places := map[string]string{"log": r.logs.String()}
	r.mu.Lock()
	for i, a := range r.answers {
		places[fmt.Sprintf("answer %d", i)] = a
	}
	r.mu.Unlock()
	sbs, _, err := r.st.ListSandboxes(ctx, store.SandboxFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		raw, _ := json.Marshal(sb)
		places["stored sandbox "+sb.ID] = string(raw)
		if strings.Contains(sb.Reason, adapters.Redacted) {
			r.redacted++
		}
	}
	stored, err := r.st.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(stored)
	places["stored pools"] = string(raw)
	for _, v := range r.manager.Views() {
		places["view of "+v.Pool.Name] = fmt.Sprintf("%+v %s", v.Info, v.LastError)
	}
	for what, secret := range r.secrets {
		for where, text := range places {
			if piece := leakedPiece(text, secret); piece != "" {
				i := strings.Index(text, piece)
				t.Errorf("the %s (%q) appears in the %s: …%s…", what, piece, where, text[max(0, i-200):min(len(text), i+100)])
			}
		}
	}
	// The backends' echoes did reach the control plane, and were scrubbed there.
	if r.redacted == 0 {
		t.Errorf("no answer or reason shows a scrubbed credential: the echoes never arrived")
	}
}

// leakedPiece returns a 12-byte piece of secret, of its hex or of its base64 (at any
// of the three alignments at which a longer text can hold it) found in s, or "".
func leakedPiece(s, secret string) string {
	const n = 12
	forms := []string{secret, hex.EncodeToString([]byte(secret))}
	for shift := 0; shift < 3 && shift < len(secret); shift++ {
		forms = append(forms, base64.RawStdEncoding.EncodeToString([]byte(secret[shift:])),
			base64.RawURLEncoding.EncodeToString([]byte(secret[shift:])))
	}
	for _, f := range forms {
		for i := 0; i+n <= len(f); i++ {
			if strings.Contains(s, f[i:i+n]) {
				return f[i : i+n]
			}
		}
	}
	return ""
}

// TestCredentialsNeverLeak gives every kind of pool that holds a credential (an
// OpenSandbox server, Daytona, Freestyle and a remote plugin) a distinctive secret,
// makes each backend fail in every way while echoing the request it got, drives
// every API call, scheduler pass, probe and reconcile that reaches it, and then
// finds no secret (pool credentials, the plugin token, the admin and project bearer
// tokens, a wrong token) in any answer, header, log line, stored reason or pool view.
func TestCredentialsNeverLeak(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		keys := map[string]string{
			"OSS_KEY":       randomSecret("oss-key-"),
			"DAYTONA_KEY":   randomSecret("dtn-key-"),
			"FREESTYLE_KEY": randomSecret("fs-key-"),
			"REMOTE_TOKEN":  randomSecret("rmt-token-"),
		}
		r := newLeakRig(t, st, keys)
		ctx := context.Background()

		// A wrong token is refused without being repeated.
		wrong := randomSecret("dly_")
		r.secrets["wrong bearer token"] = wrong
		r.do(wrong, "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized)
		r.do(wrong, "GET", "/v1/admin/pools", nil).want(t, http.StatusUnauthorized)
		r.do(r.project, "GET", "/v1/admin/pools", nil).want(t, http.StatusForbidden)
		r.do(r.admin, "PUT", "/v1/admin/policy", map[string]any{"allowExternal": true,
			"externalPools": []string{"daytona", "freestyle"}}).want(t, http.StatusOK)

		oss := ossfake.New(t, keys["OSS_KEY"])
		ossURL, _ := url.Parse(strings.TrimSuffix(oss.URL(), "/v1"))
		proxy := httputil.NewSingleHostReverseProxy(ossURL)
		proxy.FlushInterval = -1
		proxy.ErrorLog = log.New(io.Discard, "", 0)
		ossBackend := newFaultyBackend(t, "opensandbox", false, proxy)
		r.sweep(ossBackend, map[string]any{"name": "opensandbox", "adapter": "opensandbox", "trust": "private",
			"credentials": map[string]any{"env": "OSS_KEY"},
			"config": map[string]any{"apiURL": ossBackend.srv.URL + "/v1", "image": "python:3.12",
				"useServerProxy": true, "runtime": "docker"}})

		dtn := daytonafake.New(keys["DAYTONA_KEY"], t.TempDir())
		dtnBackend := newFaultyBackend(t, "daytona", false, dtn)
		r.sweep(dtnBackend, map[string]any{"name": "daytona", "adapter": "daytona", "trust": "external",
			"credentials": map[string]any{"env": "DAYTONA_KEY"}, "config": map[string]any{"apiURL": dtnBackend.srv.URL}})

		fs, err := freestylefake.New(keys["FREESTYLE_KEY"])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		fsBackend := newFaultyBackend(t, "freestyle", false, fs)
		r.sweep(fsBackend, map[string]any{"name": "freestyle", "adapter": "freestyle", "trust": "external",
			"credentials": map[string]any{"env": "FREESTYLE_KEY"}, "config": map[string]any{"apiURL": fsBackend.srv.URL}})

		plugin := adapterhttp.Handler(fake.New(fake.Config{}), keys["REMOTE_TOKEN"])
		remoteBackend := newFaultyBackend(t, "remote", true, plugin)
		r.sweep(remoteBackend, map[string]any{"name": "remote", "adapter": "remote", "trust": "private",
			"credentials": map[string]any{"env": "REMOTE_TOKEN"}, "config": map[string]any{"endpoint": remoteBackend.srv.URL}})

		// A backend's own account of a failure reaches the sandbox's reason through
		// the reconciler.
		sb := r.running("opensandbox")
		stored, err := st.GetSandbox(ctx, sb.Id)
		if err != nil {
			t.Fatal(err)
		}
		oss.SetState(stored.BackendRef, "Failed", "evicted; the request carried OPEN-SANDBOX-API-KEY="+keys["OSS_KEY"])
		r.clk.Advance(time.Hour) // past the reconciler's grace for recent changes
		r.do(r.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusOK)
		var got httpapi.Sandbox
		r.do(r.project, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusOK).decode(t, &got)
		if got.State != httpapi.Failed || !strings.Contains(deref(got.Reason), "evicted") {
			t.Fatalf("reconciled sandbox %s: %s", got.State, deref(got.Reason))
		}

		r.check()
	})
}

// Why a pool's adapter could not be built is an administrator's to read: the error
// may name internal endpoints, paths or credential variables. A tenant whose sandbox
// is on that pool learns only that the pool is unavailable.
func TestBrokenPoolErrorStaysWithAdmins(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		tok := e.projectToken("acme", "mine")
		sb := e.running(tok, "fake")
		const detail = "credentials variable INTERNAL_VAULT_TOKEN is not set; api at https://10.0.0.7:8443"
		e.pools.Update("fake", func(v *pools.View) { v.Adapter, v.LastError = nil, detail })
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/sandboxes/" + sb.ID + "/exec", `{"command":"true"}`},
			{"POST", "/v1/sandboxes/" + sb.ID + "/exec?stream=1", `{"command":"true"}`},
			{"GET", "/v1/sandboxes/" + sb.ID + "/files/content?path=/etc/hostname", ""},
		} {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := e.do(tok, c.method, c.path, body).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
			if strings.Contains(string(r.body), "INTERNAL_VAULT_TOKEN") || strings.Contains(string(r.body), "10.0.0.7") {
				t.Errorf("%s %s told a tenant why the pool is broken: %s", c.method, c.path, r.body)
			}
		}
	})
}
