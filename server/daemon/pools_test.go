package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/store"
)

// logBuffer collects a daemon's log lines; safe for the goroutines that log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// boot starts a development daemon from the config file text (on dbURL when set, else
// on the data directory's SQLite), hands its store to check, and closes it: one start
// of a replica, without serving.
func boot(t *testing.T, dataDir, dbURL, file string, log *logBuffer, check func(st store.Store)) {
	t.Helper()
	cfg, err := config.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database.URL = dbURL
	opts := daemon.Options{Dev: true, DataDir: dataDir, Listen: "127.0.0.1:0", Config: cfg,
		Getenv: func(string) string { return "" }}
	if log != nil {
		opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	d, err := daemon.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if check != nil {
		check(d.Store())
	}
}

func getPool(t *testing.T, st store.Store, name string) store.Pool {
	t.Helper()
	p, err := st.GetPool(context.Background(), name)
	if err != nil {
		t.Fatalf("pool %s: %v", name, err)
	}
	return p
}

// forEachDatabase runs fn on the data directory's SQLite and on a PostgreSQL schema.
func forEachDatabase(t *testing.T, fn func(t *testing.T, dataDir, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, t.TempDir(), "") })
	t.Run("postgres", func(t *testing.T) { fn(t, t.TempDir(), pgtest.SchemaURL(t)) })
}

// A config file's pools are written once: restarting with the same file leaves the
// stored pool (and its version) alone, even though YAML numbers decode as integers.
func TestConfigPoolsAreNotRewrittenOnRestart(t *testing.T) {
	dir := t.TempDir()
	const file = "pools:\n  - name: sim\n    adapter: fake\n    config: {totalCPU: 4, createErrors: [sandbox_failed]}\n"
	versions := make([]int64, 2)
	for i := range versions {
		boot(t, filepath.Join(dir, "data"), "", file, nil, func(st store.Store) {
			versions[i] = getPool(t, st, "sim").Version
		})
	}
	if versions[0] != versions[1] {
		t.Fatalf("pool version went from %d to %d on a restart with the same config", versions[0], versions[1])
	}
}

// Where each pool is defined, start after start: the file's pools are the file's,
// the development pools the API's; a pool the API created is taken over when the file
// names it, with a warning; a pool the file stops naming is released to the API, not
// deleted, with a warning; and a start with an unchanged file writes nothing.
func TestConfigPoolsStartByStart(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dataDir, dbURL string) {
		ctx := context.Background()
		const sim = "  - name: sim\n    adapter: fake\n    config: {totalCPU: 4}\n"
		const later = "  - name: later\n    adapter: fake\n    config: {totalCPU: 2}\n"

		boot(t, dataDir, dbURL, "pools:\n"+sim, nil, func(st store.Store) {
			for name, want := range map[string]store.PoolSource{"sim": store.PoolFromConfig,
				"devhost": store.PoolFromAPI, "fake": store.PoolFromAPI} {
				if got := getPool(t, st, name).Source; got != want {
					t.Errorf("pool %s: source %q, want %q", name, got, want)
				}
			}
			// What POST /v1/admin/pools stores.
			if _, err := st.CreatePool(ctx, getPool(t, st, "sim").CreatedAt,
				store.Pool{Name: "later", Adapter: "fake", Trust: api.TrustPrivate, Source: store.PoolFromAPI}); err != nil {
				t.Fatal(err)
			}
		})

		var log logBuffer
		var simVersion int64
		boot(t, dataDir, dbURL, "pools:\n"+sim+later, &log, func(st store.Store) {
			p := getPool(t, st, "later")
			if p.Source != store.PoolFromConfig || p.Config["totalCPU"] != float64(2) || p.Version != 2 {
				t.Errorf("API pool named by the file: %+v", p)
			}
			simVersion = getPool(t, st, "sim").Version
		})
		if !strings.Contains(log.String(), "managed through the API") || !strings.Contains(log.String(), "pool=later") {
			t.Errorf("taking over an API pool is not logged:\n%s", log.String())
		}

		log = logBuffer{}
		boot(t, dataDir, dbURL, "pools:\n"+later, &log, func(st store.Store) {
			p := getPool(t, st, "sim")
			if p.Source != store.PoolFromAPI || p.Version != simVersion+1 || p.Config["totalCPU"] != float64(4) {
				t.Errorf("pool dropped from the file: %+v", p)
			}
			if v := getPool(t, st, "later").Version; v != 2 {
				t.Errorf("unchanged file pool rewritten: version %d", v)
			}
		})
		if !strings.Contains(log.String(), "no longer in the config file") || !strings.Contains(log.String(), "pool=sim") {
			t.Errorf("releasing a pool is not logged:\n%s", log.String())
		}

		log = logBuffer{}
		boot(t, dataDir, dbURL, "pools:\n"+later, &log, func(st store.Store) {
			if v := getPool(t, st, "sim").Version; v != simVersion+1 {
				t.Errorf("released pool written again: version %d", v)
			}
		})
		if strings.Contains(log.String(), "config file") {
			t.Errorf("a start with an unchanged file logged pool changes:\n%s", log.String())
		}

		// A development pool the file defines is the file's, and keeps its history.
		boot(t, dataDir, dbURL, "pools:\n  - name: fake\n    adapter: fake\n    config: {totalCPU: 3}\n", nil, func(st store.Store) {
			if p := getPool(t, st, "fake"); p.Source != store.PoolFromConfig || p.Config["totalCPU"] != float64(3) || p.Version != 2 {
				t.Errorf("development pool named by the file: %+v", p)
			}
		})
	})
}

// Replicas starting together from one file on one database do not fight: each pool
// is created, taken over or released by exactly one write, and every start succeeds.
func TestReplicasRegisterPoolsTogether(t *testing.T) {
	dbURL := pgtest.SchemaURL(t)
	ctx := context.Background()
	boot(t, t.TempDir(), dbURL, "pools:\n  - name: gone\n    adapter: fake\n", nil, func(st store.Store) {
		if _, err := st.CreatePool(ctx, getPool(t, st, "gone").CreatedAt,
			store.Pool{Name: "taken", Adapter: "fake", Trust: api.TrustPrivate}); err != nil {
			t.Fatal(err)
		}
	})
	const file = "pools:\n  - name: sim\n    adapter: fake\n    config: {totalCPU: 4}\n  - name: taken\n    adapter: fake\n    config: {totalCPU: 1}\n"
	const replicas = 4
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for i := range replicas {
		wg.Go(func() {
			cfg, err := config.Parse([]byte(file))
			if err != nil {
				errs <- err
				return
			}
			cfg.Database.URL = dbURL
			d, err := daemon.New(ctx, daemon.Options{Dev: true, DataDir: filepath.Join(t.TempDir(), fmt.Sprint(i)),
				Listen: "127.0.0.1:0", Config: cfg, Getenv: func(string) string { return "" }})
			if err != nil {
				errs <- fmt.Errorf("replica %d: %w", i, err)
				return
			}
			d.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	boot(t, t.TempDir(), dbURL, file, nil, func(st store.Store) {
		for name, want := range map[string]struct {
			source  store.PoolSource
			version int64
		}{
			"sim":   {store.PoolFromConfig, 1},
			"taken": {store.PoolFromConfig, 2},
			"gone":  {store.PoolFromAPI, 2},
		} {
			if p := getPool(t, st, name); p.Source != want.source || p.Version != want.version {
				t.Errorf("pool %s: source %q version %d, want %q version %d", name, p.Source, p.Version, want.source, want.version)
			}
		}
	})
}

// Through the API of a running daemon: a config file's pool shows its source and
// refuses changes; restarted from a file without it, the daemon hands it to the API,
// which can then change and delete it.
func TestConfigPoolThroughTheAPI(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dataDir, dbURL string) {
		parse := func(file string) *config.Config {
			cfg, err := config.Parse([]byte(file))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Database.URL = dbURL
			return cfg
		}
		type pool struct {
			Source         string `json:"source"`
			MaxConcurrency int    `json:"maxConcurrency"`
		}
		var errEnv struct {
			Error api.Error `json:"error"`
		}

		r := startConfig(t, dataDir, parse("pools:\n  - name: sim\n    adapter: fake\n"))
		var p pool
		r.call("GET", "/v1/admin/pools/sim", nil, 200, &p)
		if p.Source != "config" {
			t.Fatalf("config file's pool: source %q", p.Source)
		}
		r.call("PATCH", "/v1/admin/pools/sim", map[string]any{"maxConcurrency": 2}, 409, &errEnv)
		if !strings.Contains(errEnv.Error.Message, "config file") {
			t.Fatalf("refusal does not say where the pool is defined: %+v", errEnv.Error)
		}
		r.call("DELETE", "/v1/admin/pools/sim", nil, 409, nil)
		r.stop()

		r = startConfig(t, dataDir, parse("pools: []\n"))
		r.call("GET", "/v1/admin/pools/sim", nil, 200, &p)
		if p.Source != "api" {
			t.Fatalf("pool dropped from the file: source %q", p.Source)
		}
		r.call("PATCH", "/v1/admin/pools/sim", map[string]any{"maxConcurrency": 2}, 200, &p)
		if p.MaxConcurrency != 2 {
			t.Fatalf("released pool after a patch: %+v", p)
		}
		r.call("DELETE", "/v1/admin/pools/sim", nil, 204, nil)
	})
}

// A start whose file gives a pool another adapter is refused while sandboxes live on
// the pool (their instances are on the old backend, out of the new adapter's
// reach), whether the pool was the API's or the file's; once they are gone, the
// change is made.
func TestConfigFileAdapterChangeWaitsForAnEmptyPool(t *testing.T) {
	dataDir := t.TempDir()
	ctx := context.Background()
	boot(t, dataDir, "", "pools: []\n", nil, func(st store.Store) {
		now := getPool(t, st, "fake").CreatedAt
		if _, err := st.CreatePool(ctx, now, store.Pool{Name: "x", Adapter: "fake", Trust: api.TrustPrivate}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.CreateSandbox(ctx, now, store.Sandbox{ID: "sbx_live", Org: "default", Project: "default",
			State: store.StateRunning, Pool: "x", BackendRef: "ref-1"}); err != nil {
			t.Fatal(err)
		}
	})
	file := "pools:\n  - name: x\n    adapter: devhost\n    config: {root: " + filepath.Join(dataDir, "x") + "}\n"
	cfg, err := config.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(t.Context(), daemon.Options{Dev: true, DataDir: dataDir, Listen: "127.0.0.1:0", Config: cfg,
		Getenv: func(string) string { return "" }})
	if err == nil {
		d.Close()
		t.Fatal("the start gave a pool with a live sandbox another adapter")
	}
	if !strings.Contains(err.Error(), `pool x: the config file gives it the adapter "devhost", but 1 sandboxes still live on it`) {
		t.Fatalf("error %q", err)
	}
	boot(t, dataDir, "", "pools: []\n", nil, func(st store.Store) {
		if p := getPool(t, st, "x"); p.Adapter != "fake" {
			t.Fatalf("the refused start changed the pool: %+v", p)
		}
		if _, err := st.UpdateSandbox(ctx, "sbx_live", time.Now(), func(sb *store.Sandbox) error {
			sb.State = store.StateTerminated
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	boot(t, dataDir, "", file, nil, func(st store.Store) {
		if p := getPool(t, st, "x"); p.Adapter != "devhost" || p.Source != store.PoolFromConfig {
			t.Fatalf("pool after the start: %+v", p)
		}
	})
}
