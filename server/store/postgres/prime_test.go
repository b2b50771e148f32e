package postgres_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// TestConnectionsArePrimed: a store's connections hold the hot statements, the reads
// with their generic plans made, before any request runs; and a warm sandbox's
// making, its claim (with and without a key), a create, an update and a read run
// no statement the connection was not primed for, so none of them pays for a
// statement's first run. A connection opened later is primed too. The counts are
// the server's (pg_prepared_statements).
func TestConnectionsArePrimed(t *testing.T) {
	u, err := url.Parse(pgtest.SchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	// One connection, open from the start: every statement lands on it.
	q.Set("pool_max_conns", "1")
	q.Set("pool_min_conns", "1")
	u.RawQuery = q.Encode()
	s := open(t, u.String())
	ctx := t.Context()

	// isPrimed checks the connection PreparedPlans runs on, and returns what it holds.
	isPrimed := func() map[string]postgres.PreparedPlan {
		t.Helper()
		plans, err := s.PreparedPlans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byText := map[string]postgres.PreparedPlan{}
		for _, p := range plans {
			byText[p.Statement] = p
		}
		reads, writes := postgres.PrimedStatements()
		for _, sql := range reads {
			if p, ok := byText[sql]; !ok || p.GenericPlans < 1 {
				t.Errorf("read not primed on its generic plan (%+v, found %v): %s", p, ok, sql)
			}
		}
		for _, sql := range writes {
			if _, ok := byText[sql]; !ok {
				t.Errorf("write not prepared: %s", sql)
			}
		}
		return byText
	}
	byText := isPrimed()

	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	admit := func(store.Admission, *store.Sandbox) error { return nil }
	for i := range 2 {
		// The filler's warm sandboxes: created, then running.
		at := t0.Add(time.Duration(i) * time.Second)
		warm, _, err := s.CreateSandboxAdmitted(ctx, at, store.Sandbox{ID: ids.At("sbx", at), Org: store.WarmOrg,
			Project: "alpha.k", Resources: adapters.Resources{CPU: 1},
			Pending: []store.Event{{Type: store.EventCreated, To: store.StateQueued}}}, admit)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateSandbox(ctx, warm.ID, at, func(sb *store.Sandbox) error {
			sb.State, sb.Pool, sb.BackendRef = store.StateRunning, "alpha", "ref-"+warm.ID
			sb.Pending = append(sb.Pending, store.Event{Type: store.EventStarted, From: store.StateQueued, To: store.StateRunning})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(_ store.Admission, warm store.Sandbox, ins *store.Sandbox) error {
		ins.State, ins.Pool, ins.BackendRef = store.StateRunning, warm.Pool, warm.BackendRef
		ins.Pending = append(ins.Pending, store.Event{Type: store.EventClaimed, To: store.StateRunning, Pool: warm.Pool})
		return nil
	}
	now := t0.Add(time.Minute)
	for _, key := range []string{"", "k"} {
		out, created, err := s.ClaimWarm(ctx, now, store.Sandbox{ID: "ignored", Org: "org1", Project: "proj1",
			Resources: adapters.Resources{CPU: 1}, IdempotencyKey: key}, "alpha", "alpha.k", claim)
		if err != nil || !created {
			t.Fatalf("claim with key %q: created %v, %v", key, created, err)
		}
		if _, err := s.GetSandbox(ctx, out.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.CreateSandboxAdmitted(ctx, now, store.Sandbox{ID: ids.At("sbx", now), Org: "org1", Project: "proj1",
		IdempotencyKey: "cold", Pending: []store.Event{{Type: store.EventCreated, To: store.StateQueued}}}, admit); err != nil {
		t.Fatal(err)
	}

	after, err := s.PreparedPlans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range after {
		if _, ok := byText[p.Statement]; !ok {
			t.Errorf("ran a statement its connection was not primed for: %s", p.Statement)
		}
	}
	// A connection opened later, as the pool replaces one, is primed as it opens.
	s.ResetPool()
	isPrimed()
}
