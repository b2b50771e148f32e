package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/changes"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/sqlite"
	"github.com/different-ai/differently/server/tokens"
)

// forEachStore runs a test against a fresh SQLite file and a fresh PostgreSQL schema.
func forEachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.SchemaURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// testPools is a small pool manager: views built from the stored pools with real
// devhost and fake adapters, kept across refreshes so instances survive. The views
// are served by the shared test double, which tests change through Update.
type testPools struct {
	*poolstest.Pools
	st  store.Store
	clk clock.Clock

	// mu guards adapters, and lets one Refresh run at a time.
	mu       sync.Mutex
	adapters map[string]adapters.ExecutionAdapter
}

func newTestPools(st store.Store, clk clock.Clock) *testPools {
	return &testPools{Pools: poolstest.New(), st: st, clk: clk, adapters: map[string]adapters.ExecutionAdapter{}}
}

func (p *testPools) Refresh(ctx context.Context) error {
	stored, err := p.st.ListPools(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var views []pools.View
	for _, sp := range stored {
		v := pools.View{Pool: sp, Trust: sp.Trust, LastProbeAt: p.clk.Now()}
		a, ok := p.adapters[sp.Name]
		if !ok {
			switch sp.Adapter {
			case "devhost":
				a, err = devhost.FromConfig(sp.Config)
			case "fake":
				a, err = fake.FromConfig(sp.Config)
			default:
				err = api.Errorf(api.CodeInvalidRequest, "unknown kind %s", sp.Adapter)
			}
			if err != nil {
				v.LastError = err.Error()
				views = append(views, v)
				continue
			}
			p.adapters[sp.Name] = a
		}
		caps, _ := a.Capabilities(ctx)
		caps.Features = adapters.EffectiveFeatures(a, caps.Features)
		capacity, _ := a.Capacity(ctx)
		v.Adapter, v.Info, v.Capabilities, v.Capacity = a, a.Info(), caps, capacity
		v.Healthy = a.Health(ctx) == nil
		views = append(views, v)
	}
	p.Replace(views...)
	return nil
}

type countingWaker struct{ n atomic.Int64 }

func (w *countingWaker) Notify() { w.n.Add(1) }

func (w *countingWaker) Wake(store.State) { w.n.Add(1) }

// feed returns a change hub fed by st's change feed until the test ends.
func feed(t testing.TB, st store.Store) *changes.Hub {
	t.Helper()
	hub := changes.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hub.Run(ctx, st)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return hub
}

type stubReconciler struct{}

func (stubReconciler) ReconcileBy(context.Context, string) (reconcile.Report, error) {
	return reconcile.Report{Pools: []reconcile.PoolReport{{Pool: "fake", Lost: []string{"sbx_x"}}}}, nil
}

type env struct {
	t   *testing.T
	st  store.Store
	url string
	// handler is the API itself, for requests that need a context of their own.
	handler http.Handler
	admin   string
	pools   *testPools
	waker   *countingWaker
	clk     *clock.Manual
	inst    string
}

// noStreamFeatures is the fake's default list without exec.stream, for the buffered
// fallback.
func noStreamFeatures() []any {
	var out []any
	for _, f := range fake.DefaultFeatures() {
		if f != adapters.FeatureExecStream {
			out = append(out, f)
		}
	}
	return out
}

func newEnv(t *testing.T, st store.Store) *env {
	t.Helper()
	return newEnvWith(t, st, nil)
}

// newEnvWith is newEnv with a chance to change the API's options before it starts.
func newEnvWith(t *testing.T, st store.Store, change func(*httpapi.Options)) *env {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	e := &env{t: t, st: st, clk: clk, waker: &countingWaker{}}
	e.pools = newTestPools(st, clk)
	for _, p := range []store.Pool{
		// ignoreResources: the cost and quota tests ask devhost for resources it
		// cannot apply.
		{Name: "devhost", Adapter: "devhost", Trust: api.TrustPrivate, Config: map[string]any{"root": t.TempDir(), "ignoreResources": true},
			CostModel: store.CostModel{CPUHour: 1, MemoryGiBHour: 0.5}},
		{Name: "fake", Adapter: "fake", Trust: api.TrustPrivate},
		{Name: "nostream", Adapter: "fake", Trust: api.TrustPrivate, Config: map[string]any{"features": noStreamFeatures()}},
	} {
		if _, err := st.CreatePool(ctx, clk.Now(), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.pools.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	inst, err := st.InstallationID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.inst = inst
	e.admin = e.token(store.Token{Scope: store.ScopeAdmin, Name: "admin"})
	opts := httpapi.Options{
		Store: st, Pools: e.pools, Scheduler: e.waker, Changes: feed(t, st), Reconciler: stubReconciler{}, Clock: clk,
		Installation: inst, AdapterKinds: func() []string { return []string{"devhost", "fake"} },
		DevOnlyKinds: []string{"devhost"}, Dev: false,
	}
	if change != nil {
		change(&opts)
	}
	h, err := httpapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.url, e.handler = srv.URL, h
	return e
}

// token stores a token directly and returns its secret.
func (e *env) token(tok store.Token) string {
	e.t.Helper()
	secret, err := tokens.New()
	if err != nil {
		e.t.Fatal(err)
	}
	tok.ID, tok.Hash = ids.New("tok"), tokens.Hash(secret)
	if _, err := e.st.CreateToken(context.Background(), e.clk.Now(), tok); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

func (e *env) projectToken(org, project string) string {
	return e.token(store.Token{Scope: store.ScopeProject, Org: org, Project: project})
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	// Decoding into a reused value would keep fields the answer left out.
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError returns the envelope's error, failing when the answer is not one.
func (r response) apiError(t *testing.T) api.Error {
	t.Helper()
	var env struct{ Error *api.Error }
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope (%d): %s", r.status, r.body)
	}
	return *env.Error
}

func (e *env) do(secret, method, path string, body any) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	return e.request(secret, method, path, rd, nil)
}

func (e *env) request(secret, method, path string, body io.Reader, header http.Header) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// want checks the status and, for an error, the code.
func (r response) want(t *testing.T, status int, code ...api.Code) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if len(code) > 0 {
		if got := r.apiError(t).Code; got != code[0] {
			t.Fatalf("code %s, want %s: %s", got, code[0], r.body)
		}
	}
	return r
}

// createSandbox asks for a sandbox on one pool and returns it.
func (e *env) createSandbox(secret, pool string, extra map[string]any) httpapi.Sandbox {
	e.t.Helper()
	body := map[string]any{"placement": map[string]any{"allowedPools": []string{pool}}}
	maps.Copy(body, extra)
	var sb httpapi.Sandbox
	e.do(secret, "POST", "/v1/sandboxes", body).want(e.t, http.StatusAccepted).decode(e.t, &sb)
	return sb
}

// provision does what the scheduler would: create the instance on the sandbox's
// allowed pool and mark it running.
func (e *env) provision(id string) store.Sandbox {
	e.t.Helper()
	ctx := context.Background()
	sb, err := e.st.GetSandbox(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	pool := sb.Placement.AllowedPools[0]
	v, ok := e.pools.View(pool)
	if !ok {
		e.t.Fatalf("no view for %s", pool)
	}
	req := adapters.CreateRequest{ID: sb.ID, Installation: e.inst, Template: sb.Template, Resources: sb.Resources,
		Env: sb.Env, Labels: adapters.OwnershipLabels(sb.Labels, sb.ID, e.inst)}
	if sb.FromSnapshot != "" {
		sn, err := e.st.GetSnapshot(ctx, sb.FromSnapshot)
		if err != nil {
			e.t.Fatal(err)
		}
		req.FromSnapshot = sn.BackendRef
	}
	inst, err := v.Adapter.Create(ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := e.st.UpdateSandbox(ctx, id, e.clk.Now(), func(cur *store.Sandbox) error {
		cur.State, cur.Pool, cur.BackendRef = store.StateRunning, pool, inst.Ref
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// running creates a sandbox on pool and provisions it.
func (e *env) running(secret, pool string) store.Sandbox {
	e.t.Helper()
	return e.provision(e.createSandbox(secret, pool, nil).Id)
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// addPool registers a pool backed by a prepared adapter.
func (e *env) addPool(name string, a adapters.ExecutionAdapter) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.st.CreatePool(ctx, e.clk.Now(), store.Pool{Name: name, Adapter: "fake", Trust: api.TrustPrivate}); err != nil {
		e.t.Fatal(err)
	}
	e.pools.mu.Lock()
	e.pools.adapters[name] = a
	e.pools.mu.Unlock()
	if err := e.pools.Refresh(ctx); err != nil {
		e.t.Fatal(err)
	}
}
