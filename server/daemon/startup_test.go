package daemon_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
)

// A daemon that cannot start says why and returns an error: it never panics, and
// never hangs on a database that accepts connections but does not answer.
func TestStartupFailuresAreErrors(t *testing.T) {
	// A port nothing listens on: connections are refused.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	// A listener that takes connections and never says a word.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	for _, tc := range []struct {
		name, db, listen string
		tls              bool
		want             string
	}{
		{name: "database refuses", db: "postgres://postgres@" + refused + "/x?sslmode=disable", want: "database:"},
		{name: "database never answers", db: "postgres://postgres@" + silent.Addr().String() + "/x?sslmode=disable&connect_timeout=1", want: "database:"},
		{name: "listen address in use", listen: busy.Addr().String(), want: "address already in use"},
		{name: "listen address malformed", listen: "127.0.0.1:notaport", want: "listen"},
		{name: "certificate missing", tls: true, want: "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := config.Default()
			cfg.Database.URL = tc.db
			if tc.tls {
				cfg.TLS = config.TLS{CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "missing-key.pem")}
			}
			listen := tc.listen
			if listen == "" {
				listen = "127.0.0.1:0"
			}
			d, err := daemon.New(t.Context(), daemon.Options{Dev: tc.db == "", DataDir: filepath.Join(dir, "data"),
				Listen: listen, Config: cfg, Getenv: func(string) string { return "" }})
			if err == nil {
				d.Close()
				t.Fatal("New succeeded")
			}
			if d != nil {
				t.Errorf("New returned a daemon with its error %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// Plain development mode keeps to its own SQLite file: a DIFFERENTLY_DATABASE_URL
// exported for something else is not written to. With a config file, the variable
// still overrides the file's database, as documented.
func TestDevModeIgnoresTheDatabaseVariable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := "postgres://postgres@" + closed.Addr().String() + "/prod?sslmode=disable"
	closed.Close()
	getenv := func(k string) string {
		if k == config.EnvDatabaseURL {
			return elsewhere
		}
		return ""
	}
	dir := t.TempDir()
	d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: filepath.Join(dir, "data"),
		Listen: "127.0.0.1:0", Getenv: getenv})
	if err != nil {
		t.Fatalf("dev mode used %s: %v", config.EnvDatabaseURL, err)
	}
	got := d.Database()
	d.Close()
	if want := "sqlite://" + filepath.Join(dir, "data", "differently.db"); got != want {
		t.Errorf("database %q, want %q", got, want)
	}

	_, err = daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: filepath.Join(dir, "data2"),
		Listen: "127.0.0.1:0", Config: config.Default(), Getenv: getenv})
	if err == nil || !strings.Contains(err.Error(), "database:") {
		t.Errorf("with a config file the variable was not used: %v", err)
	}
}
