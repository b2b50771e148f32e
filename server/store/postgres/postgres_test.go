package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

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
