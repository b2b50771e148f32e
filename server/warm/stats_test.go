package warm_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/warm"
)

// flakyStats is a store whose AddWarmStats fails while fail is set.
type flakyStats struct {
	store.Store
	fail atomic.Bool
}

func (f *flakyStats) AddWarmStats(ctx context.Context, deltas []store.WarmStats) error {
	if f.fail.Load() {
		return errors.New("the database is away")
	}
	return f.Store.AddWarmStats(ctx, deltas)
}

// Creates a warm shape matched are counted per pool and shape: in the metrics at
// once, in the store at the filler's next pass; counts a pass could not record are
// kept for the next one.
func TestHitsAndMisses(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		// The counts are kept for the pools the store holds.
		if _, err := e.st.CreatePool(t.Context(), e.clk.Now(), e.pools.Views()[0].Pool); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		st := &flakyStats{Store: e.st}
		f, err := warm.New(warm.Options{Store: st, Sandboxes: e.svc, Pools: e.pools, Clock: e.clk, ReplicaID: "r1",
			Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		e.observer = f
		e.fillRunning(f)

		// Two creates take the two warm sandboxes; the third finds none ready.
		for _, key := range []string{"a", "b", "c"} {
			e.create(key, nil)
		}
		key := shape.Key()
		for outcome, want := range map[string]float64{"hit": 2, "miss": 1} {
			if got := claims(t, reg, outcome); got != want {
				t.Errorf("differently_warm_claims_total{outcome=%q} = %v, want %v", outcome, got, want)
			}
		}
		stats := func() []store.WarmStats {
			t.Helper()
			got, err := e.st.ListWarmStats(t.Context(), "alpha")
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := stats(); len(got) != 0 {
			t.Fatalf("recorded before a pass: %+v", got)
		}

		st.fail.Store(true)
		if _, err := f.Pass(t.Context()); err == nil || !strings.Contains(err.Error(), "hits and misses") {
			t.Fatalf("a pass whose store refused the counts: %v, want that error", err)
		}
		e.create("d", nil) // the refills are queued, and nothing runs them here: a miss
		st.fail.Store(false)
		if _, err := f.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := stats()
		if len(got) != 1 || got[0].Shape != key || got[0].Hits != 2 || got[0].Misses != 2 {
			t.Fatalf("recorded %+v, want 2 hits and 2 misses of shape %s", got, key)
		}
		if got[0].ClaimCounts[0] != 2 {
			// The manual clock stands still: both claims took 0.
			t.Fatalf("claim histogram %v, want both claims in the first bucket", got[0].ClaimCounts)
		}
		// Nothing is counted twice.
		if _, err := f.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if again := stats(); again[0].Hits != 2 || again[0].Misses != 2 {
			t.Fatalf("after another pass: %+v", again)
		}
		// Flush, as the daemon calls it at shutdown, records what came since.
		e.create("e", nil)
		if err := f.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if last := stats(); last[0].Hits != 2 || last[0].Misses != 3 {
			t.Fatalf("after Flush: %+v, want the last miss counted", last)
		}
	})
}

// claims is the alpha pool's count of the test shape's creates with outcome, as
// the metrics have it.
func claims(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "differently_warm_claims_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pool"] == "alpha" && labels["shape"] == shape.Key() && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no differently_warm_claims_total{pool=alpha,shape=%s,outcome=%s}", shape.Key(), outcome)
	return 0
}
