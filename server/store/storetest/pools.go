package storetest

import (
	"github.com/different-ai/differently/adapters"

	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

func testInstallationID(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	id := must[string](t)(s.InstallationID(ctx))
	if !strings.HasPrefix(id, "inst_") || len(id) != len("inst_")+26 {
		t.Fatalf("installation id %q is not inst_<ulid>", id)
	}
	equal(t, "second call", must[string](t)(s.InstallationID(ctx)), id)
	// A restart (or another replica) sees the same ID.
	again := d.Reopen(t, s)
	noErr(t, s.Close())
	equal(t, "after reopen", must[string](t)(again.InstallationID(ctx)), id)
}

func testInstallationIDConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	got := make([]string, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			id, err := st.InstallationID(ctx)
			if err != nil {
				t.Error(err)
			}
			got[i] = id
		}()
	}
	wg.Wait()
	for _, id := range got {
		if id != got[0] || id == "" {
			t.Fatalf("concurrent first calls disagree: %v", got)
		}
	}
}

func samplePool(name string) store.Pool {
	return store.Pool{
		Name:           name,
		Adapter:        "opensandbox",
		Trust:          api.TrustExternal,
		Region:         "eu-west",
		MaxConcurrency: 40,
		MaxStarting:    4,
		CostModel:      store.CostModel{CPUHour: 0.05, MemoryGiBHour: 0.0125},
		Config: map[string]any{
			"endpoint": "https://sandbox.example",
			"insecure": false,
			"timeout":  30.0,
			"nested": map[string]any{
				"tags":  []any{"a", "b", 1.5},
				"deep":  map[string]any{"x": nil, "y": "z"},
				"empty": map[string]any{},
			},
		},
		CredentialsEnv: "OPENSANDBOX_TOKEN",
		Features:       []string{"exec.stream", "files"},
		Warm: []store.WarmShape{
			{Template: "python", Resources: adapters.Resources{CPU: 0.5, MemoryMiB: 512}, Size: 4, MaxAgeSeconds: 600},
			{Profile: "ci", Size: 1},
		},
	}
}

func testPoolRoundTrip(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	in := samplePool("alpha")
	in.CreatedAt = time.Unix(1, 0) // ignored: the store stamps now
	out := must[store.Pool](t)(s.CreatePool(ctx, t0, in))
	// A pool created without a source is the API's.
	want := samplePool("alpha")
	want.Source = store.PoolFromAPI
	want.CreatedAt, want.UpdatedAt, want.Version = ts(t0), ts(t0), 1
	equal(t, "created pool", out, want)
	equal(t, "got pool", must[store.Pool](t)(s.GetPool(ctx, "alpha")), want)

	// A minimal pool keeps its nil fields nil.
	minimal := store.Pool{Name: "beta", Adapter: "fake", Trust: api.TrustPrivate}
	gotMin := must[store.Pool](t)(s.CreatePool(ctx, t0, minimal))
	minimal.Source = store.PoolFromAPI
	minimal.CreatedAt, minimal.UpdatedAt, minimal.Version = ts(t0), ts(t0), 1
	equal(t, "minimal pool", gotMin, minimal)

	fromFile := samplePool("gamma")
	fromFile.Source = store.PoolFromConfig
	gotFile := must[store.Pool](t)(s.CreatePool(ctx, t0, fromFile))
	fromFile.CreatedAt, fromFile.UpdatedAt, fromFile.Version = ts(t0), ts(t0), 1
	equal(t, "config file's pool", gotFile, fromFile)
	equal(t, "got config file's pool", must[store.Pool](t)(s.GetPool(ctx, "gamma")), fromFile)

	must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("0-first")))
	var names []string
	for _, p := range must[[]store.Pool](t)(s.ListPools(ctx)) {
		names = append(names, p.Name)
	}
	equal(t, "pool order", names, []string{"0-first", "alpha", "beta", "gamma"})
}

func testPoolErrors(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	if pools := must[[]store.Pool](t)(s.ListPools(ctx)); len(pools) != 0 {
		t.Fatalf("new store has pools: %v", pools)
	}
	must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("alpha")))
	_, err := s.CreatePool(ctx, t0, samplePool("alpha"))
	wantCode(t, err, api.CodeInvalidState)
	_, err = s.GetPool(ctx, "missing")
	wantCode(t, err, api.CodeNotFound)
	_, err = s.CreatePool(ctx, t0, store.Pool{Adapter: "fake"})
	wantCode(t, err, api.CodeInvalidRequest)
	twice := samplePool("twice")
	twice.Warm = append(twice.Warm, twice.Warm[0])
	_, err = s.CreatePool(ctx, t0, twice)
	wantCode(t, err, api.CodeInvalidRequest)
	bogus := samplePool("bogus")
	bogus.Source = "terraform"
	_, err = s.CreatePool(ctx, t0, bogus)
	wantCode(t, err, api.CodeInvalidRequest)
	missing := samplePool("missing")
	missing.Source = store.PoolFromAPI
	_, err = s.UpdatePool(ctx, t0, missing)
	wantCode(t, err, api.CodeNotFound)
	wantCode(t, s.DeletePool(ctx, "missing"), api.CodeNotFound)

	// An update must say where the pool is defined: one that left the source out
	// would otherwise hand a config file's pool to the API unnoticed.
	stored := must[store.Pool](t)(s.GetPool(ctx, "alpha"))
	stored.Source = ""
	_, err = s.UpdatePool(ctx, t0, stored)
	wantCode(t, err, api.CodeInvalidRequest)
	equal(t, "source after the refused update", must[store.Pool](t)(s.GetPool(ctx, "alpha")).Source, store.PoolFromAPI)
}

func testPoolUpdate(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	p := must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("alpha")))
	t1 := t0.Add(time.Minute)
	p.MaxConcurrency = 7
	p.Config = map[string]any{"endpoint": "https://other.example"}
	p.Features = nil
	p.CreatedAt = t1 // must be ignored
	got := must[store.Pool](t)(s.UpdatePool(ctx, t1, p))
	want := p
	want.CreatedAt, want.UpdatedAt, want.Version = ts(t0), ts(t1), 2
	equal(t, "updated pool", got, want)
	equal(t, "stored pool", must[store.Pool](t)(s.GetPool(ctx, "alpha")), want)

	// A writer holding the old version loses.
	p.MaxConcurrency = 9
	_, err := s.UpdatePool(ctx, t1, p) // p.Version is still 1
	wantCode(t, err, api.CodeInvalidState)
	equal(t, "after conflict", must[store.Pool](t)(s.GetPool(ctx, "alpha")), want)

	// The source is written like any other field: the daemon takes a pool over for
	// its config file, and releases it again.
	for i, src := range []store.PoolSource{store.PoolFromConfig, store.PoolFromAPI} {
		cur := must[store.Pool](t)(s.GetPool(ctx, "alpha"))
		cur.Source = src
		got := must[store.Pool](t)(s.UpdatePool(ctx, t1, cur))
		equal(t, "source", got.Source, src)
		equal(t, "version", got.Version, int64(3+i))
		equal(t, "stored source", must[store.Pool](t)(s.GetPool(ctx, "alpha")).Source, src)
	}
}

func testPoolDelete(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("alpha")))
	sb := newSandbox("p1")
	sb.Pool, sb.State = "alpha", store.StateRunning
	sb = mustCreate(t, s, sb)
	// A terminated sandbox elsewhere does not matter; a live one on the pool does.
	done := newSandbox("p1")
	done.Pool, done.State = "alpha", store.StateTerminated
	mustCreate(t, s, done)
	wantCode(t, s.DeletePool(ctx, "alpha"), api.CodeInvalidState)
	must[store.Pool](t)(s.GetPool(ctx, "alpha"))

	must[store.Sandbox](t)(s.UpdateSandbox(ctx, sb.ID, t0, func(sb *store.Sandbox) error {
		sb.State = store.StateFailed
		return nil
	}))
	noErr(t, s.DeletePool(ctx, "alpha"))
	_, err := s.GetPool(ctx, "alpha")
	wantCode(t, err, api.CodeNotFound)

	// A config file's pool is never deleted, empty or not: the file would bring it
	// back at the next start. Released to the API, it can be.
	file := samplePool("file")
	file.Source = store.PoolFromConfig
	file = must[store.Pool](t)(s.CreatePool(ctx, t0, file))
	err = s.DeletePool(ctx, "file")
	wantCode(t, err, api.CodeInvalidState)
	if !strings.Contains(err.Error(), "config file") || api.AsError(err).Details["source"] != "config" {
		t.Fatalf("deleting a config file's pool: %v (details %v)", err, api.AsError(err).Details)
	}
	must[store.Pool](t)(s.GetPool(ctx, "file"))
	file.Source = store.PoolFromAPI
	must[store.Pool](t)(s.UpdatePool(ctx, t0, file))
	noErr(t, s.DeletePool(ctx, "file"))
}
