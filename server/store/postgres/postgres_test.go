package postgres_test

import (
	"context"
	neturl "net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/storetest"
)

func open(t *testing.T, u string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Driver{
		New: func(t *testing.T) store.Store { return open(t, pgtest.SchemaURL(t)) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			return open(t, s.(*postgres.Store).URL())
		},
		Settle: func(t *testing.T, s store.Store) { settle(t, s.(*postgres.Store).URL()) },
	})
}

// settle waits until every transaction of the server that took its ID before the
// call has ended, after which ListEvents shows every event committed before it
// (see server/store/postgres/events.go). It takes an ID of its own, committed at
// once, and asks for the oldest running transaction until it is past that ID: each
// ask is a round trip, so this is no tight spin, and the test's deadline bounds it.
func settle(t *testing.T, url string) {
	t.Helper()
	ctx := t.Context()
	conn := pgtest.Connect(t, url)
	defer conn.Close(context.Background())
	var mine string
	if err := conn.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&mine); err != nil {
		t.Fatal(err)
	}
	for {
		var past bool
		if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::text::xid8`, mine).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			return
		}
	}
}

// Replicas starting together on a new database apply each migration once.
func TestConcurrentMigrations(t *testing.T) {
	u := pgtest.SchemaURL(t)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(context.Background(), u)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		defer stores[i].Close()
	}
	conn := pgtest.Connect(t, u)
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	ms, err := store.Migrations(postgres.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want one per migration (%d)", n, len(ms))
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := postgres.Open(context.Background(), "postgres://%zz"); err == nil {
		t.Fatal("Open accepted a malformed URL")
	}
}

// The change feed crosses replicas: a store hears the writes another store makes on
// the same schema, and nothing of another schema's, even on the same database. The
// foreign write is made first, so that if it were heard it would come before ours.
func TestWatchAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	u := pgtest.SchemaURL(t)
	listener, writer := open(t, u), open(t, u)
	stranger := open(t, pgtest.SchemaURL(t))
	changes := make(chan store.Change, 16)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- listener.Watch(wctx, func(c store.Change) { changes <- c }) }()
	defer func() {
		stop()
		<-done
	}()
	next := func() store.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-ctx.Done():
			t.Fatal("no change heard before the test's deadline")
		}
		return store.Change{}
	}
	if c := next(); c.Kind != store.ChangeResync {
		t.Fatalf("first change %+v, want a resync", c)
	}
	now := time.Now()
	if _, _, err := stranger.CreateSandbox(ctx, now, store.Sandbox{ID: ids.New("sbx"), Org: "o", Project: "p"}); err != nil {
		t.Fatal(err)
	}
	sb, _, err := writer.CreateSandbox(ctx, now, store.Sandbox{ID: ids.New("sbx"), Org: "o", Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c != (store.Change{Kind: store.ChangeSandbox, ID: sb.ID, State: store.StateQueued}) {
		t.Fatalf("heard %+v, want the other replica's create of %s", c, sb.ID)
	}
}

// A retry of a create in a project with a quota that reads the Idempotency-Key
// before the create it repeats commits, and then waits for the project's lock
// behind it, gets that create's sandbox back: it is not refused for the room the
// sandbox it repeats takes. The lock is held from outside until both creates wait
// for it, so that both have looked the key up and found nothing.
func TestAdmissionRetryBehindTheProjectLock(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.SchemaURL(t))
	if _, err := s.PutProject(ctx, time.Now(), store.Project{Org: "org1", Name: "p", Quota: store.Quota{Sandboxes: 1}}); err != nil {
		t.Fatal(err)
	}
	c := pgtest.Connect(t, s.URL())
	defer c.Close(context.Background())
	// The project's lock, as the store takes it.
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('differently.project:' || 'org1' || '/' || 'p', 0))`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		id      string
		created bool
		err     error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			sb := store.Sandbox{ID: ids.New("sbx"), Org: "org1", Project: "p", IdempotencyKey: "same"}
			out, created, err := s.CreateSandboxAdmitted(ctx, time.Now(), sb, func(a store.Admission, _ *store.Sandbox) error {
				return store.CheckQuota(sb.Org, sb.Project, a.Quota, a.Usage, sb.Resources)
			})
			results[i] = result{out.ID, created, err}
		})
	}
	// Both creates wait for the lock once they have read the key: poll the lock
	// table (each query is a round trip, so this is no tight spin), bounded by the
	// test's deadline.
	for {
		var waiting int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
	}
	if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("create %d: %v", i, r.err)
		}
	}
	if results[0].id != results[1].id || results[0].created == results[1].created {
		t.Fatalf("results %+v, want one sandbox, created once", results)
	}
}

// A pool stored before pools had a source is the API's after the upgrade: the
// daemon's next start takes over those its config file names.
func TestPoolsFromBeforeTheSourceAreTheAPIs(t *testing.T) {
	ctx := context.Background()
	u := pgtest.SchemaURL(t)
	ms, err := store.Migrations(postgres.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	before := slices.IndexFunc(ms, func(m store.Migration) bool { return m.Name == "pool_source" })
	if before < 0 {
		t.Fatal("no pool_source migration")
	}
	conn := pgtest.Connect(t, u)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:before] {
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO pools (name, adapter, trust, region, max_concurrency, max_starting,
		cost_cpu_hour, cost_memory_gib_hour, config, credentials_env, features, created_at, updated_at, version)
		VALUES ('old', 'fake', 'private', '', 0, 0, 0, 0, '{}', '', '[]', now(), now(), 1)`); err != nil {
		t.Fatal(err)
	}
	p, err := open(t, u).GetPool(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != store.PoolFromAPI {
		t.Fatalf("source after the upgrade: %q", p.Source)
	}
}

// SchemaVersion reads the schema the daemon would migrate, the first of the
// search_path that exists, and says so when none does.
func TestSchemaVersion(t *testing.T) {
	ctx := context.Background()
	url := pgtest.SchemaURL(t)
	cur, latest, err := postgres.SchemaVersion(ctx, url)
	if err != nil || cur != 0 || latest == 0 {
		t.Fatalf("empty schema: %d, %d, %v", cur, latest, err)
	}
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if cur, latest, err = postgres.SchemaVersion(ctx, url); err != nil || cur != latest {
		t.Fatalf("migrated schema: %d of %d, %v", cur, latest, err)
	}
	nowhere, err := neturl.Parse(pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := nowhere.Query()
	q.Set("search_path", "differently_no_such_schema")
	nowhere.RawQuery = q.Encode()
	if _, _, err := postgres.SchemaVersion(ctx, nowhere.String()); err == nil {
		t.Fatal("a search_path with no schema was reported as fine")
	}
}

// rawEvent inserts an event of sandbox id as the store does, on conn (inside its
// transaction, if one is open).
func rawEvent(t *testing.T, conn interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, id string, typ store.EventType) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `INSERT INTO sandbox_events (sandbox_id, org, project, at, type,
		from_state, to_state, actor, pool, attempt, code, message, duration_ms, candidates)
		VALUES ($1, 'o', 'p', now(), $2, 'queued', 'queued', 'test', '', 0, '', '', 0, '')`, id, string(typ)); err != nil {
		t.Fatal(err)
	}
}

func appendEvent(t *testing.T, s store.Store, id string, typ store.EventType) {
	t.Helper()
	if _, err := s.UpdateSandbox(t.Context(), id, time.Now(), func(sb *store.Sandbox) error {
		sb.Pending = append(sb.Pending, store.Event{Type: typ, From: sb.State, To: sb.State, Actor: "test"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func types(es []store.Event) []store.EventType {
	out := []store.EventType{}
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}

// A follower misses no event when transactions commit in another order than they
// took their IDs: an event whose transaction took the earlier ID and commits last
// is not passed by a cursor handed out while it was open. Meanwhile a listing of
// one sandbox, ordered by seq under the sandbox's row lock, shows the other at once.
func TestEventsFollowOutOfOrderCommits(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.SchemaURL(t))
	early, late := ids.New("sbx"), ids.New("sbx")
	for _, id := range []string{early, late} {
		if _, _, err := s.CreateSandbox(ctx, time.Now(), store.Sandbox{ID: id, Org: "o", Project: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Connect(t, s.URL())
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())    //nolint:errcheck // a no-op after Commit
	rawEvent(t, tx, early, store.EventWaiting) // takes its transaction's ID first
	appendEvent(t, s, late, store.EventFailed) // a later ID, committed first

	got, cursor, err := s.ListEvents(ctx, store.EventFilter{After: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("listed %v while an older transaction with an event was open", types(got))
	}
	bySandbox, _, err := s.ListEvents(ctx, store.EventFilter{SandboxID: late})
	if err != nil || len(bySandbox) != 1 {
		t.Fatalf("the sandbox's own listing: %v, %v", types(bySandbox), err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, s.URL())
	got, _, err = s.ListEvents(ctx, store.EventFilter{After: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.EventType{store.EventWaiting, store.EventFailed}; !slices.Equal(types(got), want) {
		t.Fatalf("after the older transaction committed: %v, want %v", types(got), want)
	}
}

// The events of one sandbox come in seq order in a listing of every event, even
// when a write that took its transaction ID before another's (by locking another
// row first, as a batch does) waited for the other's row lock and appended after it.
func TestEventsOfASandboxInOrder(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.SchemaURL(t))
	id := ids.New("sbx")
	if _, _, err := s.CreateSandbox(ctx, time.Now(), store.Sandbox{ID: id, Org: "o", Project: "p"}); err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Connect(t, s.URL())
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())                                //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil { // the earlier ID
		t.Fatal(err)
	}
	appendEvent(t, s, id, store.EventPlaced)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sandboxes WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	rawEvent(t, tx, id, store.EventRunning)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, s.URL())
	got, _, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.EventType{store.EventPlaced, store.EventRunning}; !slices.Equal(types(got), want) || got[0].Seq > got[1].Seq {
		t.Fatalf("listed %v (seqs %d, %d), want %v in seq order", types(got), got[0].Seq, got[1].Seq, want)
	}
}

// Changes that queue while the notifier waits out its gap after a NOTIFY go out
// together in the next one, and Close still announces them; with a short gap, a
// change goes out when the gap ends, without Close. The long gap makes sure the two
// creates fall inside it.
func TestNotifyCoalesces(t *testing.T) {
	for _, gap := range []time.Duration{time.Hour, 50 * time.Millisecond} {
		t.Run(gap.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			u := pgtest.SchemaURL(t)
			s, err := postgres.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.SetNotifyGap(gap)
			conn := pgtest.Connect(t, u)
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.NotifyChannel()}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			create := func() string {
				t.Helper()
				sb, _, err := s.CreateSandbox(ctx, time.Now(), store.Sandbox{ID: ids.New("sbx"), Org: "o", Project: "p"})
				if err != nil {
					t.Fatal(err)
				}
				return "s " + sb.ID + " queued"
			}
			first := create()
			if n, err := conn.WaitForNotification(ctx); err != nil || n.Payload != first {
				t.Fatalf("first NOTIFY %+v, %v; want %q", n, err, first)
			}
			if gap < time.Hour {
				second := create()
				if n, err := conn.WaitForNotification(ctx); err != nil || n.Payload != second {
					t.Fatalf("next NOTIFY %+v, %v; want %q", n, err, second)
				}
				return
			}
			// The notifier now waits out its gap.
			second, third := create(), create()
			s.Close()
			n, err := conn.WaitForNotification(ctx)
			if want := second + "\n" + third; err != nil || n.Payload != want {
				t.Fatalf("next NOTIFY %+v, %v; want both changes in one: %q", n, err, want)
			}
		})
	}
}
