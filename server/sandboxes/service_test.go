package sandboxes_test

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
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

// wakes records the states the service woke the scheduler for.
type wakes []store.State

func (w *wakes) Wake(st store.State) { *w = append(*w, st) }

type fixture struct {
	svc   *sandboxes.Service
	st    store.Store
	fake  *fake.Adapter
	wakes *wakes
	clk   *clock.Manual
	pools sandboxes.Pools
}

// newFixture builds a service on a fresh SQLite store with one healthy fake pool,
// "fake", and no direct scheduler: every create is queued.
func newFixture(t *testing.T, maxQueued int) *fixture {
	t.Helper()
	return newFixtureWith(t, sandboxes.Options{MaxQueued: maxQueued})
}

// newFixtureWith is newFixture with opts' limits.
func newFixtureWith(t *testing.T, opts sandboxes.Options) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	pool := store.Pool{Name: "fake", Adapter: "fake", Trust: api.TrustPrivate}
	if _, err := st.CreatePool(ctx, clk.Now(), pool); err != nil {
		t.Fatal(err)
	}
	a := fake.New(fake.Config{})
	caps, err := a.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	caps.Features = adapters.EffectiveFeatures(a, caps.Features)
	capacity, _ := a.Capacity(ctx)
	view := pools.View{Pool: pool, Adapter: a, Info: a.Info(), Capabilities: caps, Capacity: capacity,
		Trust: api.TrustPrivate, Healthy: true, LastProbeAt: clk.Now()}
	w := &wakes{}
	opts.Store, opts.Pools, opts.Waker, opts.Clock = st, poolstest.New(view), w, clk
	svc, err := sandboxes.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, st: st, fake: a, wakes: w, clk: clk, pools: opts.Pools}
}

var (
	admin = sandboxes.Caller{TokenID: "tok_admin", Admin: true}
	alice = sandboxes.Caller{TokenID: "tok_alice", Org: "acme", Project: "alice"}
	bob   = sandboxes.Caller{TokenID: "tok_bob", Org: "acme", Project: "bob"}
)

func ptr[T any](v T) *T { return &v }

func TestTenant(t *testing.T) {
	for _, tc := range []struct {
		name             string
		c                sandboxes.Caller
		org, project     *string
		wantOrg, wantPrj string
		code             api.Code
	}{
		{"project token, nothing named", alice, nil, nil, "acme", "alice", ""},
		{"project token, its own named", alice, ptr("acme"), ptr("alice"), "acme", "alice", ""},
		{"project token, another project", alice, nil, ptr("bob"), "", "", api.CodeForbidden},
		{"project token, another org", alice, ptr("other"), nil, "", "", api.CodeForbidden},
		{"admin, nothing named", admin, nil, nil, sandboxes.DefaultOrg, sandboxes.DefaultProject, ""},
		{"admin, any project", admin, ptr("acme"), ptr("bob"), "acme", "bob", ""},
		{"admin, bad org name", admin, ptr(""), nil, "", "", api.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org, project, err := sandboxes.Tenant(tc.c, tc.org, tc.project)
			if tc.code != "" {
				if !api.IsCode(err, tc.code) {
					t.Fatalf("err = %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || org != tc.wantOrg || project != tc.wantPrj {
				t.Fatalf("got %q/%q, %v; want %q/%q", org, project, err, tc.wantOrg, tc.wantPrj)
			}
		})
	}
}

func TestPolicyDefaultTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want int64
		ok   bool
	}{
		{"unset", nil, sandboxes.DefaultTTLSeconds, true},
		{"zero, no expiry", float64(0), 0, true},
		{"an hour", float64(3600), 3600, true},
		{"fraction", 1.5, 0, false},
		{"negative", float64(-1), 0, false},
		{"over the bound", float64(api.MaxTTLSeconds + 1), 0, false},
		{"a string", "3600", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := store.Policy{Defaults: map[string]any{}}
			if tc.v != nil {
				p.Defaults["ttlSeconds"] = tc.v
			}
			got, err := sandboxes.PolicyDefaultTTL(p)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("got %d, %v; want %d, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestCreateRefusesBeforeStoring(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  sandboxes.CreateRequest
		code api.Code
	}{
		{"ttl over the bound", sandboxes.CreateRequest{Sandbox: store.Sandbox{TTLSeconds: api.MaxTTLSeconds + 1}, TTLSet: true},
			api.CodeInvalidRequest},
		{"env name with '='", sandboxes.CreateRequest{Sandbox: store.Sandbox{Env: map[string]string{"A=B": "x"}}},
			api.CodeInvalidRequest},
		{"allowed pool that is no name", sandboxes.CreateRequest{Sandbox: store.Sandbox{
			Placement: store.Placement{AllowedPools: []string{"Not A Name"}}}}, api.CodeInvalidRequest},
		{"unknown feature", sandboxes.CreateRequest{Sandbox: store.Sandbox{Capabilities: []string{"teleport"}}},
			api.CodeInvalidRequest},
		{"bad profile name", sandboxes.CreateRequest{Profile: "Bad Name"}, api.CodeInvalidRequest},
		{"missing profile", sandboxes.CreateRequest{Profile: "nope"}, api.CodeInvalidRequest},
		{"missing snapshot", sandboxes.CreateRequest{Sandbox: store.Sandbox{FromSnapshot: "snap_x"}}, api.CodeNotFound},
		{"no pool could take it", sandboxes.CreateRequest{Sandbox: store.Sandbox{
			Placement: store.Placement{AllowedPools: []string{"elsewhere"}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := f.svc.Create(ctx, alice, tc.req)
			if err == nil {
				t.Fatal("created, want a refusal")
			}
			if tc.code != "" && !api.IsCode(err, tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
	items, _, err := f.st.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil || len(items) != 0 {
		t.Fatalf("stored %d sandboxes (%v), want none", len(items), err)
	}
	if len(*f.wakes) != 0 {
		t.Errorf("woke the scheduler %d times for refused creates", len(*f.wakes))
	}
}

func TestCreateQueuesAndIsIdempotent(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	req := sandboxes.CreateRequest{Sandbox: store.Sandbox{IdempotencyKey: "k1", RequestHash: "sha256:a"}}
	sb, created, started, err := f.svc.Create(ctx, alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if !created || started != nil || sb.State != store.StateQueued || sb.Org != "acme" || sb.Project != "alice" {
		t.Fatalf("created %v, started %v, sandbox %s %s/%s; want a new queued sandbox of acme/alice with no direct start",
			created, started, sb.State, sb.Org, sb.Project)
	}
	if sb.TTLSeconds != sandboxes.DefaultTTLSeconds {
		t.Errorf("ttl %d, want the default %d", sb.TTLSeconds, sandboxes.DefaultTTLSeconds)
	}
	if got := *f.wakes; len(got) != 1 || got[0] != store.StateQueued {
		t.Errorf("wakes %v, want one for queued", got)
	}

	again, created, _, err := f.svc.Create(ctx, alice, req)
	if err != nil || created || again.ID != sb.ID {
		t.Fatalf("retry: %s, created %v, %v; want %s unchanged", again.ID, created, err, sb.ID)
	}
	other := req
	other.Sandbox.RequestHash = "sha256:b"
	if _, _, _, err := f.svc.Create(ctx, alice, other); !api.IsCode(err, api.CodeIdempotencyKeyReused) {
		t.Fatalf("another request with the key: %v, want idempotency_key_reused", err)
	}
}

func TestCreateRefusesWhenQueueIsFull(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	if _, _, _, err := f.svc.Create(ctx, alice, sandboxes.CreateRequest{}); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := f.svc.Create(ctx, bob, sandboxes.CreateRequest{})
	if !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("err = %v, want provider_unavailable", err)
	}
	ra, ok := errors.AsType[*sandboxes.RetryAfterError](err)
	if !ok || ra.Seconds <= 0 {
		t.Fatalf("err = %#v, want a retry hint", err)
	}
}

func TestOtherProjectsLookMissing(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb, _, _, err := f.svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Sandbox(ctx, admin, sb.ID); err != nil {
		t.Fatalf("admin: %v", err)
	}
	for name, call := range map[string]func() error{
		"Sandbox": func() error { _, err := f.svc.Sandbox(ctx, bob, sb.ID); return err },
		"Delete":  func() error { _, _, err := f.svc.Delete(ctx, bob, sb.ID); return err },
		"Update":  func() error { _, err := f.svc.Update(ctx, bob, sb.ID, sandboxes.Patch{}); return err },
		"Operate": func() error { _, err := f.svc.Operate(ctx, bob, sb.ID, lifecycle.OpStop); return err },
		"Fork":    func() error { _, err := f.svc.Fork(ctx, bob, sb.ID, sandboxes.ForkRequest{}); return err },
	} {
		if err := call(); !api.IsCode(err, api.CodeNotFound) {
			t.Errorf("%s of another project's sandbox: %v, want not_found", name, err)
		}
	}
	if got, err := f.svc.Sandbox(ctx, alice, sb.ID); err != nil || got.State != store.StateQueued {
		t.Fatalf("after bob's calls: %s, %v; want it still queued", got.State, err)
	}
}

func TestDeleteWithoutInstanceEndsAtOnce(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb, _, _, err := f.svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out, started, err := f.svc.Delete(ctx, alice, sb.ID)
	if err != nil || started != nil || out.State != store.StateTerminated {
		t.Fatalf("delete: %s, started %v, %v; want terminated in the same write", out.State, started, err)
	}
	// A second delete finds nothing to change and says so with the sandbox.
	again, _, err := f.svc.Delete(ctx, alice, sb.ID)
	if err != nil || again.State != store.StateTerminated {
		t.Fatalf("second delete: %s, %v", again.State, err)
	}
}

// running makes a sandbox of alice's run on the fake pool, as a scheduler would.
func running(t *testing.T, f *fixture) store.Sandbox {
	t.Helper()
	ctx := context.Background()
	sb, _, _, err := f.svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := f.fake.Create(ctx, adapters.CreateRequest{ID: sb.ID, Installation: "test"})
	if err != nil {
		t.Fatal(err)
	}
	by := lifecycle.Scheduler("test")
	out, err := f.st.UpdateSandbox(ctx, sb.ID, f.clk.Now(), func(cur *store.Sandbox) error {
		p := lifecycle.Placement{Pool: "fake", Claimer: "test", ClaimUntil: f.clk.Now().Add(time.Minute)}
		if err := lifecycle.Place(cur, p, f.clk.Now(), by); err != nil {
			return err
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: inst.Ref}, f.clk.Now(), 0, by)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOperate(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb := running(t, f)
	for _, step := range []struct {
		op   lifecycle.Op
		want store.State
		code api.Code
	}{
		{lifecycle.OpStop, store.StateStopped, ""},
		{lifecycle.OpStop, store.StateStopped, ""}, // already there: no adapter call, no error
		{lifecycle.OpPause, "", api.CodeInvalidState},
		{lifecycle.OpStart, store.StateRunning, ""},
		{lifecycle.OpPause, store.StatePaused, ""},
		{lifecycle.OpResume, store.StateRunning, ""},
	} {
		out, err := f.svc.Operate(ctx, alice, sb.ID, step.op)
		if step.code != "" {
			if !api.IsCode(err, step.code) {
				t.Fatalf("%s: %v, want %s", step.op, err, step.code)
			}
			continue
		}
		if err != nil || out.State != step.want {
			t.Fatalf("%s: %s, %v; want %s", step.op, out.State, err, step.want)
		}
	}
}

func TestUpdateRenewsTTLFromNow(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb := running(t, f)
	f.clk.Advance(time.Hour)
	out, err := f.svc.Update(ctx, alice, sb.ID, sandboxes.Patch{
		TTLSeconds: ptr(int64(600)), Labels: &map[string]string{"team": "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := f.clk.Now().Add(10 * time.Minute)
	if out.TTLSeconds != 600 || out.ExpiresAt == nil || !out.ExpiresAt.Equal(want) || out.Labels["team"] != "a" {
		t.Fatalf("ttl %d, expires %v, labels %v; want 600, %v, team=a", out.TTLSeconds, out.ExpiresAt, out.Labels, want)
	}
	if inst, err := f.fake.Inspect(sb.BackendRef); err != nil || inst.TTLRenewals != 1 || inst.TTLSeconds != 600 {
		t.Fatalf("backend: %+v (%v); want one renewal to 600", inst, err)
	}
	if _, err := f.svc.Update(ctx, alice, sb.ID, sandboxes.Patch{TTLSeconds: ptr(int64(-1))}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("negative ttl: %v, want invalid_request", err)
	}
}

// List confines a project token to its own project, whatever its filter names; an
// admin's filter is taken as it is.
func TestListConfinesProjects(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	mine, _, _, err := f.svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, _, err := f.svc.Create(ctx, bob, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(c sandboxes.Caller, filter store.SandboxFilter) []string {
		t.Helper()
		items, _, err := f.svc.List(ctx, c, filter)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sb := range items {
			out = append(out, sb.ID)
		}
		slices.Sort(out)
		return out
	}
	both := []string{mine.ID, theirs.ID}
	slices.Sort(both)
	for _, tc := range []struct {
		name   string
		caller sandboxes.Caller
		filter store.SandboxFilter
		want   []string
	}{
		{"own project", alice, store.SandboxFilter{}, []string{mine.ID}},
		{"own project named", alice, store.SandboxFilter{Project: "alice"}, []string{mine.ID}},
		{"another project named", alice, store.SandboxFilter{Project: "bob"}, nil},
		{"another org named", alice, store.SandboxFilter{Org: "other"}, nil},
		{"admin, all", admin, store.SandboxFilter{}, both},
		{"admin, one project", admin, store.SandboxFilter{Project: "bob"}, []string{theirs.ID}},
	} {
		if got := ids(tc.caller, tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// staleKnown is a store on which every row a Batcher holds has gone stale, as on
// PostgreSQL when a write made elsewhere came first: UpdateKnownSandboxes runs fn on
// the held value, then writes as UpdateSandboxes does, fn running again on the
// stored value.
// held counts the rows it was given.
type staleKnown struct {
	store.Store
	held *int
}

func (s staleKnown) UpdateKnownSandboxes(ctx context.Context, known []store.Sandbox, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	*s.held += len(known)
	for i, sb := range known {
		_ = fn(i, &sb)
	}
	return s.UpdateSandboxes(ctx, store.SandboxIDs(known), now, fn)
}

// The service's writes may start from the row its Batcher last wrote; when that
// row is stale, what the write does follows the stored row. Here the held row is
// queued, with nothing to delete, and the stored one runs an instance.
func TestWritesFollowTheStoredRow(t *testing.T) {
	f := newFixtureWith(t, sandboxes.Options{})
	ctx := context.Background()
	held := 0
	writes := store.NewBatcher(staleKnown{Store: f.st, held: &held}, f.clk.Now)
	svc, err := sandboxes.New(sandboxes.Options{Store: f.st, Pools: f.pools, Waker: f.wakes, Clock: f.clk, Writes: writes})
	if err != nil {
		t.Fatal(err)
	}
	sb, _, _, err := svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"team": "a"}
	if _, err := svc.Update(ctx, alice, sb.ID, sandboxes.Patch{Labels: &labels}); err != nil {
		t.Fatal(err)
	}
	by := lifecycle.Scheduler("test")
	if _, err := f.st.UpdateSandbox(ctx, sb.ID, f.clk.Now(), func(cur *store.Sandbox) error {
		p := lifecycle.Placement{Pool: "fake", Claimer: "test", ClaimUntil: f.clk.Now().Add(time.Minute)}
		if err := lifecycle.Place(cur, p, f.clk.Now(), by); err != nil {
			return err
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: "ref-1"}, f.clk.Now(), 0, by)
	}); err != nil {
		t.Fatal(err)
	}
	out, _, err := svc.Delete(ctx, alice, sb.ID)
	if held != 1 {
		t.Fatalf("%d writes started from a held row, want the delete's", held)
	}
	if err != nil || out.State != store.StateTerminating || out.BackendRef != "ref-1" {
		t.Fatalf("delete: %s with ref %q, %v; want terminating with the instance's ref", out.State, out.BackendRef, err)
	}
	evs, _, err := f.st.ListEvents(ctx, store.EventFilter{SandboxID: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, string(e.Type))
	}
	if want := []string{"created", "placed", "running", "terminating"}; !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
}
