// Package daemontest starts a development daemon in the test's own process, on a
// loopback port, for the tests of the packages that talk to one (the Go client, the
// command line, the console, the Terraform provider).
package daemontest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/daemon"
)

// Dev is a running development daemon: SQLite in a folder of the test's, the dev
// pools, and the admin token it wrote.
type Dev struct {
	URL, Token, DataDir string
	// Client is an admin client of it.
	Client *client.Client
}

// Start starts a development daemon that runs until the test ends; adjust, when
// not nil, changes its options first (a config file, a scheduler hook). A daemon
// that fails to start or to stop fails the test.
func Start(t testing.TB, adjust func(*daemon.Options)) *Dev {
	t.Helper()
	dataDir := t.TempDir()
	opts := daemon.Options{
		Dev:     true,
		DataDir: dataDir,
		Listen:  "127.0.0.1:0",
		// Nothing of the machine's environment reaches the daemon.
		Getenv: func(string) string { return "" },
		Stdout: io.Discard,
	}
	if adjust != nil {
		adjust(&opts)
	}
	d, err := daemon.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, daemon.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	dev := &Dev{URL: d.URL(), Token: strings.TrimSpace(string(tok)), DataDir: dataDir}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon Run: %v", err)
		}
	})
	if dev.Client, err = client.New(dev.URL, dev.Token); err != nil {
		t.Fatal(err)
	}
	return dev
}
