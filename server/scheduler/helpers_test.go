package scheduler

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

const installation = "inst_test"

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// testPools serves fixed views, with capacity read live from the adapter so that
// placement sees instances made by earlier passes, and records MarkUnhealthy.
type testPools struct {
	mu       sync.Mutex
	views    []pools.View
	marked   []string
	outcomes []pools.CreateOutcome
}

func (p *testPools) Views() []pools.View {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.views)
	for i, v := range out {
		if v.Adapter != nil {
			out[i].Capacity, _ = v.Adapter.Capacity(context.Background())
		}
	}
	return out
}

func (p *testPools) View(name string) (pools.View, bool) {
	for _, v := range p.Views() {
		if v.Pool.Name == name {
			return v, true
		}
	}
	return pools.View{}, false
}

// set replaces the view of v's pool.
func (p *testPools) set(v pools.View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.views {
		if p.views[i].Pool.Name == v.Pool.Name {
			p.views[i] = v
		}
	}
}

func (p *testPools) MarkUnhealthy(name string, _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marked = append(p.marked, name)
}

// BeginCreate lets every Create through: these tests' pools have no breaker.
func (p *testPools) BeginCreate(string) (pools.CreateTicket, bool) { return pools.CreateTicket{}, true }

// EndCreate records the outcomes reported.
func (p *testPools) EndCreate(_ pools.CreateTicket, o pools.CreateOutcome, _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outcomes = append(p.outcomes, o)
}

// reported is the outcomes EndCreate was given, in order.
func (p *testPools) reported() []pools.CreateOutcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.outcomes)
}

func (p *testPools) markedPools() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.marked)
}

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
	pools *testPools
	s     *Scheduler
}

func newEnv(t *testing.T, opts Options, views ...pools.View) *env {
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
	e := &env{st: st, clk: clock.NewManual(t0), pools: &testPools{views: views}}
	opts.Installation = installation
	if opts.ReplicaID == "" {
		opts.ReplicaID = "replica-1"
	}
	e.s, err = New(st, e.pools, e.clk, opts)
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
