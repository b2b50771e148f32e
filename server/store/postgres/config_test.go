package postgres

import (
	"testing"
	"time"
)

// The URL's own settings win; where it is silent the store's defaults apply.
func TestPoolConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		url      string
		conns    int32
		connWait time.Duration
	}{
		{"postgres://u@127.0.0.1/db", 16, DefaultConnectTimeout},
		{"postgres://u@127.0.0.1/db?connect_timeout=3", 16, 3 * time.Second},
		{"postgres://u@127.0.0.1/db?pool_max_conns=5", 5, DefaultConnectTimeout},
	} {
		cfg, err := poolConfig(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if cfg.MaxConns != tc.conns || cfg.ConnConfig.ConnectTimeout != tc.connWait {
			t.Errorf("%s: max conns %d, connect timeout %v; want %d, %v", tc.url, cfg.MaxConns,
				cfg.ConnConfig.ConnectTimeout, tc.conns, tc.connWait)
		}
	}
	if _, err := poolConfig("postgres://u@127.0.0.1/db?connect_timeout=soon"); err == nil {
		t.Error("a malformed connect_timeout was accepted")
	}
}
