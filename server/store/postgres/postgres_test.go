package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/storetest"
)

// baseURL is the test server: DIFFERENTLY_TEST_DATABASE_URL. CI must fail without it, so
// it is only skippable on purpose (DIFFERENTLY_TEST_SKIP_POSTGRES=1).
func baseURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("DIFFERENTLY_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("DIFFERENTLY_TEST_SKIP_POSTGRES") == "1" {
			t.Skip("DIFFERENTLY_TEST_SKIP_POSTGRES=1: PostgreSQL store tests skipped")
		}
		t.Fatal("DIFFERENTLY_TEST_DATABASE_URL is not set: the PostgreSQL store tests need a server " +
			"(for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable); " +
			"set DIFFERENTLY_TEST_SKIP_POSTGRES=1 to skip them deliberately")
	}
	return u
}

// newSchemaURL creates an empty schema for one test, dropped when the test ends, and
// returns the URL that puts it first on the search_path.
func newSchemaURL(t *testing.T) string {
	t.Helper()
	base := baseURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to DIFFERENTLY_TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx passes unknown parameters as runtime parameters
	u.RawQuery = q.Encode()
	return u.String()
}

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
		New: func(t *testing.T) store.Store { return open(t, newSchemaURL(t)) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			return open(t, s.(*postgres.Store).URL())
		},
	})
}

// Replicas starting together on a new database apply each migration once.
func TestConcurrentMigrations(t *testing.T) {
	u := newSchemaURL(t)
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
	if n != 1 {
		t.Fatalf("schema_migrations has %d rows", n)
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := postgres.Open(context.Background(), "postgres://%zz"); err == nil {
		t.Fatal("Open accepted a malformed URL")
	}
}
