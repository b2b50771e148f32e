package reconcile_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/sqlite"
)

// Every pass that runs is recorded, the leader's periodic ones as much as those
// asked for, with its replica, trigger, token, times and report; a turn on which
// this replica does not lead records nothing; only the newest KeepPasses stay.
func TestPassesAreRecorded(t *testing.T) {
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
			a := fake.New(fake.Config{})
			ps := poolstest.New(pools.View{Pool: store.Pool{Name: "p", Adapter: "fake"}, Adapter: a, Healthy: true})
			r1 := reconcile.New(st, ps, clk, reconcile.Options{Installation: installation, ReplicaID: "r1", KeepPasses: 3})
			r2 := reconcile.New(st, ps, clk, reconcile.Options{Installation: installation, ReplicaID: "r2", KeepPasses: 3})

			orphan, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_orphan", Installation: installation})
			if err != nil {
				t.Fatal(err)
			}
			first := clk.Now()
			if _, led, err := r1.RunOnce(ctx); !led || err != nil {
				t.Fatalf("r1 RunOnce: led %v, %v", led, err)
			}
			// r1 leads: r2's turn runs and records nothing.
			if _, led, err := r2.RunOnce(ctx); led || err != nil {
				t.Fatalf("r2 RunOnce: led %v, %v", led, err)
			}
			clk.Advance(time.Minute)
			if _, err := r2.ReconcileBy(ctx, "tok_admin"); err != nil {
				t.Fatal(err)
			}

			items, next, err := st.ListReconcilePasses(ctx, store.ReconcilePassFilter{})
			if err != nil || next != "" || len(items) != 2 {
				t.Fatalf("passes: %+v, %q, %v", items, next, err)
			}
			asked, periodic := items[0], items[1]
			if asked.Trigger != store.TriggerOnDemand || asked.TokenID != "tok_admin" || asked.Replica != "r2" ||
				!asked.StartedAt.Equal(first.Add(time.Minute)) || asked.Error != "" {
				t.Errorf("on-demand pass recorded as %+v", asked)
			}
			if periodic.Trigger != store.TriggerPeriodic || periodic.TokenID != "" || periodic.Replica != "r1" ||
				!periodic.StartedAt.Equal(first) || !periodic.EndedAt.Equal(first) {
				t.Errorf("periodic pass recorded as %+v", periodic)
			}
			if len(periodic.Pools) != 1 || periodic.Pools[0].Pool != "p" ||
				!slices.Equal(periodic.Pools[0].OrphansDeleted, []string{orphan.Ref}) {
				t.Errorf("periodic pass report: %+v", periodic.Pools)
			}

			for range 3 {
				clk.Advance(time.Minute)
				if _, _, err := r1.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			items, _, err = st.ListReconcilePasses(ctx, store.ReconcilePassFilter{})
			if err != nil || len(items) != 3 {
				t.Fatalf("kept %d passes (%v), want 3", len(items), err)
			}
			if want := first.Add(4 * time.Minute); !items[0].StartedAt.Equal(want) {
				t.Errorf("newest pass started at %v, want %v", items[0].StartedAt, want)
			}
		})
	}
}
