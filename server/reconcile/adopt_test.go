package reconcile_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/sqlite"
)

// frozen makes the instance and then never answers, as a replica that died in the
// middle of its Create would not: the answer is lost. release lets the call return
// (with an error) when the test ends.
type frozen struct {
	*fake.Adapter
	made, release chan struct{}
}

func (f *frozen) Create(_ context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	if _, err := f.Adapter.Create(context.Background(), req); err != nil {
		return adapters.Instance{}, err
	}
	close(f.made)
	<-f.release
	return adapters.Instance{}, api.Errorf(api.CodeProviderUnavailable, "the replica died")
}

// A replica dies while its Create is in flight, after the instance was made. The
// reconciler adopts the instance once the Create's claim has lapsed, which is the
// provision timeout plus the scheduler's 10 s margin after the sandbox entered
// provisioning, and not a margin of its own on top: at 130 s with the defaults.
// A pass whose List began before the claim lapsed does not adopt, even when the
// claim has lapsed by the time the plan is made.
func TestAdoptionSoonAfterTheProvisionTimeout(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			var st store.Store
			var err error
			if name == "sqlite" {
				st, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
			} else {
				st, err = postgres.Open(ctx, pgtest.SchemaURL(t))
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			clk := clock.NewManual(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			start := clk.Now()

			backend := fake.New(fake.Config{})
			f := &frozen{Adapter: backend, made: make(chan struct{}), release: make(chan struct{})}
			caps, _ := backend.Capabilities(ctx)
			p := store.Pool{Name: "p", Adapter: "fake", Trust: api.TrustPrivate}
			if _, err := st.CreatePool(ctx, clk.Now(), p); err != nil {
				t.Fatal(err)
			}
			dead, err := scheduler.New(st, poolstest.New(pools.View{Pool: p, Adapter: f, Capabilities: caps, Trust: api.TrustPrivate, Healthy: true}),
				clk, scheduler.Options{Installation: installation, ReplicaID: "dead"})
			if err != nil {
				t.Fatal(err)
			}
			listed := &hookedList{Adapter: backend}
			r := reconcile.New(st, poolstest.New(pools.View{Pool: p, Adapter: listed, Healthy: true}), clk,
				reconcile.Options{Installation: installation, ReplicaID: "leader"})

			if _, _, err := st.CreateSandbox(ctx, clk.Now(), store.Sandbox{ID: "sbx_1", Org: "o", Project: "p",
				State: store.StateQueued, NextAttemptAt: clk.Now()}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = dead.ProvisionOnce(context.Background()) })
			defer wg.Wait()
			defer close(f.release)
			<-f.made

			adopted := func() bool {
				t.Helper()
				if _, err := r.Reconcile(ctx); err != nil {
					t.Fatal(err)
				}
				sb, err := st.GetSandbox(ctx, "sbx_1")
				if err != nil {
					t.Fatal(err)
				}
				return sb.State == store.StateRunning
			}
			timeout := scheduler.DefaultProvisionTimeout
			// The List begins a second before the claim lapses and ends after it.
			clk.Set(start.Add(timeout + 9*time.Second))
			listed.onList = func() { clk.Set(start.Add(timeout + 11*time.Second)) }
			if adopted() {
				t.Fatal("adopted by a pass whose List began under the live claim")
			}
			listed.onList = nil
			if !adopted() {
				t.Fatalf("not adopted %v after entering provisioning", clk.Now().Sub(start))
			}
		})
	}
}
