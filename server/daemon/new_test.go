package daemon_test

import (
	"net"
	"testing"

	"github.com/different-ai/differently/server/daemon"
)

// A start that fails after the store is open (here: the address is taken) returns
// the error and releases what it took, instead of panicking on its way out.
func TestNewFailsCleanly(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dataDir := t.TempDir()
	opts := daemon.Options{Dev: true, DataDir: dataDir, Listen: taken.Addr().String(), Getenv: func(string) string { return "" }}
	if d, err := daemon.New(t.Context(), opts); err == nil {
		d.Close()
		t.Fatal("New listened on an address that is taken")
	}
	opts.Listen = "127.0.0.1:0"
	d, err := daemon.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("a start after the failed one: %v", err)
	}
	d.Close()
}
