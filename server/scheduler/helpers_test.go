package scheduler

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

const installation = "inst_test"

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// view is what a pool manager would build for a healthy pool served by a.
func view(name string, a adapters.ExecutionAdapter) pools.View {
	caps, _ := a.Capabilities(context.Background())
	caps.Features = adapters.EffectiveFeatures(a, caps.Features)
	return pools.View{
		Pool:         store.Pool{Name: name, Adapter: fake.Kind, Trust: api.TrustPrivate},
		Adapter:      a,
		Info:         a.Info(),
		Capabilities: caps,
		Trust:        api.TrustPrivate,
		Healthy:      true,
		LastProbeAt:  t0,
	}
}

type env struct {
	st    store.Store
	clk   *clock.Manual
	pools *poolstest.Pools
	s     *Scheduler
}

func newEnv(t *testing.T, opts Options, views ...pools.View) *env {
	t.Helper()
	return newEnvWrapped(t, nil, opts, views...)
}

// newEnvWrapped is newEnv with the scheduler's store wrapped by wrap (nil: none).
func newEnvWrapped(t *testing.T, wrap func(store.Store) store.Store, opts Options, views ...pools.View) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, v := range views {
		if _, err := st.CreatePool(ctx, t0, v.Pool); err != nil {
			t.Fatal(err)
		}
	}
	// Capacity is read live, so that placement sees the instances earlier passes made.
	e := &env{st: st, clk: clock.NewManual(t0), pools: poolstest.New(views...)}
	e.pools.LiveCapacity = true
	opts.Installation = installation
	if opts.ReplicaID == "" {
		opts.ReplicaID = "replica-1"
	}
	var sst store.Store = st
	if wrap != nil {
		sst = wrap(st)
	}
	e.s, err = New(sst, e.pools, e.clk, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) create(t *testing.T, sb store.Sandbox) store.Sandbox {
	t.Helper()
	if sb.ID == "" {
		sb.ID = ids.At("sbx", e.clk.Now())
	}
	if sb.Org == "" {
		sb.Org, sb.Project = "org_1", "prj_1"
	}
	out, _, err := e.st.CreateSandbox(context.Background(), e.clk.Now(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) get(t *testing.T, id string) store.Sandbox {
	t.Helper()
	sb, err := e.st.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// set changes a sandbox as the API would (a delete, a stop).
func (e *env) set(t *testing.T, id string, fn func(*store.Sandbox)) {
	t.Helper()
	if _, err := e.st.UpdateSandbox(context.Background(), id, e.clk.Now(), func(sb *store.Sandbox) error {
		fn(sb)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) provision(t *testing.T) Result {
	t.Helper()
	r, err := e.s.ProvisionOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) terminate(t *testing.T) Result {
	t.Helper()
	r, err := e.s.TerminateOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) expire(t *testing.T) Result {
	t.Helper()
	r, err := e.s.ExpireOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantState(t *testing.T, sb store.Sandbox, state store.State) {
	t.Helper()
	if sb.State != state {
		t.Fatalf("sandbox %s is %s (reason %q), want %s", sb.ID, sb.State, sb.Reason, state)
	}
}

// staleKnown is a store on which every known row a writer holds has gone stale, as
// on PostgreSQL when another write came first: UpdateKnownSandboxes runs fn on the
// known value, then writes as UpdateSandboxes does, fn running again on the stored
// value.
type staleKnown struct{ store.Store }

func (s staleKnown) UpdateKnownSandboxes(ctx context.Context, known []store.Sandbox, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	for i, sb := range known {
		_ = fn(i, &sb)
	}
	return s.UpdateSandboxes(ctx, store.SandboxIDs(known), now, fn)
}
