// Package pgtest gives each test its own empty PostgreSQL schema on the server named
// by DIFFERENTLY_TEST_DATABASE_URL, dropped when the test ends.
//
// Without that variable the test fails: CI must not pass by skipping the database.
// DIFFERENTLY_TEST_SKIP_POSTGRES=1 skips on purpose, for a machine without a server.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BaseURL returns DIFFERENTLY_TEST_DATABASE_URL, failing or skipping t without it.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DIFFERENTLY_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("DIFFERENTLY_TEST_SKIP_POSTGRES") == "1" {
			t.Skip("DIFFERENTLY_TEST_SKIP_POSTGRES=1: PostgreSQL tests skipped")
		}
		t.Fatal("DIFFERENTLY_TEST_DATABASE_URL is not set: PostgreSQL tests need a server " +
			"(for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable); " +
			"set DIFFERENTLY_TEST_SKIP_POSTGRES=1 to skip them deliberately")
	}
	return u
}

// SchemaURL creates an empty schema for one test and returns a URL that puts it first
// on the search_path. The schema is dropped when the test ends.
func SchemaURL(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to DIFFERENTLY_TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	schema := "test_" + hex.EncodeToString(randomBytes(8))
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
	if !q.Has("pool_min_conns") {
		// Connections open only when used: tests open many stores at once, and each
		// holding the store's default minimum would pass the server's limit
		// (max_connections, 100 by default).
		q.Set("pool_min_conns", "0")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Connect opens one connection to url, a store's URL: pgx.Connect would send the
// pool's parameters (pool_min_conns) to the server, which refuses them. The
// connection closes when the test ends.
func Connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
