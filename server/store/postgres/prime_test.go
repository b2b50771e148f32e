package postgres_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// openPrimed opens a store of a new schema on one connection, open from the start
// so that every statement lands on it, once that connection is primed; u is its URL.
func openPrimed(t *testing.T) (s *postgres.Store, u string) {
	t.Helper()
	parsed, err := url.Parse(pgtest.SchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	q.Set("pool_max_conns", "1")
	q.Set("pool_min_conns", "1")
	parsed.RawQuery = q.Encode()
	s = open(t, parsed.String())
	s.WaitPrimed()
	return s, parsed.String()
}

// TestConnectionsArePrimed: a store's connections hold the hot statements, with
// their generic plans made, before any request runs; a warm sandbox's making, its
// claim (with and without a key), a create, an update and a read run no statement
// but those, so none of them pays for a statement's first run; priming leaves no
// row behind; and a connection opened later is primed too. The counts are the
// server's (pg_prepared_statements).
func TestConnectionsArePrimed(t *testing.T) {
	s, _ := openPrimed(t)
	ctx := t.Context()
	hot, all := postgres.PrimedStatements()

	// runs reads how often each statement prepared on the connection ran, and checks
	// that the hot ones ran on their generic plans.
	runs := func() map[string]int64 {
		t.Helper()
		plans, err := s.PreparedPlans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		generic := map[string]bool{}
		for _, p := range plans {
			out[p.Statement] = p.GenericPlans + p.Custom
			generic[p.Statement] = p.GenericPlans > 0
		}
		for _, sql := range hot {
			if !generic[sql] {
				t.Errorf("not primed on its generic plan (%d runs): %s", out[sql], sql)
			}
		}
		return out
	}
	before := runs()

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

	for sql, n := range runs() {
		if n > before[sql] && !slices.Contains(all, sql) && !strings.Contains(sql, "pg_prepared_statements") {
			t.Errorf("ran a statement its connection was not primed for: %s", sql)
		}
	}
	// The rows priming inserted were taken back: only the test's are stored.
	if left, _, err := s.ListSandboxes(ctx, store.SandboxFilter{Org: "_primed"}); err != nil || len(left) > 0 {
		t.Errorf("priming left sandboxes behind: %+v, %v", left, err)
	}
	// A connection opened later, as the pool replaces one, is primed as it opens.
	s.ResetPool()
	runs()
}

// A column whose type a migration changed makes a primed statement fail once on a
// connection, as any cached statement does, and not for as long as the connection
// lives: the statement cache drops it and prepares it again.
func TestPrimedStatementsSurviveATypeChange(t *testing.T) {
	s, u := openPrimed(t)
	ctx := t.Context()
	// A quota sends creates through the transaction that reads the project first.
	if _, err := s.PutProject(ctx, time.Now(), store.Project{Org: "org1", Name: "proj1", Quota: store.Quota{Sandboxes: 10}}); err != nil {
		t.Fatal(err)
	}
	other := pgtest.Connect(t, u)
	if _, err := other.Exec(ctx, `ALTER TABLE sandboxes ALTER COLUMN template TYPE varchar(200)`); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for i := range 3 {
		at := time.Date(2026, 1, 2, 3, 4, 5+i, 0, time.UTC)
		_, _, err := s.CreateSandboxAdmitted(ctx, at, store.Sandbox{ID: ids.At("sbx", at), Org: "org1", Project: "proj1"},
			func(store.Admission, *store.Sandbox) error { return nil })
		errs = append(errs, err)
	}
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("creates after the type change: %v", errs)
	}
}
