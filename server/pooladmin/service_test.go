package pooladmin_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pooladmin"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

const installation = "inst_test"

// fakePools serves fixed views and counts the refreshes asked of it.
type fakePools struct {
	views     map[string]pools.View
	refreshes int
}

func (p *fakePools) Views() []pools.View {
	out := make([]pools.View, 0, len(p.views))
	for _, v := range p.views {
		out = append(out, v)
	}
	return out
}

func (p *fakePools) View(name string) (pools.View, bool) {
	v, ok := p.views[name]
	return v, ok
}

func (p *fakePools) Refresh(context.Context) error {
	p.refreshes++
	return nil
}

// notifies counts the wake-ups of the scheduler.
type notifies int

func (n *notifies) Notify() { *n++ }

type fixture struct {
	svc     *pooladmin.Service
	st      store.Store
	pools   *fakePools
	notify  *notifies
	clk     *clock.Manual
	adapter *fake.Adapter
}

// newFixture builds a service on a fresh SQLite store holding one API pool, "fake",
// built on a fake adapter made with cfg; the build knows the kinds fake and devhost,
// devhost for development only. A config with the key "bad" is refused, and
// credentials variables must match DAYTONA_*.
func newFixture(t *testing.T, cfg fake.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	pool, err := st.CreatePool(ctx, clk.Now(), store.Pool{Name: "fake", Adapter: "fake", Trust: api.TrustPrivate, Source: store.PoolFromAPI})
	if err != nil {
		t.Fatal(err)
	}
	a := fake.New(cfg)
	fp := &fakePools{views: map[string]pools.View{
		"fake": {Pool: pool, Adapter: a, Info: a.Info(), Trust: api.TrustPrivate, Healthy: true},
	}}
	allowed, err := api.NewEnvAllowlist([]string{"DAYTONA_*"})
	if err != nil {
		t.Fatal(err)
	}
	n := new(notifies)
	svc, err := pooladmin.New(pooladmin.Options{
		Store: st, Pools: fp, Scheduler: n, Installation: installation,
		AdapterKinds: func() []string { return []string{"fake", "devhost"} }, DevOnlyKinds: []string{"devhost"},
		CheckConfig: func(_ context.Context, kind string, cfg map[string]any) error {
			if _, ok := cfg["bad"]; ok {
				return api.Errorf(api.CodeInvalidRequest, "%s: unknown config key bad", kind)
			}
			return nil
		},
		AllowedCredentialsEnv: allowed, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, st: st, pools: fp, notify: n, clk: clk, adapter: a}
}

// sandbox stores a sandbox of pool in state, with an instance of the fake adapter
// behind it when withInstance.
func (f *fixture) sandbox(t *testing.T, id, pool string, state store.State, withInstance bool) store.Sandbox {
	t.Helper()
	ctx := context.Background()
	sb := store.Sandbox{ID: id, Org: "acme", Project: "web", Pool: pool, State: state}
	if withInstance {
		inst, err := f.adapter.Create(ctx, adapters.CreateRequest{ID: id, Installation: installation})
		if err != nil {
			t.Fatal(err)
		}
		sb.BackendRef = inst.Ref
	}
	out, _, err := f.st.CreateSandbox(ctx, f.clk.Now(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) instances(t *testing.T) int {
	t.Helper()
	insts, err := f.adapter.List(context.Background(), installation)
	if err != nil {
		t.Fatal(err)
	}
	return len(insts)
}

var admin = sandboxes.Caller{TokenID: "tok_admin", Admin: true}

// wantCode fails unless err carries code ("" wants no error).
func wantCode(t *testing.T, err error, code api.Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("err = %v, want none", err)
		}
		return
	}
	if !api.IsCode(err, code) {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

func detail(t *testing.T, err error, key string) any {
	t.Helper()
	e := api.AsError(err)
	if e == nil {
		t.Fatalf("err = %v, not an *api.Error", err)
	}
	return e.Details[key]
}

func TestCreate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pool   store.Pool
		dev    bool
		code   api.Code
		detail string // a key the error's details must hold
	}{
		{name: "a pool", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: api.TrustPrivate, MaxConcurrency: 2,
			Features: []string{"isolation.none"}, CredentialsEnv: "DAYTONA_KEY"}},
		{name: "bad name", pool: store.Pool{Name: "Not_A_Pool", Adapter: "fake", Trust: api.TrustPrivate}, code: api.CodeInvalidRequest},
		{name: "bad trust", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: "shared"}, code: api.CodeInvalidRequest},
		{name: "negative concurrency", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: api.TrustPrivate, MaxStarting: -1},
			code: api.CodeInvalidRequest},
		{name: "negative price", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: api.TrustPrivate,
			CostModel: store.CostModel{CPUHour: -0.1}}, code: api.CodeInvalidRequest},
		{name: "credentials outside the allowlist", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: api.TrustPrivate,
			CredentialsEnv: "AWS_SECRET_ACCESS_KEY"}, code: api.CodeInvalidRequest, detail: "env"},
		{name: "unknown declared feature", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: api.TrustPrivate,
			Features: []string{"teleport"}}, code: api.CodeInvalidRequest, detail: "unknown"},
		{name: "unknown kind", pool: store.Pool{Name: "extra", Adapter: "nope", Trust: api.TrustPrivate},
			code: api.CodeInvalidRequest, detail: "known"},
		{name: "development kind", pool: store.Pool{Name: "extra", Adapter: "devhost", Trust: api.TrustPrivate},
			code: api.CodeInvalidRequest},
		{name: "development kind in dev mode", pool: store.Pool{Name: "extra", Adapter: "devhost", Trust: api.TrustPrivate}, dev: true},
		{name: "config its kind refuses", pool: store.Pool{Name: "extra", Adapter: "fake", Trust: api.TrustPrivate,
			Config: map[string]any{"bad": true}}, code: api.CodeInvalidRequest},
		{name: "name taken", pool: store.Pool{Name: "fake", Adapter: "fake", Trust: api.TrustPrivate}, code: api.CodeInvalidState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fake.Config{})
			if tc.dev {
				// The fixture's service is not in dev mode; build one that is.
				var err error
				f.svc, err = pooladmin.New(pooladmin.Options{Store: f.st, Pools: f.pools, Scheduler: f.notify,
					AdapterKinds: func() []string { return []string{"devhost"} }, DevOnlyKinds: []string{"devhost"}, Dev: true, Clock: f.clk})
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := f.svc.Create(context.Background(), tc.pool)
			wantCode(t, err, tc.code)
			if tc.code != "" {
				if tc.detail != "" && detail(t, err, tc.detail) == nil {
					t.Fatalf("err = %v, want details.%s", err, tc.detail)
				}
				if _, gerr := f.st.GetPool(context.Background(), tc.pool.Name); tc.pool.Name != "fake" && !api.IsCode(gerr, api.CodeNotFound) {
					t.Fatalf("refused pool stored: %v", gerr)
				}
				if *f.notify != 0 || f.pools.refreshes != 0 {
					t.Fatalf("refused create woke %d, refreshed %d", *f.notify, f.pools.refreshes)
				}
				return
			}
			if got.Pool.Source != store.PoolFromAPI || got.Pool.Name != tc.pool.Name || got.Pool.Version == 0 || got.View != nil {
				t.Fatalf("created %+v", got)
			}
			if *f.notify != 1 || f.pools.refreshes != 1 {
				t.Fatalf("create woke %d, refreshed %d; want 1 and 1", *f.notify, f.pools.refreshes)
			}
		})
	}
}

func TestCreateOverConfigPool(t *testing.T) {
	f := newFixture(t, fake.Config{})
	ctx := context.Background()
	if _, err := f.st.CreatePool(ctx, f.clk.Now(), store.Pool{Name: "filed", Adapter: "fake", Trust: api.TrustPrivate, Source: store.PoolFromConfig}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Create(ctx, store.Pool{Name: "filed", Adapter: "fake", Trust: api.TrustPrivate})
	want := store.ConfigPool("filed")
	if e := api.AsError(err); e == nil || e.Code != want.Code || e.Message != want.Message {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

func TestUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pool    string
		replace *store.Pool
		change  func(p store.Pool) store.Pool
		code    api.Code
		rebuilt bool
		check   func(t *testing.T, p store.Pool)
	}{
		{name: "limits", pool: "fake", change: func(p store.Pool) store.Pool { p.MaxConcurrency = 3; return p },
			check: func(t *testing.T, p store.Pool) {
				if p.MaxConcurrency != 3 || p.Source != store.PoolFromAPI {
					t.Fatalf("updated %+v", p)
				}
			}},
		{name: "config rebuilds the adapter", pool: "fake", rebuilt: true,
			change: func(p store.Pool) store.Pool { p.Config = map[string]any{"totalCPU": 4}; return p }},
		{name: "credentials rebuild the adapter", pool: "fake", rebuilt: true,
			change: func(p store.Pool) store.Pool { p.CredentialsEnv = "DAYTONA_KEY"; return p }},
		{name: "name and version are the stored ones", pool: "fake",
			change: func(p store.Pool) store.Pool {
				p.Name, p.Version, p.Source = "other", 99, store.PoolFromConfig
				return p
			},
			check: func(t *testing.T, p store.Pool) {
				if p.Name != "fake" || p.Version != 2 || p.Source != store.PoolFromAPI {
					t.Fatalf("updated %+v", p)
				}
			}},
		{name: "negative limit", pool: "fake", change: func(p store.Pool) store.Pool { p.MaxConcurrency = -1; return p },
			code: api.CodeInvalidRequest},
		{name: "unknown declared feature", pool: "fake", change: func(p store.Pool) store.Pool { p.Features = []string{"teleport"}; return p },
			code: api.CodeInvalidRequest},
		{name: "config its kind refuses", pool: "fake", change: func(p store.Pool) store.Pool { p.Config = map[string]any{"bad": 1}; return p },
			code: api.CodeInvalidRequest},
		{name: "missing pool", pool: "nope", change: func(p store.Pool) store.Pool { return p }, code: api.CodeNotFound},
		{name: "config file's pool", pool: "filed", change: func(p store.Pool) store.Pool { return p }, code: api.CodeInvalidState},
		{name: "replace", pool: "fake", replace: &store.Pool{Name: "fake", Adapter: "fake", Trust: api.TrustExternal},
			check: func(t *testing.T, p store.Pool) {
				if p.Trust != api.TrustExternal {
					t.Fatalf("replaced %+v", p)
				}
			}},
		{name: "replace renames", pool: "fake", replace: &store.Pool{Name: "other", Adapter: "fake", Trust: api.TrustPrivate},
			code: api.CodeInvalidRequest},
		{name: "replace changes the kind", pool: "fake", replace: &store.Pool{Name: "fake", Adapter: "devhost", Trust: api.TrustPrivate},
			code: api.CodeInvalidRequest},
		{name: "replace of the config file's pool", pool: "filed", replace: &store.Pool{Name: "filed", Adapter: "fake", Trust: api.TrustPrivate},
			code: api.CodeInvalidState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fake.Config{})
			ctx := context.Background()
			if _, err := f.st.CreatePool(ctx, f.clk.Now(), store.Pool{Name: "filed", Adapter: "fake", Trust: api.TrustPrivate, Source: store.PoolFromConfig}); err != nil {
				t.Fatal(err)
			}
			before, _ := f.st.GetPool(ctx, tc.pool)
			var (
				got     pooladmin.Pool
				rebuilt bool
				err     error
			)
			if tc.replace != nil {
				got, rebuilt, err = f.svc.Replace(ctx, tc.pool, *tc.replace)
			} else {
				got, rebuilt, err = f.svc.Update(ctx, tc.pool, func(p store.Pool) (store.Pool, error) { return tc.change(p), nil })
			}
			wantCode(t, err, tc.code)
			if tc.code != "" {
				if after, _ := f.st.GetPool(ctx, tc.pool); after.Version != before.Version {
					t.Fatalf("refused update stored version %d (was %d)", after.Version, before.Version)
				}
				return
			}
			if rebuilt != tc.rebuilt {
				t.Fatalf("rebuilt = %v, want %v", rebuilt, tc.rebuilt)
			}
			if got.View == nil || *f.notify != 1 || f.pools.refreshes != 1 {
				t.Fatalf("updated %+v, woke %d, refreshed %d", got, *f.notify, f.pools.refreshes)
			}
			if tc.check != nil {
				tc.check(t, got.Pool)
			}
		})
	}
}

func TestUpdateChangeError(t *testing.T) {
	f := newFixture(t, fake.Config{})
	boom := api.Errorf(api.CodeInvalidRequest, "no")
	_, _, err := f.svc.Update(context.Background(), "fake", func(store.Pool) (store.Pool, error) { return store.Pool{}, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the change's", err)
	}
}

func TestListAndGet(t *testing.T) {
	f := newFixture(t, fake.Config{})
	ctx := context.Background()
	// "later" is stored and not built yet; "declared" is known only to the pool
	// manager.
	if _, err := f.st.CreatePool(ctx, f.clk.Now(), store.Pool{Name: "later", Adapter: "fake", Trust: api.TrustPrivate}); err != nil {
		t.Fatal(err)
	}
	f.pools.views["declared"] = pools.View{Pool: store.Pool{Name: "declared", Adapter: "fake", Trust: api.TrustPrivate}, Healthy: true}
	f.sandbox(t, "sbx_1", "fake", store.StateRunning, false)
	f.sandbox(t, "sbx_2", "fake", store.StateTerminated, false)

	list, err := f.svc.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Pool.Name)
	}
	if !slices.Equal(names, []string{"declared", "fake", "later"}) {
		t.Fatalf("listed %v", names)
	}
	for _, tc := range []struct {
		name      string
		code      api.Code
		view      bool
		sandboxes int
	}{
		{name: "fake", view: true, sandboxes: 1},
		{name: "later"},
		{name: "declared", view: true},
		{name: "nope", code: api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.svc.Get(ctx, tc.name)
			wantCode(t, err, tc.code)
			if tc.code != "" {
				return
			}
			if got.Pool.Name != tc.name || (got.View != nil) != tc.view || got.Sandboxes != tc.sandboxes {
				t.Fatalf("got %+v", got)
			}
			i := slices.IndexFunc(list, func(p pooladmin.Pool) bool { return p.Pool.Name == tc.name })
			if l := list[i]; (l.View != nil) != tc.view || l.Sandboxes != tc.sandboxes {
				t.Fatalf("listed %+v", l)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	type sbx struct {
		state    store.State
		instance bool
	}
	for _, tc := range []struct {
		name      string
		pool      string
		cfg       fake.Config
		sandboxes []sbx
		orphans   int  // instances of this installation no sandbox names
		listFails bool // the backend cannot be listed
		force     bool
		code      api.Code
		details   map[string]any
		// terminating is how many sandboxes the delete marked terminating.
		terminating int
		woken       bool // the scheduler was woken
		instances   int  // left in the backend
		gone        bool
	}{
		{name: "empty pool", pool: "fake", gone: true},
		{name: "missing pool", pool: "nope", code: api.CodeNotFound},
		{name: "config file's pool, forced", pool: "filed", force: true, code: api.CodeInvalidState},
		{name: "sandboxes", pool: "fake", sandboxes: []sbx{{store.StateRunning, true}, {store.StateQueued, false}},
			code: api.CodeInvalidState, details: map[string]any{"sandboxes": 2}, instances: 1},
		{name: "sandboxes, forced", pool: "fake", force: true,
			sandboxes: []sbx{{store.StateRunning, true}, {store.StateQueued, false}, {store.StatePaused, false}, {store.StateTerminated, false}},
			code:      api.CodeInvalidState, details: map[string]any{"terminating": 3}, terminating: 3, woken: true, instances: 1},
		{name: "already terminating, forced", pool: "fake", force: true, sandboxes: []sbx{{store.StateTerminating, true}},
			code: api.CodeInvalidState, details: map[string]any{"terminating": 1}, woken: true, instances: 1},
		{name: "orphan instance", pool: "fake", orphans: 2, sandboxes: []sbx{{store.StateFailed, false}},
			code: api.CodeInvalidState, details: map[string]any{"instances": 2}, instances: 2},
		{name: "orphan instance, forced", pool: "fake", orphans: 2, force: true, gone: true},
		{name: "orphan instance that cannot be deleted, forced", pool: "fake", orphans: 2, force: true,
			cfg:  fake.Config{DeleteErrorRate: 1, DeleteErrorCodes: []api.Code{api.CodeProviderUnavailable}},
			code: api.CodeInvalidState, details: map[string]any{"instances": 2}, instances: 2},
		{name: "backend that cannot be listed", pool: "fake", orphans: 1, listFails: true, gone: true, instances: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			ctx := context.Background()
			if _, err := f.st.CreatePool(ctx, f.clk.Now(), store.Pool{Name: "filed", Adapter: "fake", Trust: api.TrustPrivate, Source: store.PoolFromConfig}); err != nil {
				t.Fatal(err)
			}
			f.sandbox(t, "sbx_filed", "filed", store.StateRunning, false)
			var ids []string
			for i, s := range tc.sandboxes {
				ids = append(ids, f.sandbox(t, "sbx_"+string(rune('a'+i)), "fake", s.state, s.instance).ID)
			}
			for i := range tc.orphans {
				if _, err := f.adapter.Create(ctx, adapters.CreateRequest{ID: "sbx_orphan" + string(rune('a'+i)), Installation: installation}); err != nil {
					t.Fatal(err)
				}
			}
			f.adapter.SetListError(tc.listFails)

			err := f.svc.Delete(ctx, admin, tc.pool, tc.force)
			wantCode(t, err, tc.code)
			for k, v := range tc.details {
				if got := detail(t, err, k); got != v {
					t.Fatalf("details.%s = %v, want %v (%v)", k, got, v, err)
				}
			}
			_, gerr := f.st.GetPool(ctx, tc.pool)
			if gone := api.IsCode(gerr, api.CodeNotFound); gone != (tc.gone || tc.pool == "nope") {
				t.Fatalf("pool gone = %v (%v), want %v", gone, gerr, tc.gone)
			}
			if tc.gone && f.pools.refreshes != 1 {
				t.Fatalf("deleted pool refreshed %d times, want 1", f.pools.refreshes)
			}
			if woke := *f.notify > 0; woke != tc.woken {
				t.Fatalf("woke the scheduler %d times, want some: %v", *f.notify, tc.woken)
			}
			f.adapter.SetListError(false)
			if n := f.instances(t); n != tc.instances {
				t.Fatalf("%d instances left, want %d", n, tc.instances)
			}
			terminating := 0
			for i, id := range ids {
				sb, err := f.st.GetSandbox(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				was := tc.sandboxes[i].state
				if sb.State == was {
					continue
				}
				if sb.State != store.StateTerminating || was.IsTerminal() {
					t.Fatalf("%s went from %s to %s", id, was, sb.State)
				}
				terminating++
				events, _, err := f.st.ListEvents(ctx, store.EventFilter{SandboxID: id, Types: []store.EventType{store.EventTerminating}})
				if err != nil {
					t.Fatal(err)
				}
				if len(events) != 1 || events[0].Actor != string(lifecycle.Token("tok_admin")) || events[0].Message != "pool fake is being deleted" {
					t.Fatalf("terminating events of %s: %+v", id, events)
				}
			}
			if terminating != tc.terminating {
				t.Fatalf("%d sandboxes terminating, want %d", terminating, tc.terminating)
			}
			if sb, _ := f.st.GetSandbox(ctx, "sbx_filed"); sb.State != store.StateRunning {
				t.Fatalf("the config file's pool's sandbox is %s", sb.State)
			}
		})
	}
}

// TestDeleteAfterTermination is the operator's retry: once the scheduler has ended
// the sandboxes a forced delete terminated, the same call deletes the pool.
func TestDeleteAfterTermination(t *testing.T) {
	f := newFixture(t, fake.Config{})
	ctx := context.Background()
	sb := f.sandbox(t, "sbx_a", "fake", store.StateRunning, true)
	err := f.svc.Delete(ctx, admin, "fake", true)
	wantCode(t, err, api.CodeInvalidState)
	// What the scheduler's terminator would do, but for deleting the instance:
	// the retry finds it, and deletes it because it is forced.
	if _, err := f.st.UpdateSandbox(ctx, sb.ID, f.clk.Now(), func(cur *store.Sandbox) error {
		return lifecycle.Terminated(cur, cur.Reason, lifecycle.Scheduler("test"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(ctx, admin, "fake", false); !api.IsCode(err, api.CodeInvalidState) || detail(t, err, "instances") != 1 {
		t.Fatalf("unforced retry: %v", err)
	}
	if err := f.svc.Delete(ctx, admin, "fake", true); err != nil {
		t.Fatalf("forced retry: %v", err)
	}
	if n := f.instances(t); n != 0 {
		t.Fatalf("%d instances left", n)
	}
	if _, err := f.st.GetPool(ctx, "fake"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("pool after the delete: %v", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := pooladmin.New(pooladmin.Options{}); err == nil {
		t.Fatal("New without a store and pools succeeded")
	}
}

// warmSandbox stores a warm sandbox of pool's shape w in state: placed on the pool,
// with an instance of the fake adapter behind it, unless queued.
func (f *fixture) warmSandbox(t *testing.T, id, pool string, w store.WarmShape, state store.State) store.Sandbox {
	t.Helper()
	ctx := context.Background()
	sb := store.Sandbox{ID: id, Org: store.WarmOrg, Project: store.WarmProject(pool, w), State: state,
		Template: w.Template, Resources: w.Resources}
	if state != store.StateQueued {
		sb.Pool = pool
		inst, err := f.adapter.Create(ctx, adapters.CreateRequest{ID: id, Installation: installation})
		if err != nil {
			t.Fatal(err)
		}
		sb.BackendRef = inst.Ref
	}
	out, _, err := f.st.CreateSandbox(ctx, f.clk.Now(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keepWarm gives the fake pool the warm shape w.
func (f *fixture) keepWarm(t *testing.T, w store.WarmShape) {
	t.Helper()
	ctx := context.Background()
	p, err := f.st.GetPool(ctx, "fake")
	if err != nil {
		t.Fatal(err)
	}
	p.Warm = []store.WarmShape{w}
	if _, err := f.st.UpdatePool(ctx, f.clk.Now(), p); err != nil {
		t.Fatal(err)
	}
}

// A shape's starting sandboxes include those still queued, which have no pool yet,
// and not another pool's.
func TestWarmCounts(t *testing.T) {
	f := newFixture(t, fake.Config{})
	ctx := context.Background()
	w := store.WarmShape{Template: "python", Resources: adapters.Resources{CPU: 1}, Size: 4}
	f.keepWarm(t, w)
	f.warmSandbox(t, "sbx_ready", "fake", w, store.StateRunning)
	f.warmSandbox(t, "sbx_placed", "fake", w, store.StateProvisioning)
	f.warmSandbox(t, "sbx_queued", "fake", w, store.StateQueued)
	f.warmSandbox(t, "sbx_other", "fake2", w, store.StateQueued)
	got, err := f.svc.Get(ctx, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Warm) != 1 || got.Warm[0].Ready != 1 || got.Warm[0].Starting != 2 {
		t.Fatalf("warm counts %+v, want 1 ready and 2 starting", got.Warm)
	}
}

// A pool's warm sandboxes never hold its delete back: the delete clears its shapes
// and ends them (a ready one at once, its instance deleted; a starting one through
// the scheduler, the delete answering terminating until it is gone), but a tenant's
// sandbox still refuses an unforced delete, with nothing warm touched.
func TestDeleteWarm(t *testing.T) {
	w := store.WarmShape{Template: "python", Resources: adapters.Resources{CPU: 1}, Size: 3}
	for _, tc := range []struct {
		name    string
		tenant  bool // a tenant's running sandbox on the pool
		queued  bool // a warm sandbox not yet placed
		force   bool
		code    api.Code
		details map[string]any
		// ended: the ready warm sandboxes were terminated and their instances deleted.
		ended bool
		gone  bool
	}{
		{name: "ready warm sandboxes", ended: true, gone: true},
		{name: "a starting warm sandbox", queued: true, ended: true,
			code: api.CodeInvalidState, details: map[string]any{"terminating": 1}},
		{name: "a tenant's sandbox", tenant: true, code: api.CodeInvalidState, details: map[string]any{"sandboxes": 1}},
		{name: "a tenant's sandbox, forced", tenant: true, force: true, ended: true,
			code: api.CodeInvalidState, details: map[string]any{"terminating": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fake.Config{})
			ctx := context.Background()
			f.keepWarm(t, w)
			// Another pool's warm sandbox, whose project begins like this pool's.
			other := f.warmSandbox(t, "sbx_other", "fake2", w, store.StateQueued)
			ready := []store.Sandbox{f.warmSandbox(t, "sbx_w1", "fake", w, store.StateRunning),
				f.warmSandbox(t, "sbx_w2", "fake", w, store.StateRunning)}
			var queued store.Sandbox
			if tc.queued {
				queued = f.warmSandbox(t, "sbx_wq", "fake", w, store.StateQueued)
			}
			if tc.tenant {
				f.sandbox(t, "sbx_tenant", "fake", store.StateRunning, false)
			}

			err := f.svc.Delete(ctx, admin, "fake", tc.force)
			wantCode(t, err, tc.code)
			for k, v := range tc.details {
				if got := detail(t, err, k); got != v {
					t.Fatalf("details.%s = %v, want %v (%v)", k, got, v, err)
				}
			}
			stored, gerr := f.st.GetPool(ctx, "fake")
			if gone := api.IsCode(gerr, api.CodeNotFound); gone != tc.gone {
				t.Fatalf("pool gone = %v (%v), want %v", gone, gerr, tc.gone)
			}
			if !tc.gone && (len(stored.Warm) == 0) != tc.ended {
				t.Fatalf("warm shapes after the delete: %+v, want them cleared: %v", stored.Warm, tc.ended)
			}
			wantInstances := 0
			if !tc.ended {
				wantInstances = len(ready)
			}
			if n := f.instances(t); n != wantInstances {
				t.Fatalf("%d instances left, want %d", n, wantInstances)
			}
			for _, sb := range ready {
				got := f.get(t, sb.ID)
				if !tc.ended {
					if got.State != store.StateRunning {
						t.Fatalf("warm sandbox %s is %s after a refused delete", sb.ID, got.State)
					}
					continue
				}
				events, _, err := f.st.ListEvents(ctx, store.EventFilter{SandboxID: sb.ID,
					Types: []store.EventType{store.EventTerminating, store.EventTerminated}})
				if err != nil {
					t.Fatal(err)
				}
				if got.State != store.StateTerminated || len(events) != 2 ||
					events[0].Actor != string(lifecycle.Token("tok_admin")) || events[1].Message != "pool fake is being deleted" {
					t.Fatalf("warm sandbox %s: %s, events %+v", sb.ID, got.State, events)
				}
			}
			if got := f.get(t, other.ID); got.State != store.StateQueued {
				t.Fatalf("another pool's warm sandbox is %s", got.State)
			}
			if !tc.queued {
				return
			}
			if got := f.get(t, queued.ID); got.State != store.StateTerminating {
				t.Fatalf("the starting warm sandbox is %s, want it left terminating to the scheduler", got.State)
			}
			// The scheduler ends it; the retry deletes the pool.
			if _, err := f.st.UpdateSandbox(ctx, queued.ID, f.clk.Now(), func(cur *store.Sandbox) error {
				return lifecycle.Terminated(cur, cur.Reason, lifecycle.Scheduler("test"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := f.svc.Delete(ctx, admin, "fake", false); err != nil {
				t.Fatalf("retry: %v", err)
			}
		})
	}
}

func (f *fixture) get(t *testing.T, id string) store.Sandbox {
	t.Helper()
	sb, err := f.st.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}
