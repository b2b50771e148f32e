package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
	"github.com/different-ai/differently/server/store/storetest"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Driver{
		New: func(t *testing.T) store.Store {
			return open(t, filepath.Join(t.TempDir(), "differently.db"))
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			return open(t, s.(*sqlite.Store).Path())
		},
	})
}

func TestSettings(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "differently.db"))
	db := sqlite.DB(s)
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"synchronous":  "2", // FULL
		"foreign_keys": "1",
		"busy_timeout": "30000",
	} {
		var got string
		if err := db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestRefusesMemory(t *testing.T) {
	for _, p := range []string{"", ":memory:"} {
		if _, err := sqlite.Open(context.Background(), p); err == nil {
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "differently.db")
	open(t, path).Close()
	s := open(t, path)
	var n int
	if err := sqlite.DB(s).QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	ms, err := store.Migrations(sqlite.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("schema_migrations has %d rows after two opens, want %d", n, len(ms))
	}
}

// A pool stored before pools had a source is the API's after the upgrade: the
// daemon's next start takes over those its config file names.
func TestPoolsFromBeforeTheSourceAreTheAPIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "differently.db")
	ms, err := store.Migrations(sqlite.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	before := slices.IndexFunc(ms, func(m store.Migration) bool { return m.Name == "pool_source" })
	if before < 0 {
		t.Fatal("no pool_source migration")
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:before] {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO pools (name, adapter, trust, region, max_concurrency, max_starting,
		cost_cpu_hour, cost_memory_gib_hour, config, credentials_env, features, created_at, updated_at, version)
		VALUES ('old', 'fake', 'private', '', 0, 0, 0, 0, '{}', '', '[]', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := open(t, path).GetPool(context.Background(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != store.PoolFromAPI {
		t.Fatalf("source after the upgrade: %q", p.Source)
	}
}

// A new database and its WAL files are readable by their owner only, whatever the
// umask: they hold sandboxes' environments and token hashes.
func TestNewFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.InstallationID(context.Background()); err != nil { // a write, so the WAL exists
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(f), fi.Mode().Perm())
		}
	}
}

// SchemaVersion of a file the daemon would create: version 0 when its folder can
// take it, an error when the folder does not exist.
func TestSchemaVersionOfAFileToCreate(t *testing.T) {
	dir := t.TempDir()
	if cur, latest, err := sqlite.SchemaVersion(context.Background(), filepath.Join(dir, "new.sqlite")); err != nil || cur != 0 || latest == 0 {
		t.Fatalf("new file: %d, %d, %v", cur, latest, err)
	}
	if _, _, err := sqlite.SchemaVersion(context.Background(), filepath.Join(dir, "missing", "db.sqlite")); err == nil {
		t.Fatal("a database in a folder that does not exist was reported as fine")
	}
	if _, err := os.Stat(filepath.Join(dir, "new.sqlite")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SchemaVersion created the file: %v", err)
	}
}
