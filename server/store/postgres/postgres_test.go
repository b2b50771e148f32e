package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	})
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
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
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
