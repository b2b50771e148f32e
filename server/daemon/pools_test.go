package daemon_test

import (
	"path/filepath"
	"testing"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
)

// A config file's pools are written once: restarting with the same file leaves the
// stored pool (and its version) alone, even though YAML numbers decode as integers.
func TestConfigPoolsAreNotRewrittenOnRestart(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte("pools:\n  - name: sim\n    adapter: fake\n    config: {totalCPU: 4, createErrors: [sandbox_failed]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	versions := make([]int64, 2)
	for i := range versions {
		d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: filepath.Join(dir, "data"),
			Listen: "127.0.0.1:0", Config: cfg, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		p, err := d.Store().GetPool(t.Context(), "sim")
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		versions[i] = p.Version
	}
	if versions[0] != versions[1] {
		t.Fatalf("pool version went from %d to %d on a restart with the same config", versions[0], versions[1])
	}
}
