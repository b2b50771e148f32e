package adapterhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

// renewingMem is memAdapter with a backend expiry: it records every RenewTTL and
// answers with failWith when that is set.
type renewingMem struct {
	*memAdapter

	mu       sync.Mutex
	renewals []renewal
	failWith error
}

type renewal struct {
	ref string
	ttl int64
}

var _ adapters.TTLRenewer = (*renewingMem)(nil)

func (m *renewingMem) RenewTTL(_ context.Context, ref string, ttl int64) error {
	m.mu.Lock()
	fail := m.failWith
	m.mu.Unlock()
	if fail != nil {
		return fail
	}
	if _, err := m.lookup(ref); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.renewals = append(m.renewals, renewal{ref, ttl})
	return nil
}

func (m *renewingMem) seen() []renewal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]renewal(nil), m.renewals...)
}

func (m *renewingMem) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failWith = err
}

// countingServer serves Handler(a) on loopback and counts the requests per path
// suffix it was asked for.
func countingServer(t *testing.T, a adapters.ExecutionAdapter) (*httptest.Server, *adapterhttp.Client, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var infos, ttls atomic.Int64
	h := adapterhttp.Handler(a, "tok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/info"):
			infos.Add(1)
		case strings.HasSuffix(r.URL.Path, "/ttl"):
			ttls.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := adapterhttp.NewClient(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, &infos, &ttls
}

func TestTTLRenewalRoundTrip(t *testing.T) {
	ctx := t.Context()
	mem := &renewingMem{memAdapter: newMem()}
	srv, c, infos, ttls := countingServer(t, mem)
	inst := try(mem.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "inst_a", TTLSeconds: 60})).ok(t)

	// The first renewal learns from /info that the plugin renews; later ones rely on
	// what the pool's refreshes fetched.
	noErr(t, c.RenewTTL(ctx, inst.Ref, 3600))
	noErr(t, c.RenewTTL(ctx, inst.Ref, 0))
	want := []renewal{{inst.Ref, 3600}, {inst.Ref, 0}}
	if got := mem.seen(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("renewals = %+v, want %+v", got, want)
	}
	if infos.Load() != 1 || ttls.Load() != 2 {
		t.Fatalf("%d /info and %d /ttl requests, want 1 and 2", infos.Load(), ttls.Load())
	}

	wantCode(t, c.RenewTTL(ctx, "no-such-ref", 60), api.CodeNotFound)
	// Refused locally, without a request.
	wantCode(t, c.RenewTTL(ctx, inst.Ref, -1), api.CodeInvalidRequest)
	wantCode(t, c.RenewTTL(ctx, "", 60), api.CodeInvalidRequest)
	if ttls.Load() != 3 {
		t.Fatalf("%d /ttl requests, want 3", ttls.Load())
	}

	resp, raw := do(t, http.MethodGet, srv.URL+adapterhttp.BasePath+"/info", nil, "Authorization", "Bearer tok")
	var info struct {
		TTLRenewal bool `json:"ttlRenewal"`
	}
	if err := json.Unmarshal(raw, &info); err != nil || !info.TTLRenewal {
		t.Fatalf("info of a renewing adapter: %d %s", resp.StatusCode, raw)
	}
}

// Every code the adapter answers reaches the control plane as that code, with the
// status the protocol gives it on the way.
func TestTTLRenewalErrorCodes(t *testing.T) {
	ctx := t.Context()
	mem := &renewingMem{memAdapter: newMem()}
	srv, c, _, _ := countingServer(t, mem)
	noErr(t, c.Refresh(ctx))
	url := srv.URL + adapterhttp.BasePath + "/instances/r/ttl"
	for _, tc := range []struct {
		err    error
		code   api.Code
		status int
	}{
		{adapters.NotFound("gone"), api.CodeNotFound, http.StatusNotFound},
		{adapters.InvalidState("paused"), api.CodeInvalidState, http.StatusConflict},
		{adapters.InvalidRequest("too long"), api.CodeInvalidRequest, http.StatusBadRequest},
		{adapters.Unsupported("ttl.renew"), api.CodeUnsupportedOperation, http.StatusNotImplemented},
		{adapters.Unavailable("down"), api.CodeProviderUnavailable, http.StatusServiceUnavailable},
		{adapters.InsufficientCapacity("full"), api.CodeInsufficientCapacity, http.StatusServiceUnavailable},
		{adapters.SandboxFailed("broken"), api.CodeSandboxFailed, http.StatusServiceUnavailable},
		{errors.New("no code"), api.CodeInternal, http.StatusInternalServerError},
		{api.Errorf(api.CodeUnauthenticated, "backend refused us"), api.CodeProviderUnavailable, http.StatusUnauthorized},
	} {
		mem.fail(tc.err)
		wantCode(t, c.RenewTTL(ctx, "r", 60), tc.code)
		resp, raw := do(t, http.MethodPost, url, strings.NewReader(`{"ttlSeconds":60}`), "Authorization", "Bearer tok")
		code := tc.code
		if code == api.CodeProviderUnavailable && tc.status == http.StatusUnauthorized {
			code = api.CodeUnauthenticated // the client's reading of a refused credential
		}
		wantEnvelope(t, resp, raw, tc.status, code)
	}

	// The body is checked before the adapter sees it.
	mem.fail(nil)
	for _, body := range []string{`{}`, `{"ttlSeconds":-5}`, `{"ttlSeconds":60,"extra":1}`, `{"ttlSeconds":"60"}`, ``} {
		resp, raw := do(t, http.MethodPost, url, strings.NewReader(body), "Authorization", "Bearer tok")
		wantEnvelope(t, resp, raw, http.StatusBadRequest, api.CodeInvalidRequest)
	}
	if got := mem.seen(); len(got) != 0 {
		t.Fatalf("renewals = %+v, want none", got)
	}

	// An unreachable plugin is an outage.
	srv.Close()
	wantCode(t, c.RenewTTL(ctx, "r", 60), api.CodeProviderUnavailable)
}

// A plugin whose adapter keeps no expiry does not declare ttlRenewal; the client then
// renews nothing, as the control plane does for an in-process adapter without
// TTLRenewer, and the route itself answers 501.
func TestTTLRenewalUndeclared(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	srv, c, infos, ttls := countingServer(t, mem)
	inst := try(mem.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "inst_a"})).ok(t)

	noErr(t, c.RenewTTL(ctx, inst.Ref, 3600))
	noErr(t, c.RenewTTL(ctx, "no-such-ref", 3600))
	if infos.Load() != 1 || ttls.Load() != 0 {
		t.Fatalf("%d /info and %d /ttl requests, want 1 and 0", infos.Load(), ttls.Load())
	}

	resp, raw := do(t, http.MethodGet, srv.URL+adapterhttp.BasePath+"/info", nil, "Authorization", "Bearer tok")
	if strings.Contains(string(raw), "ttlRenewal") {
		t.Fatalf("info of an adapter without TTLRenewer declares it: %d %s", resp.StatusCode, raw)
	}
	resp, raw = do(t, http.MethodPost, srv.URL+adapterhttp.BasePath+"/instances/r/ttl",
		strings.NewReader(`{"ttlSeconds":60}`), "Authorization", "Bearer tok")
	if e := wantEnvelope(t, resp, raw, http.StatusNotImplemented, api.CodeUnsupportedOperation); e.Details["operation"] != "ttl.renew" {
		t.Fatalf("details = %v", e.Details)
	}

	// A plugin that cannot even answer /info cannot be renewed through either.
	srv.Close()
	fresh, err := adapterhttp.NewClient(srv.URL, "tok")
	noErr(t, err)
	wantCode(t, fresh.RenewTTL(ctx, inst.Ref, 60), api.CodeProviderUnavailable)
}

// A plugin written in another language may declare ttlRenewal and still refuse the
// call; its answer is passed on, not hidden.
func TestTTLRenewalDeclaredButRefused(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/info") {
			_, _ = w.Write([]byte(`{"info":{"kind":"py","protocol":"1"},"capabilities":{"features":["exec"]},"ttlRenewal":true}`))
			return
		}
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write([]byte(`{"error":{"code":"unsupported_operation","message":"not today"}}`))
	})
	wantCode(t, c.RenewTTL(t.Context(), "a/b", 60), api.CodeUnsupportedOperation)
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 2 || paths[0] != "GET /adapter/v1/info" || paths[1] != "POST /adapter/v1/instances/a/b/ttl" {
		t.Fatalf("requests = %v, want /info then the ref's /ttl", paths)
	}
}
