package postgres_test

import (
	"context"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
)

// TestKnownWritesSkipTheRead: a row as a create or an update returned it is written
// as known, in one round trip, with its events; a row someone changed since is read
// and written from what is stored. The storetest suite checks the outcomes on both
// stores; this checks which way the PostgreSQL store went.
func TestKnownWritesSkipTheRead(t *testing.T) {
	s := open(t, pgtest.SchemaURL(t))
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	created, _, err := s.CreateSandboxAdmitted(ctx, t0, store.Sandbox{ID: "sbx_known", Org: "o", Project: "p",
		State: store.StateProvisioning, Pool: "alpha", ClaimedBy: "r1",
		ClaimExpiresAt: new(t0.Add(time.Minute + 1234)), // finer than the column keeps
		Pending:        []store.Event{{Type: store.EventCreated, To: store.StateProvisioning, Pool: "alpha"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	toRunning := func(_ int, sb *store.Sandbox) error {
		sb.Pending = append(sb.Pending, store.Event{Type: store.EventRunning, From: sb.State, To: store.StateRunning})
		sb.State, sb.BackendRef = store.StateRunning, "ref-1"
		return nil
	}
	out, errs, err := s.UpdateKnownSandboxes(ctx, []store.Sandbox{created}, t0.Add(time.Second), toRunning)
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if n := s.KnownReread(); n != 0 {
		t.Fatalf("the row a create returned was read again (%d rereads)", n)
	}
	got, err := s.GetSandbox(ctx, "sbx_known")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateRunning || got.Version != created.Version+1 || !reflect.DeepEqual(got, out[0]) {
		t.Fatalf("stored %+v\nreturned %+v", got, out[0])
	}

	// The row an update returned is known too.
	labelled := func(_ int, sb *store.Sandbox) error { sb.Labels = map[string]string{"k": "v"}; return nil }
	if _, _, err := s.UpdateKnownSandboxes(ctx, out, t0.Add(2*time.Second), labelled); err != nil {
		t.Fatal(err)
	}
	if n := s.KnownReread(); n != 0 {
		t.Fatalf("the row an update returned was read again (%d rereads)", n)
	}

	// out[0] is stale now: the write goes through the read, on the stored labels.
	var saw []map[string]string
	out2, errs, err := s.UpdateKnownSandboxes(ctx, out, t0.Add(3*time.Second), func(_ int, sb *store.Sandbox) error {
		saw = append(saw, maps.Clone(sb.Labels))
		sb.Labels = map[string]string{"k": sb.Labels["k"], "k2": "v2"}
		return nil
	})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if n := s.KnownReread(); n != 1 {
		t.Fatalf("a stale row: %d rereads, want 1", n)
	}
	if len(saw) != 2 || saw[1]["k"] != "v" || out2[0].Labels["k"] != "v" || out2[0].Labels["k2"] != "v2" || out2[0].Version != created.Version+3 {
		t.Fatalf("fn saw %v, wrote %+v", saw, out2[0])
	}
	settle(t, s.URL())
	events, _, err := s.ListEvents(ctx, store.EventFilter{SandboxID: "sbx_known"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].To != store.StateRunning {
		t.Fatalf("events %+v, want created and running, once each", events)
	}
}

// TestKnownWriteAfterAWait: a write of a held row that waits for another
// transaction's lock on it, and finds the row changed when that commits, writes
// nothing over the change: it goes through the read, on the committed row. (On a
// TID scan PostgreSQL's recheck after such a wait long skipped the scan's own
// condition, so the held version must be checked on the row the scan returns.)
func TestKnownWriteAfterAWait(t *testing.T) {
	s := open(t, pgtest.SchemaURL(t))
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	held, _, err := s.CreateSandboxAdmitted(ctx, t0, store.Sandbox{ID: "sbx_waits", Org: "o", Project: "p",
		State: store.StateProvisioning, Pool: "alpha", ClaimedBy: "r1", ClaimExpiresAt: new(t0.Add(time.Minute))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := pgtest.Connect(t, s.URL())
	defer other.Close(context.Background())
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// Another replica's write, as UpdateSandboxes makes it: a new version, the
	// claim unchanged.
	if _, err := tx.Exec(ctx, `UPDATE sandboxes SET state = 'terminating', version = version + 1 WHERE id = $1`, held.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out  []store.Sandbox
		errs []error
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.out, r.errs, r.err = s.UpdateKnownSandboxes(ctx, []store.Sandbox{held}, t0.Add(time.Second), func(_ int, sb *store.Sandbox) error {
			sb.Reason = "written from " + string(sb.State)
			return nil
		})
		done <- r
	}()
	// Each ask is a round trip; the test's deadline bounds the wait.
	watch := pgtest.Connect(t, s.URL())
	defer watch.Close(context.Background())
	for {
		var waiting bool
		if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH up AS%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.errs[0] != nil {
		t.Fatal(r.err, r.errs)
	}
	got, err := s.GetSandbox(ctx, held.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateTerminating || got.Reason != "written from terminating" || got.Version != held.Version+2 || s.KnownReread() != 1 {
		t.Fatalf("after the wait the row is %+v (rereads %d); want the other write kept and this one made on it", got, s.KnownReread())
	}
}
