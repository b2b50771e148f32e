package retention_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/retention"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

// A pruner keeps the newest events of a live sandbox and drops the history of one
// that ended longer ago than the retention allows, and counts what it deleted.
func TestPrune(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	by := lifecycle.Scheduler("test")
	newSandbox := func(id string) {
		sb := store.Sandbox{ID: id, Org: "o", Project: "p"}
		if err := lifecycle.Create(&sb, clk.Now(), by); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.CreateSandbox(ctx, clk.Now(), sb); err != nil {
			t.Fatal(err)
		}
	}
	change := func(id string, fn func(*store.Sandbox) error) {
		if _, err := st.UpdateSandbox(ctx, id, clk.Now(), fn); err != nil {
			t.Fatal(err)
		}
	}
	// live: created, then five waits with new reasons: six events.
	newSandbox("sbx_live")
	for _, why := range []string{"a", "b", "c", "d", "e"} {
		change("sbx_live", func(sb *store.Sandbox) error { return lifecycle.Wait(sb, why, "", clk.Now(), nil, by) })
	}
	// ended: created, terminating, terminated.
	newSandbox("sbx_ended")
	change("sbx_ended", func(sb *store.Sandbox) error { return lifecycle.Terminate(sb, "deleted", clk.Now(), by) })
	change("sbx_ended", func(sb *store.Sandbox) error { return lifecycle.Terminated(sb, "deleted", by) })

	reg := prometheus.NewRegistry()
	p, err := retention.New(st, clk, store.EventRetention{PerSandbox: 4, AfterTerminal: time.Hour}, 0, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	count := func(id string) int {
		items, _, err := st.ListEvents(ctx, store.EventFilter{SandboxID: id, Limit: store.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		return len(items)
	}

	n, err := p.Once(ctx)
	if err != nil || n != 2 {
		t.Fatalf("first prune deleted %d (%v), want the live sandbox's 2 oldest", n, err)
	}
	if count("sbx_live") != 4 || count("sbx_ended") != 3 {
		t.Fatalf("kept %d and %d events", count("sbx_live"), count("sbx_ended"))
	}
	items, _, err := st.ListEvents(ctx, store.EventFilter{SandboxID: "sbx_live"})
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Message != "b" {
		t.Fatalf("oldest kept event %+v, want the newest four", items[0])
	}

	clk.Advance(time.Hour + time.Second)
	if n, err := p.Once(ctx); err != nil || n != 3 {
		t.Fatalf("second prune deleted %d (%v), want the ended sandbox's 3", n, err)
	}
	if count("sbx_ended") != 0 || count("sbx_live") != 4 {
		t.Fatalf("kept %d and %d events", count("sbx_live"), count("sbx_ended"))
	}
	if got := pruned(t, reg); got != 5 {
		t.Fatalf("differently_events_pruned_total = %v", got)
	}

	// No retention: nothing is asked of the store.
	off, err := retention.New(st, clk, store.EventRetention{}, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := off.Once(ctx); n != 0 || err != nil {
		t.Fatalf("unbounded retention pruned %d (%v)", n, err)
	}
}

// pruned reads differently_events_pruned_total, the registry's one metric.
func pruned(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "differently_events_pruned_total" {
		t.Fatalf("gather: %v, %d families", err, len(mfs))
	}
	return mfs[0].GetMetric()[0].GetCounter().GetValue()
}
