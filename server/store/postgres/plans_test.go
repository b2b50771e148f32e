package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// TestStatementsKeepGenericPlans: the writes that append events settle on their
// generic plan. PostgreSQL plans a prepared statement afresh for its first five
// runs and then keeps the generic plan unless that looks dearer; a statement whose
// generic plan looks dearer is planned on every run, which for these writes cost
// more server time than the rows' insertion (eventsInsert says why they are built
// as they are). The counts are the server's own, so this asserts no timing.
func TestStatementsKeepGenericPlans(t *testing.T) {
	u := pgtest.SchemaURL(t)
	if strings.Contains(u, "?") {
		u += "&pool_max_conns=1"
	} else {
		u += "?pool_max_conns=1"
	}
	s := open(t, u)
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const runs = 12
	for i := range runs {
		at := t0.Add(time.Duration(i) * time.Second)
		sb := store.Sandbox{ID: ids.At("sbx", at), Org: "org1", Project: "proj1", State: store.StateQueued,
			Pending: []store.Event{{Type: store.EventCreated, To: store.StateQueued}}}
		if _, _, err := s.CreateSandbox(ctx, at, sb); err != nil {
			t.Fatal(err)
		}
		placed, err := s.UpdateSandbox(ctx, sb.ID, at, func(x *store.Sandbox) error {
			x.State, x.Pool = store.StateProvisioning, "alpha"
			x.Pending = append(x.Pending, store.Event{Type: store.EventPlaced, From: store.StateQueued,
				To: store.StateProvisioning, Pool: "alpha", Attempt: 1,
				Candidates: []store.Candidate{{Pool: "alpha", Rank: 1}}})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.UpdateKnownSandboxes(ctx, []store.Sandbox{placed}, at, func(_ int, x *store.Sandbox) error {
			x.State, x.BackendRef = store.StateRunning, "ref"
			x.Pending = append(x.Pending, store.Event{Type: store.EventRunning, From: store.StateProvisioning,
				To: store.StateRunning, Pool: "alpha"})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	plans, err := s.PreparedPlans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appends := 0
	for _, p := range plans {
		if !strings.Contains(p.Statement, "INSERT INTO sandbox_events") || p.GenericPlans+p.Custom <= 1 {
			continue // not an append, or one the connection ran only when it was primed
		}
		appends++
		if p.GenericPlans+p.Custom < runs {
			t.Errorf("ran %d times, want %d: %s", p.GenericPlans+p.Custom, runs, p.Statement)
		}
		if p.Custom > 5 {
			t.Errorf("planned afresh on %d of %d runs (generic %d): %s", p.Custom, p.Custom+p.GenericPlans, p.GenericPlans, p.Statement)
		}
	}
	if appends != 3 {
		t.Fatalf("found %d prepared statements that append events, want 3 (create, update, update of a known row)", appends)
	}
}

// TestBatchesUseThePrimaryKey: a batch's statements find their rows through the
// primary key in the plan a connection keeps, even when it made that plan while the
// table was empty, as every replica of a new installation does. A plan that scans
// the table would read every sandbox for each batch until the table is analyzed.
func TestBatchesUseThePrimaryKey(t *testing.T) {
	s := open(t, pgtest.SchemaURL(t))
	for _, st := range []struct {
		name   string
		sql    string
		params int
	}{
		{"lock", postgres.LockSandboxesSQL, 1},
		{"read", postgres.GetSandboxesSQL, 1},
		{"update", postgres.UpdateSandboxesSQL, postgres.UpdateSandboxesParams},
		{"update with events", postgres.UpdateSandboxesEvsSQL, postgres.UpdateSandboxesEvsArgs},
		{"update of known rows", postgres.UpdateKnownSQL, postgres.UpdateKnownArgs},
	} {
		plan, err := s.ExplainGeneric(t.Context(), st.sql, st.params)
		if err != nil {
			t.Fatal(st.name, err)
		}
		if strings.Contains(plan, "Seq Scan on sandboxes") || !strings.Contains(plan, "sandboxes_pkey") {
			t.Errorf("%s: the generic plan on an empty table does not look rows up by ID:\n%s", st.name, plan)
		}
	}
}

// TestClaimUsesIndexes: the statements a claim runs on their generic plans find
// their rows through an index even when the plan was made on an empty table: the
// shape's ready sandboxes through sandboxes_warm_ready, rather than walking every
// running sandbox of the pool, and an idempotency key through its unique index,
// rather than walking the project's history.
func TestClaimUsesIndexes(t *testing.T) {
	s := open(t, pgtest.SchemaURL(t))
	for _, st := range []struct {
		name, sql string
		params    int
		index     string
	}{
		{"the warm select for a project with a quota", postgres.SelectWarmSQL, 2, "sandboxes_warm_ready"},
		{"the warm select for a project without", postgres.SelectWarmUnlimitedSQL, 4, "sandboxes_warm_ready"},
		{"the idempotency key's lookup", postgres.SelectByKeySQL, 3, "sandboxes_idempotency"},
	} {
		plan, err := s.ExplainGeneric(t.Context(), st.sql, st.params)
		if err != nil {
			t.Fatal(st.name, err)
		}
		if strings.Contains(plan, "Seq Scan on sandboxes") || !strings.Contains(plan, st.index) {
			t.Errorf("%s: the generic plan does not use %s:\n%s", st.name, st.index, plan)
		}
	}
}
