package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type env struct {
	st  store.Store
	clk *clock.Manual
	reg *Registry
	m   *Manager
	ctx context.Context
}

// newEnv opens a real SQLite store; vars are what Getenv sees.
func newEnv(t *testing.T, reg *Registry, vars map[string]string) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "differently.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(t0)
	m := NewManager(st, reg, clk, Options{Getenv: func(k string) string { return vars[k] }})
	return &env{st: st, clk: clk, reg: reg, m: m, ctx: ctx}
}

func (e *env) create(t *testing.T, p store.Pool) store.Pool {
	t.Helper()
	out, err := e.st.CreatePool(e.ctx, e.clk.Now(), p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) refresh(t *testing.T) {
	t.Helper()
	if err := e.m.Refresh(e.ctx); err != nil {
		t.Fatal(err)
	}
}

func (e *env) view(t *testing.T, name string) View {
	t.Helper()
	v, ok := e.m.View(name)
	if !ok {
		t.Fatalf("no view for pool %q", name)
	}
	return v
}

// plain hides the fake's optional interfaces, so features it declares but no longer
// implements must be dropped from the view.
type plain struct{ adapters.ExecutionAdapter }

// handles is a registry kind "held" whose factory keeps every fake it builds.
type handles struct {
	mu    sync.Mutex
	built []*fake.Adapter
	cfg   fake.Config
}

func (h *handles) factory(_ context.Context, _ store.Pool, _ Credentials) (adapters.ExecutionAdapter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := fake.New(h.cfg)
	h.built = append(h.built, a)
	return a, nil
}

func (h *handles) last() *fake.Adapter {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.built[len(h.built)-1]
}

func (h *handles) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.built)
}

func TestLoadAndRefreshBuildViews(t *testing.T) {
	reg := DefaultRegistry(true)
	reg.Register("plain", func(context.Context, store.Pool, Credentials) (adapters.ExecutionAdapter, error) {
		return plain{fake.New(fake.Config{})}, nil
	}, false)
	e := newEnv(t, reg, nil)
	e.create(t, store.Pool{Name: "dev", Adapter: "devhost", Config: map[string]any{"root": t.TempDir()}})
	e.create(t, store.Pool{Name: "fk", Adapter: "fake", Trust: api.TrustExternal,
		Config: map[string]any{"features": []any{"exec", "files", "isolation.microvm"}, "totalCPU": 4}})
	e.create(t, store.Pool{Name: "bare", Adapter: "plain"})

	if err := e.m.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	views := e.m.Views()
	if names := viewNames(views); !slices.Equal(names, []string{"bare", "dev", "fk"}) {
		t.Fatalf("views after Load = %v", names)
	}
	for _, v := range views {
		if v.Adapter == nil || v.Healthy || !v.LastProbeAt.IsZero() {
			t.Errorf("%s after Load: adapter %v healthy %v probed %v; want built, not yet probed", v.Pool.Name, v.Adapter, v.Healthy, v.LastProbeAt)
		}
	}

	e.clk.Advance(time.Minute)
	e.refresh(t)
	for _, v := range e.m.Views() {
		if !v.Healthy || v.LastError != "" || !v.LastProbeAt.Equal(e.clk.Now()) {
			t.Errorf("%s after Refresh: healthy %v, error %q, probed %v", v.Pool.Name, v.Healthy, v.LastError, v.LastProbeAt)
		}
	}
	fk := e.view(t, "fk")
	if want := []string{"exec", "files", "isolation.microvm"}; !slices.Equal(fk.Capabilities.Features, want) {
		t.Errorf("fake features = %v, want %v", fk.Capabilities.Features, want)
	}
	if !fk.Capacity.Bounded || fk.Capacity.FreeCPU != 4 || fk.Info.Kind != "fake" || fk.Trust != api.TrustExternal {
		t.Errorf("fake view = capacity %+v, info %+v, trust %q", fk.Capacity, fk.Info, fk.Trust)
	}
	if !fk.Supports("files") || fk.Supports("fork") {
		t.Errorf("Supports disagrees with features %v", fk.Capabilities.Features)
	}
	if bare := e.view(t, "bare"); !slices.Equal(bare.Capabilities.Features, []string{"exec"}) {
		t.Errorf("features of an adapter without optional interfaces = %v, want [exec]", bare.Capabilities.Features)
	}
	dev := e.view(t, "dev")
	if dev.Trust != api.TrustPrivate || !dev.Supports(adapters.FeatureExecStream) {
		t.Errorf("devhost view: trust %q (adapter's claim fills an empty pool trust), features %v", dev.Trust, dev.Capabilities.Features)
	}

	// Views are copies.
	views = e.m.Views()
	views[2].Capabilities.Features[0] = "mutated"
	if e.view(t, "fk").Capabilities.Features[0] != "exec" {
		t.Error("a caller's change to a view reached the manager")
	}
}

func TestUnknownKindIsListedUnhealthy(t *testing.T) {
	e := newEnv(t, DefaultRegistry(false), nil)
	e.create(t, store.Pool{Name: "os", Adapter: "firecracker", Trust: api.TrustPrivate})
	e.create(t, store.Pool{Name: "dev", Adapter: "fake"})
	e.refresh(t)
	for name, want := range map[string]string{
		"os":  `adapter kind "firecracker" is not in this build`,
		"dev": "adapter fake is only allowed in development mode (--dev)",
	} {
		v := e.view(t, name)
		if v.Adapter != nil || v.Healthy || v.LastError != want {
			t.Errorf("%s: adapter %v healthy %v error %q; want no adapter, unhealthy, %q", name, v.Adapter, v.Healthy, v.LastError, want)
		}
		if v.Supports(adapters.FeatureExec) {
			t.Errorf("%s: a pool without an adapter supports exec", name)
		}
		// Only a kind this build lacks is missing for good; a dev-only kind outside
		// dev mode is a configuration to change.
		if v.KindMissing != (name == "os") {
			t.Errorf("%s: KindMissing %v", name, v.KindMissing)
		}
	}
}

// A pool loaded but not yet probed says so, and stops saying it once its adapter
// has answered Capabilities: placement waits for it meanwhile.
func TestAwaitingProbeUntilCapabilitiesAnswer(t *testing.T) {
	e := newEnv(t, DefaultRegistry(true), nil)
	e.create(t, store.Pool{Name: "fk", Adapter: "fake"})
	if err := e.m.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	if v := e.view(t, "fk"); !v.AwaitingProbe || v.Adapter == nil {
		t.Fatalf("loaded: awaiting %v, adapter %v", v.AwaitingProbe, v.Adapter)
	}
	e.refresh(t)
	if v := e.view(t, "fk"); v.AwaitingProbe || len(v.Capabilities.Features) == 0 {
		t.Fatalf("probed: awaiting %v, features %v", v.AwaitingProbe, v.Capabilities.Features)
	}
}

func TestHealthFailureAndRecovery(t *testing.T) {
	h := &handles{cfg: fake.Config{HealthError: true}}
	reg := NewRegistry(false)
	reg.Register("held", h.factory, false)
	e := newEnv(t, reg, nil)
	e.create(t, store.Pool{Name: "p", Adapter: "held"})

	e.refresh(t)
	if v := e.view(t, "p"); v.Healthy || !strings.Contains(v.LastError, "fake: injected health failure") {
		t.Fatalf("with a health error: healthy %v, error %q", v.Healthy, v.LastError)
	}
	h.last().SetHealthError(false)
	e.refresh(t)
	if v := e.view(t, "p"); !v.Healthy || v.LastError != "" {
		t.Fatalf("after recovery: healthy %v, error %q", v.Healthy, v.LastError)
	}
	if h.count() != 1 {
		t.Errorf("adapter built %d times for an unchanged pool, want 1", h.count())
	}

	e.m.MarkUnhealthy("p", adapters.Unavailable("backend down"))
	if v := e.view(t, "p"); v.Healthy || !strings.Contains(v.LastError, "backend down") {
		t.Fatalf("after MarkUnhealthy: healthy %v, error %q", v.Healthy, v.LastError)
	}
	e.m.MarkUnhealthy("no-such-pool", errors.New("ignored"))
	e.refresh(t)
	if v := e.view(t, "p"); !v.Healthy {
		t.Fatalf("a good probe after MarkUnhealthy left the pool unhealthy: %q", v.LastError)
	}
}

// blockingHealth lets a test hold a probe in Health.
type blockingHealth struct {
	adapters.ExecutionAdapter
	entered chan struct{}
	release chan struct{}
}

func (b *blockingHealth) Health(ctx context.Context) error {
	if b.entered == nil {
		return nil
	}
	b.entered <- struct{}{}
	<-b.release
	return nil
}

func TestMarkDuringProbeWinsAndReadersAreNotBlocked(t *testing.T) {
	slow := &blockingHealth{ExecutionAdapter: fake.New(fake.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	reg := NewRegistry(false)
	reg.Register("slow", func(context.Context, store.Pool, Credentials) (adapters.ExecutionAdapter, error) { return slow, nil }, false)
	e := newEnv(t, reg, nil)
	e.create(t, store.Pool{Name: "p", Adapter: "slow"})

	done := make(chan error, 1)
	go func() { done <- e.m.Refresh(e.ctx) }()
	<-slow.entered
	// The probe is stuck in Health; readers and the scheduler's mark go through.
	if len(e.m.Views()) != 1 {
		t.Fatal("Views during a probe")
	}
	e.m.MarkUnhealthy("p", errors.New("create failed: provider_unavailable"))
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := e.view(t, "p"); v.Healthy || v.LastError != "create failed: provider_unavailable" {
		t.Fatalf("a probe that began before MarkUnhealthy cleared it: healthy %v, error %q", v.Healthy, v.LastError)
	}
	slow.entered = nil // the next probe answers at once
	e.refresh(t)
	if v := e.view(t, "p"); !v.Healthy {
		t.Fatalf("the next good probe did not clear the mark: %q", v.LastError)
	}
}

func TestPoolsAddedChangedRemoved(t *testing.T) {
	h := &handles{}
	reg := NewRegistry(false)
	reg.Register("held", h.factory, false)
	e := newEnv(t, reg, nil)
	e.create(t, store.Pool{Name: "a", Adapter: "held"})
	e.refresh(t)

	b := e.create(t, store.Pool{Name: "b", Adapter: "held", Region: "r1"})
	e.refresh(t)
	if names := viewNames(e.m.Views()); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("after adding b: %v", names)
	}
	before := e.view(t, "b").Adapter

	e.refresh(t)
	if e.view(t, "b").Adapter != before || h.count() != 2 {
		t.Fatalf("an unchanged pool was rebuilt (%d builds)", h.count())
	}

	b.Config = map[string]any{"totalCPU": 4}
	if _, err := e.st.UpdatePool(e.ctx, e.clk.Now(), b); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	v := e.view(t, "b")
	if v.Adapter == before || v.Pool.Config["totalCPU"] != float64(4) || v.Pool.Version != b.Version+1 || h.count() != 3 || !v.Healthy {
		t.Fatalf("after changing b's config: same adapter %v, config %v, version %d, builds %d, healthy %v",
			v.Adapter == before, v.Pool.Config, v.Pool.Version, h.count(), v.Healthy)
	}

	if err := e.st.DeletePool(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	if names := viewNames(e.m.Views()); !slices.Equal(names, []string{"b"}) {
		t.Fatalf("after removing a: %v", names)
	}
	if _, ok := e.m.View("a"); ok {
		t.Fatal("View of a removed pool")
	}
}

// leaky fails in ways that quote its secret, as a careless adapter might.
type leaky struct {
	adapters.ExecutionAdapter
	secret string
}

func (l *leaky) Health(context.Context) error {
	return adapters.Unavailable("login with key %s refused", l.secret)
}

func TestCredentials(t *testing.T) {
	const secret = "s3cr3t-token-value"
	reg := NewRegistry(false)
	reg.Register("leaky", func(_ context.Context, _ store.Pool, c Credentials) (adapters.ExecutionAdapter, error) {
		return &leaky{fake.New(fake.Config{}), c.Secret()}, nil
	}, false)
	reg.Register("leaky-build", func(_ context.Context, _ store.Pool, c Credentials) (adapters.ExecutionAdapter, error) {
		return nil, fmt.Errorf("bad key %q", c.Secret())
	}, false)
	e := newEnv(t, reg, map[string]string{"LEAKY_TOKEN": secret})
	e.create(t, store.Pool{Name: "missing", Adapter: "leaky", CredentialsEnv: "MISSING_TOKEN"})
	e.create(t, store.Pool{Name: "probe", Adapter: "leaky", CredentialsEnv: "LEAKY_TOKEN"})
	e.create(t, store.Pool{Name: "build", Adapter: "leaky-build", CredentialsEnv: "LEAKY_TOKEN"})
	e.refresh(t)

	if v := e.view(t, "missing"); v.Adapter != nil || !strings.Contains(v.LastError, "MISSING_TOKEN") {
		t.Errorf("missing variable: adapter %v, error %q; want the variable named", v.Adapter, v.LastError)
	}
	for _, name := range []string{"probe", "build"} {
		if v := e.view(t, name); !strings.Contains(v.LastError, "[redacted]") {
			t.Errorf("%s: error %q, want the secret replaced", name, v.LastError)
		}
	}
	e.m.MarkUnhealthy("probe", errors.New("create said "+secret))
	if got := fmt.Sprintf("%+v", e.m.Views()); strings.Contains(got, secret) {
		t.Errorf("the secret appears in the views: %s", got)
	}
	c := NewCredentials("LEAKY_TOKEN", secret)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), c.LogValue().String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, "LEAKY_TOKEN") {
			t.Errorf("Credentials printed as %q", s)
		}
	}
}

func TestRemotePool(t *testing.T) {
	backend := fake.New(fake.Config{Features: []string{"exec", "files", "arch.arm64"}})
	srv := httptest.NewServer(adapterhttp.Handler(backend, "plugin-token"))
	t.Cleanup(srv.Close)

	e := newEnv(t, DefaultRegistry(false), map[string]string{"GOOD": "plugin-token", "BAD": "wrong-token"})
	e.create(t, store.Pool{Name: "lab", Adapter: "remote", CredentialsEnv: "GOOD",
		Config: map[string]any{"endpoint": srv.URL, "timeoutSeconds": 30}})
	e.create(t, store.Pool{Name: "badtoken", Adapter: "remote", CredentialsEnv: "BAD", Config: map[string]any{"endpoint": srv.URL}})
	e.create(t, store.Pool{Name: "typo", Adapter: "remote", Config: map[string]any{"endpoint": srv.URL, "endpiont": "x"}})
	e.create(t, store.Pool{Name: "noendpoint", Adapter: "remote"})
	e.create(t, store.Pool{Name: "badurl", Adapter: "remote", Config: map[string]any{"endpoint": "ftp://x"}})
	e.create(t, store.Pool{Name: "badtimeout", Adapter: "remote", Config: map[string]any{"endpoint": srv.URL, "timeoutSeconds": 1.5}})
	e.refresh(t)

	v := e.view(t, "lab")
	if !v.Healthy || v.LastError != "" {
		t.Fatalf("remote pool: healthy %v, error %q", v.Healthy, v.LastError)
	}
	if want := []string{"arch.arm64", "exec", "files"}; !slices.Equal(v.Capabilities.Features, want) {
		t.Errorf("remote features = %v, want %v", v.Capabilities.Features, want)
	}
	if v.Info.Kind != "fake" || v.Trust != api.TrustPrivate {
		t.Errorf("remote info %+v trust %q: want the plugin's info, and private trust from the fake's claim", v.Info, v.Trust)
	}
	if v := e.view(t, "badtoken"); v.Healthy || !strings.Contains(v.LastError, "credentials") || strings.Contains(v.LastError, "wrong-token") {
		t.Errorf("wrong token: healthy %v, error %q", v.Healthy, v.LastError)
	}
	for name, want := range map[string]string{
		"typo":       `unknown key "endpiont"`,
		"noendpoint": `"endpoint": required`,
		"badurl":     "must be an http or https URL",
		"badtimeout": `"timeoutSeconds": must be a whole number`,
	} {
		if v := e.view(t, name); v.Adapter != nil || !strings.Contains(v.LastError, want) {
			t.Errorf("%s: error %q, want it to contain %q", name, v.LastError, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	prod, dev := DefaultRegistry(false), DefaultRegistry(true)
	if want := []string{"daytona", "devhost", "fake", "freestyle", "local", "opensandbox", "remote"}; !slices.Equal(prod.Kinds(), want) || !slices.Equal(dev.Kinds(), want) {
		t.Errorf("Kinds = %v / %v, want %v", prod.Kinds(), dev.Kinds(), want)
	}
	if want := []string{"devhost", "fake"}; !slices.Equal(prod.DevOnlyKinds(), want) || !slices.Equal(dev.DevOnlyKinds(), want) {
		t.Errorf("DevOnlyKinds = %v / %v, want %v", prod.DevOnlyKinds(), dev.DevOnlyKinds(), want)
	}
	ctx := t.Context()
	if _, err := prod.Build(ctx, store.Pool{Name: "f", Adapter: "fake"}, Env{}); err == nil ||
		!strings.Contains(err.Error(), "adapter fake is only allowed in development mode (--dev)") {
		t.Errorf("fake outside dev: %v", err)
	}
	if a, err := dev.Build(ctx, store.Pool{Name: "f", Adapter: "fake"}, Env{}); err != nil || a.Info().Kind != "fake" {
		t.Errorf("fake in dev: %v", err)
	}
	if _, err := dev.Build(ctx, store.Pool{Name: "k", Adapter: "kubevirt"}, Env{}); err == nil ||
		!strings.Contains(err.Error(), `adapter kind "kubevirt" is not in this build`) {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := dev.Build(ctx, store.Pool{Name: "d", Adapter: "daytona"}, Env{}); err == nil ||
		!strings.Contains(err.Error(), "needs an API key") {
		t.Errorf("daytona without a key: %v", err)
	}
	_, err := dev.Build(ctx, store.Pool{Name: "f", Adapter: "fake", CredentialsEnv: "FAKE_KEY"},
		Env{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "FAKE_KEY") || api.AsError(err).Code != api.CodeInvalidRequest {
		t.Errorf("missing credentials: %v", err)
	}
	// A pool stored naming one of the daemon's own variables is never given it.
	read := false
	_, err = dev.Build(ctx, store.Pool{Name: "f", Adapter: "fake", CredentialsEnv: "DIFFERENTLY_DATABASE_URL"},
		Env{Getenv: func(string) string { read = true; return "postgres://u:pw@db/x" }})
	if err == nil || read || strings.Contains(err.Error(), "pw@") || api.AsError(err).Code != api.CodeInvalidRequest {
		t.Errorf("credentials from the daemon's own variable: read %v, %v", read, err)
	}
}

func TestRunRefreshesUntilCancelled(t *testing.T) {
	probed := &blockingHealth{ExecutionAdapter: fake.New(fake.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	close(probed.release)
	reg := NewRegistry(false)
	reg.Register("k", func(context.Context, store.Pool, Credentials) (adapters.ExecutionAdapter, error) { return probed, nil }, false)
	e := newEnv(t, reg, nil)
	e.m.opts.RefreshInterval = time.Millisecond
	e.create(t, store.Pool{Name: "p", Adapter: "k"})

	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.m.Run(ctx)
	}()
	for range 2 { // two ticks' probes
		select {
		case <-probed.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("Run never probed the pool")
		}
	}
	cancel()
	// A probe may be waiting to report in; drain until Run returns.
	for {
		select {
		case <-probed.entered:
			continue
		case <-done:
		}
		break
	}
	if _, ok := e.m.View("p"); !ok {
		t.Error("Run did not load the pool")
	}
}

func viewNames(vs []View) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Pool.Name
	}
	return out
}

// With the operator's allowlist set, a stored pool naming another variable (created
// before the list was tightened) is not built: its view says why, naming the
// variable, and the variable is never read, so its value can reach no backend, log
// line or error. A pool the list allows is built as before.
func TestCredentialsAllowlist(t *testing.T) {
	const secret = "s3cr3t-aws-value"
	var mu sync.Mutex
	var read []string
	getenv := func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		read = append(read, k)
		return map[string]string{"AWS_SECRET_ACCESS_KEY": secret, "LAB_TOKEN": "lab-value"}[k]
	}
	allowed, err := api.NewEnvAllowlist([]string{"DAYTONA_*", "LAB_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var logMu sync.Mutex
	e := newEnv(t, DefaultRegistry(true), nil)
	e.m = NewManager(e.st, e.reg, e.clk, Options{Getenv: getenv, AllowedCredentialsEnv: allowed,
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return logs.Write(p)
		}), nil))})
	e.create(t, store.Pool{Name: "allowed", Adapter: "fake", CredentialsEnv: "LAB_TOKEN"})
	e.create(t, store.Pool{Name: "tightened", Adapter: "fake", CredentialsEnv: "AWS_SECRET_ACCESS_KEY"})
	e.refresh(t)
	e.refresh(t) // a pool that failed to build is tried again: still not read

	if v := e.view(t, "allowed"); v.Adapter == nil || !v.Healthy {
		t.Fatalf("allowed pool: %+v", v)
	}
	v := e.view(t, "tightened")
	if v.Adapter != nil || !strings.Contains(v.LastError, `"AWS_SECRET_ACCESS_KEY"`) ||
		!strings.Contains(v.LastError, "poolCredentials.allowedEnv") {
		t.Fatalf("pool off the list: adapter %v, error %q", v.Adapter, v.LastError)
	}
	mu.Lock()
	if slices.Contains(read, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("the refused variable was read: %v", read)
	}
	mu.Unlock()
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "pool=tightened") || strings.Contains(logs.String(), secret) {
		t.Errorf("log of the refused pool:\n%s", logs.String())
	}

	_, err = e.reg.Build(e.ctx, store.Pool{Name: "x", Adapter: "fake", CredentialsEnv: "AWS_SECRET_ACCESS_KEY"},
		Env{Getenv: getenv, Allowed: allowed})
	if err == nil || api.AsError(err).Code != api.CodeInvalidRequest || strings.Contains(err.Error(), secret) {
		t.Fatalf("Build of a pool off the list: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A change the adapter never sees keeps the adapter, and so the instances a fake
// holds in memory: a sandbox running there must stay reachable after an operator
// raises the pool's maxConcurrency. A change of config still rebuilds it.
func TestChangesOutsideTheBackendKeepTheAdapter(t *testing.T) {
	h := &handles{}
	reg := NewRegistry(false)
	reg.Register("held", h.factory, false)
	e := newEnv(t, reg, nil)
	p := e.create(t, store.Pool{Name: "ci", Adapter: "held", Trust: api.TrustPrivate, Config: map[string]any{"totalCPU": 8}})
	e.refresh(t)
	a := e.view(t, "ci").Adapter
	inst, err := a.Create(e.ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "inst"})
	if err != nil {
		t.Fatal(err)
	}

	changes := []func(*store.Pool){
		func(p *store.Pool) { p.MaxConcurrency = 10 },
		func(p *store.Pool) { p.MaxStarting = 3 },
		func(p *store.Pool) { p.CostModel.CPUHour = 0.5 },
		func(p *store.Pool) { p.Region = "eu" },
		func(p *store.Pool) { p.Trust = api.TrustExternal },
		func(p *store.Pool) { p.Features = []string{"exec"} },
	}
	for i, change := range changes {
		change(&p)
		var err error
		if p, err = e.st.UpdatePool(e.ctx, e.clk.Now(), p); err != nil {
			t.Fatal(err)
		}
		e.refresh(t)
		v := e.view(t, "ci")
		if v.Adapter != a || h.count() != 1 {
			t.Fatalf("change %d rebuilt the adapter (%d builds)", i, h.count())
		}
		if v.Pool.Version != p.Version || !v.Healthy {
			t.Fatalf("change %d: view at version %d (want %d), healthy %v", i, v.Pool.Version, p.Version, v.Healthy)
		}
		if _, err := v.Adapter.Get(e.ctx, inst.Ref); err != nil {
			t.Fatalf("change %d lost the instance: %v", i, err)
		}
	}
	v := e.view(t, "ci")
	if v.Pool.MaxConcurrency != 10 || v.Pool.Region != "eu" || v.Trust != api.TrustExternal || v.Pool.CostModel.CPUHour != 0.5 {
		t.Fatalf("the view did not take the changes: %+v, trust %s", v.Pool, v.Trust)
	}

	p.Config = map[string]any{"totalCPU": 16}
	if _, err := e.st.UpdatePool(e.ctx, e.clk.Now(), p); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	if e.view(t, "ci").Adapter == a || h.count() != 2 {
		t.Fatalf("a config change kept the adapter (%d builds)", h.count())
	}
}

func TestRebuildsAdapter(t *testing.T) {
	base := store.Pool{Name: "p", Adapter: "fake", Config: map[string]any{"totalCPU": float64(4)}, CredentialsEnv: "K"}
	for _, c := range []struct {
		name   string
		change func(*store.Pool)
		want   bool
	}{
		{"nothing", func(*store.Pool) {}, false},
		{"maxConcurrency", func(p *store.Pool) { p.MaxConcurrency = 3 }, false},
		{"version", func(p *store.Pool) { p.Version = 9 }, false},
		{"adapter", func(p *store.Pool) { p.Adapter = "devhost" }, true},
		{"config value", func(p *store.Pool) { p.Config = map[string]any{"totalCPU": float64(8)} }, true},
		{"config key", func(p *store.Pool) { p.Config = map[string]any{"totalCPU": float64(4), "x": true} }, true},
		{"credentials", func(p *store.Pool) { p.CredentialsEnv = "OTHER" }, true},
	} {
		next := base
		next.Config = maps.Clone(base.Config)
		c.change(&next)
		if got := RebuildsAdapter(base, next); got != c.want {
			t.Errorf("%s: RebuildsAdapter = %v, want %v", c.name, got, c.want)
		}
	}
	if RebuildsAdapter(store.Pool{}, store.Pool{Config: map[string]any{}}) {
		t.Error("an empty config and none differ")
	}
}

// A pool's breaker lives as long as its adapter: a change that keeps the adapter
// keeps the breaker open, one that rebuilds it starts closed, and the outcome of a
// Create begun on the old adapter is dropped. A passing probe never closes it.
func TestBreakerFollowsTheAdapter(t *testing.T) {
	h := &handles{}
	reg := NewRegistry(false)
	reg.Register("held", h.factory, false)
	e := newEnv(t, reg, nil)
	p := e.create(t, store.Pool{Name: "p", Adapter: "held"})
	e.refresh(t)
	open := func() {
		t.Helper()
		for range DefaultBreakerThreshold {
			tk, ok := e.m.BeginCreate("p")
			if !ok {
				t.Fatal("a closed breaker refused a create")
			}
			e.m.EndCreate(tk, CreateOutage, adapters.Unavailable("down"))
		}
		if v := e.view(t, "p"); v.Breaker.State != BreakerOpen {
			t.Fatalf("breaker after %d outages: %+v", DefaultBreakerThreshold, v.Breaker)
		}
		if _, ok := e.m.BeginCreate("p"); ok {
			t.Fatal("an open breaker let a create through")
		}
	}
	open()
	e.refresh(t)
	if v := e.view(t, "p"); !v.Healthy || v.Breaker.State != BreakerOpen {
		t.Fatalf("after a passing probe: healthy %v, breaker %+v", v.Healthy, v.Breaker)
	}

	p.MaxConcurrency = 5
	var err error
	if p, err = e.st.UpdatePool(e.ctx, e.clk.Now(), p); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	if v := e.view(t, "p"); v.Breaker.State != BreakerOpen {
		t.Fatalf("a change that keeps the adapter closed the breaker: %+v", v.Breaker)
	}

	e.clk.Advance(DefaultBreakerCoolDown)
	trial, ok := e.m.BeginCreate("p")
	if !ok {
		t.Fatal("no trial after the cool-down")
	}
	p.Config = map[string]any{"x": 1}
	if _, err := e.st.UpdatePool(e.ctx, e.clk.Now(), p); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	if v := e.view(t, "p"); v.Breaker.State != BreakerClosed {
		t.Fatalf("a rebuilt adapter kept the breaker: %+v", v.Breaker)
	}
	e.m.EndCreate(trial, CreateOutage, adapters.Unavailable("down"))
	if v := e.view(t, "p"); v.Breaker.ConsecutiveFailures != 0 {
		t.Fatalf("the old adapter's outcome counted: %+v", v.Breaker)
	}
	if _, ok := e.m.BeginCreate("nope"); ok {
		t.Fatal("a create let through to a pool that does not exist")
	}
}
