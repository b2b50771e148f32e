package escape_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/escape"
	"github.com/different-ai/differently/adapters/local"
)

const (
	pidsMax   = 64
	memoryMiB = 32
)

// TestLocalContainsEveryEscape: no check gets anything out of a local sandbox.
// It fails on a host that cannot run bwrap unless DIFFERENTLY_SKIP_LOCAL=1.
func TestLocalContainsEveryEscape(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	root := filepath.Join(data, "local")
	a, err := local.New(t.Context(), local.Config{Root: root, PidsMax: pidsMax})
	if err != nil {
		if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
			t.Skipf("DIFFERENTLY_SKIP_LOCAL=1: %v", err)
		}
		t.Fatalf("local adapter: %v (set DIFFERENTLY_SKIP_LOCAL=1 to skip on a host without bwrap)", err)
	}
	h := escape.Host{Adapter: a, DataDir: data, Root: a.Root(), PidsMax: pidsMax, MemoryMiB: memoryMiB, Installation: "escape"}
	// What this host cannot enforce, the adapter says it does not; those checks
	// are then expected to get through, and the test says so rather than pass.
	unenforced := map[string]bool{
		"fork-bomb":     !a.Enforces("pids"),
		"exceed-memory": !a.Enforces("memory"),
	}
	for _, c := range escape.Checks() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if unenforced[c.Name] {
				t.Skipf("this host offers the adapter no cgroup controller for it: %s", a.Limits())
			}
			leak, err := c.Run(t.Context(), h)
			if err != nil {
				t.Fatal(err)
			}
			if leak != "" {
				t.Errorf("escaped: %s", leak)
			}
		})
	}
}

// TestDevhostExposes documents what devhost, which isolates nothing, lets a
// sandbox do: every check gets through but those that depend on the host: with
// a cgroup v2 hierarchy devhost tracks and kills a command's leftovers, without
// one a process that sheds its environment survives; the kernel's settings and
// the host's devices are open to a daemon running as root only.
func TestDevhostExposes(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	a, err := devhost.New(filepath.Join(data, "devhost"), devhost.WithIgnoreResources())
	if err != nil {
		t.Fatal(err)
	}
	h := escape.Host{Adapter: a, DataDir: data, Root: a.Root(), PidsMax: pidsMax, MemoryMiB: memoryMiB, Installation: "escape"}
	hostDependent := map[string]bool{"outlive-delete": true}
	// These need the daemon's user to be root; a daemon that is not cannot leak them.
	if os.Geteuid() != 0 {
		hostDependent["write-host-sysctl"] = true
		hostDependent["own-host-device"] = true
	}
	for _, c := range escape.Checks() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			leak, err := c.Run(t.Context(), h)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case hostDependent[c.Name]:
				t.Logf("on this host: %q", leak)
			case leak == "":
				t.Errorf("devhost contained %s; the check no longer tells isolation from none", c.Name)
			default:
				t.Logf("devhost exposes: %s", leak)
			}
		})
	}
}
