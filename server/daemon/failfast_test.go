package daemon_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
)

// A start that cannot listen fails before it writes anything: the data folder, the
// database and the admin token are not created, so a typo leaves nothing to clean up
// and prints no token that will never be used.
func TestListenFailsBeforeTheDataFolder(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct{ listen, want string }{
		{busy.Addr().String(), "address already in use"},
		{"localhost", `listen address "localhost" needs host:port, e.g. 127.0.0.1:8700`},
		{"127.0.0.1:99999", "invalid port"},
		{"70000", "a port is 0 to 65535"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			var out strings.Builder
			d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: dataDir, Listen: tc.listen,
				Getenv: func(string) string { return "" }, Stdout: &out})
			if err == nil {
				d.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if _, serr := os.Stat(dataDir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("the data folder exists after a failed listen (%v)", serr)
			}
			if out.Len() > 0 {
				t.Errorf("printed %q", out.String())
			}
		})
	}
}

// A missing TLS certificate, too, stops the start before the data folder exists.
func TestMissingCertificateFailsBeforeTheDataFolder(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := config.Default()
	cfg.TLS = config.TLS{CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "missing-key.pem")}
	d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: dataDir, Listen: "127.0.0.1:0", Config: cfg,
		Getenv: func(string) string { return "" }})
	if err == nil {
		d.Close()
		t.Fatal("New succeeded")
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error %q does not say certificate", err)
	}
	if _, serr := os.Stat(dataDir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("the data folder exists after a missing certificate (%v)", serr)
	}
}

// A bare port is that port on the loopback address, like the default address.
func TestBarePortListensOnLoopback(t *testing.T) {
	cfg := config.Default()
	cfg.Listen = "0"
	d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: t.TempDir(), Config: cfg,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ip := d.Addr().(*net.TCPAddr).IP; !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("listening on %s, want 127.0.0.1", d.Addr())
	}
}

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{
		"":                "127.0.0.1:8700",
		"18702":           "127.0.0.1:18702",
		":8700":           ":8700",
		"0.0.0.0:8700":    "0.0.0.0:8700",
		"[::1]:8700":      "[::1]:8700",
		"localhost:18702": "localhost:18702",
	} {
		if got, err := daemon.ListenAddress(in); err != nil || got != want {
			t.Errorf("ListenAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"localhost", "127.0.0.1", "-1", "::1"} {
		if got, err := daemon.ListenAddress(bad); err == nil {
			t.Errorf("ListenAddress(%q) = %q, want an error", bad, got)
		}
	}
}

// Two daemons on one SQLite file would run two schedulers on the same sandboxes: the
// second is refused with the first's PID, and once the first stops a new one starts.
func TestSecondDaemonOnTheSameDataDirIsRefused(t *testing.T) {
	dataDir := t.TempDir()
	opts := daemon.Options{Dev: true, DataDir: dataDir, Listen: "127.0.0.1:0", Getenv: func(string) string { return "" }}
	first, err := daemon.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := daemon.New(t.Context(), opts)
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second daemon started on the same data folder")
	}
	var inUse *daemon.InUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() {
		t.Errorf("error %v (%T), want an InUseError naming pid %d", err, err, os.Getpid())
	}
	for _, want := range []string{filepath.Join(dataDir, "differently.db"), "stop that daemon", "--data-dir", "PostgreSQL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	first.Close()
	third, err := daemon.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	third.Close()
}
