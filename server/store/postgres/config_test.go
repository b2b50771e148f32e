package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/different-ai/differently/server/store"
)

// The URL's own settings win; where it is silent the store's defaults apply.
func TestPoolConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		url             string
		conns, minConns int32
		connWait        time.Duration
	}{
		{"postgres://u@127.0.0.1/db", 16, 8, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?connect_timeout=3", 16, 8, 3 * time.Second},
		{"postgres://u@127.0.0.1/db?pool_max_conns=5", 5, 2, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?pool_max_conns=1", 1, 0, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?pool_min_conns=0", 16, 0, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?pool_min_conns=3&pool_max_conns=4", 4, 3, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?pool_max_conns=40", 40, 8, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?connect_timeout=0", 16, 8, 0}, // wait for ever, as asked
	} {
		cfg, err := poolConfig(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if cfg.MaxConns != tc.conns || cfg.MinConns != tc.minConns || cfg.ConnConfig.ConnectTimeout != tc.connWait {
			t.Errorf("%s: max conns %d, min conns %d, connect timeout %v; want %d, %d, %v", tc.url, cfg.MaxConns,
				cfg.MinConns, cfg.ConnConfig.ConnectTimeout, tc.conns, tc.minConns, tc.connWait)
		}
	}
	// The kept connections' lifetimes are spread, unless the URL says otherwise.
	for u, want := range map[string]time.Duration{
		"postgres://u@127.0.0.1/db":                                      10 * time.Minute,
		"postgres://u@127.0.0.1/db?pool_max_conn_lifetime=30m":           5 * time.Minute,
		"postgres://u@127.0.0.1/db?pool_max_conn_lifetime_jitter=1m":     time.Minute,
		"postgres://u@127.0.0.1/db?pool_max_conn_lifetime_jitter=0s&x=y": 0,
	} {
		cfg, err := poolConfig(u)
		if err != nil || cfg.MaxConnLifetimeJitter != want {
			t.Errorf("%s: lifetime jitter %v (%v), want %v", u, cfg.MaxConnLifetimeJitter, err, want)
		}
	}
	if _, err := poolConfig("postgres://u@127.0.0.1/db?connect_timeout=soon"); err == nil {
		t.Error("a malformed connect_timeout was accepted")
	}
	// The driver's own variable is the operator's choice too.
	t.Setenv("PGCONNECT_TIMEOUT", "7")
	if cfg, err := poolConfig("postgres://u@127.0.0.1/db"); err != nil || cfg.ConnConfig.ConnectTimeout != 7*time.Second {
		t.Errorf("with PGCONNECT_TIMEOUT=7: %v, %v", cfg.ConnConfig.ConnectTimeout, err)
	}
}

// Errors that mean the server is out of reach are marked store.ErrUnavailable;
// errors of a statement are not.
func TestWrapMarksOutages(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection cut", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"network", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax", &pgconn.PgError{Code: "42601"}, false},
		{"other", errors.New("something else"), false},
	} {
		if got := errors.Is(wrap(tc.err), store.ErrUnavailable); got != tc.want {
			t.Errorf("%s: unavailable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
