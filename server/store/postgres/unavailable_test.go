package postgres_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// A server that refuses connections, whatever it answers while refusing, is an
// outage (store.ErrUnavailable), which the API answers with 503 and Retry-After:
// one starting up or in recovery (57P03), out of connection slots (53300), not
// accepting connections to the database (55000), shutting down (57P01), or no
// server at all on the port. (A refusal that says the configuration is wrong is not:
// TestMisconfiguredConnectionIsNotUnavailable.)
func TestRefusedConnectionIsUnavailable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	addrs := map[string]string{"closed port": closedAddr}
	for _, code := range []string{"57P03", "53300", "55000", "57P01", "08006"} {
		addrs[code] = pgtest.Refusing(t, code)
	}
	for name, addr := range addrs {
		_, err := postgres.Open(context.Background(), "postgres://u@"+addr+"/db?sslmode=disable&connect_timeout=20")
		if err == nil {
			t.Fatalf("%s: opened", name)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: not unavailable: %v", name, err)
		}
	}
}

// A refusal that says the configuration is wrong (a rejected login, 28000; a wrong
// password, 28P01; no such database, 3D000; no CONNECT privilege, 42501) is not an
// outage: waiting will not mend it, so it stays an internal error, logged, rather
// than a 503 telling clients to try again.
func TestMisconfiguredConnectionIsNotUnavailable(t *testing.T) {
	for _, code := range []string{"28000", "28P01", "3D000", "42501"} {
		addr := pgtest.Refusing(t, code)
		_, err := postgres.Open(context.Background(), "postgres://u@"+addr+"/db?sslmode=disable&connect_timeout=20")
		if err == nil {
			t.Fatalf("%s: opened", code)
		}
		if errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: unavailable: %v", code, err)
		}
	}
}
