// Package sqlite is the embedded implementation of store.Store: one durable file, pure Go
// (modernc.org/sqlite, no cgo), for a single daemon with no external service.
//
// Durability: the file is opened in WAL mode with synchronous=FULL, so every committed
// transaction is fsynced before Commit returns. (NORMAL would be crash-safe but could
// lose the last commits on power loss; a lost sandbox row makes the reconciler delete its
// real backend instance as an orphan, so the extra fsync is worth it.) Foreign keys are on.
//
// Concurrency: SQLite allows one writer at a time. Every write goes through a single
// connection (database/sql queues the callers) and every write transaction starts with
// BEGIN IMMEDIATE, taking the write lock up front: a transaction that read first and
// upgraded later could fail with SQLITE_BUSY, an immediate one just waits (busy_timeout)
// for another process or Store on the same file. Reads use a separate pool of read-only
// connections, which WAL lets run beside the writer.
//
// Times are INTEGER Unix microseconds in UTC, JSON values TEXT, and tables STRICT.
// Migrations are embedded NNN_name.up.sql files applied by Open in one write transaction
// and recorded in schema_migrations.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Migrations returns the embedded migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// busyTimeoutMillis bounds how long a writer waits for another process's write lock.
const busyTimeoutMillis = 30000

// Store is the SQLite store. The zero value is not usable; call Open.
type Store struct {
	path  string
	write *sql.DB // exactly one connection: the serialised writer
	read  *sql.DB // read-only connections
	// feed is the change feed: one daemon owns a SQLite file, so it reports the
	// writes of this process.
	feed feed
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path, applies pending migrations
// and returns the store. The directory must exist. ":memory:" is refused: the store must
// survive a restart.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlite: a database file path is required (in-memory databases are not durable)")
	}
	// The file holds sandboxes' environments and token hashes: a new one is made
	// readable by its owner only, and SQLite gives its -wal and -shm files the same
	// mode, whatever the umask or the directory's mode.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	params := url.Values{}
	params.Add("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	params.Add("_journal_mode", "WAL")
	params.Add("_synchronous", "FULL")
	params.Add("_foreign_keys", "1")
	params.Add("_txlock", "immediate")
	write, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+params.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	s := &Store{path: path, write: write}
	// The writer opens first so that the file exists and is in WAL mode before readers
	// (which may not change the journal mode) connect.
	if err := s.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	params.Del("_journal_mode")
	params.Del("_txlock")
	params.Add("_query_only", "1")
	read, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+params.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	read.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s.read = read
	return s, nil
}

// escapePath keeps a path's '?' and '#' from being read as URI syntax.
func escapePath(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

// Path is the database file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close closes both connection pools.
func (s *Store) Close() error {
	err := s.write.Close()
	if s.read != nil {
		err = errors.Join(err, s.read.Close())
	}
	return err
}

// Ping checks that the file can be read.
func (s *Store) Ping(ctx context.Context) error {
	return wrap(s.read.PingContext(ctx))
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.Migrations(Migrations())
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL) STRICT`); err != nil {
			return wrap(err)
		}
		var current int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return wrap(err)
		}
		if current > len(ms) {
			return fmt.Errorf("sqlite: database schema is at version %d, newer than this build (%d)", current, len(ms))
		}
		for _, m := range ms[current:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("sqlite: migration %03d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
				return wrap(err)
			}
		}
		return nil
	})
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE on the single write connection),
// committing when it returns nil. fn must not use s.write itself: that would wait forever
// for the connection fn is holding.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return wrap(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return wrap(tx.Commit())
}

// InstallationID creates the ID on first use; INSERT OR IGNORE makes concurrent first
// calls (from another process on the same file, say) agree on the first insert.
func (s *Store) InstallationID(ctx context.Context) (string, error) {
	var id string
	// The common case, after the first call, needs no write lock.
	err := s.read.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'installation_id'`).Scan(&id)
	if err == nil || !isNoRows(err) {
		return id, wrap(err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('installation_id', ?)
			ON CONFLICT (key) DO NOTHING`, ids.New("inst")); err != nil {
			return wrap(err)
		}
		return wrap(tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'installation_id'`).Scan(&id))
	})
	return id, err
}

// translate maps a driver error to the store's errors: no rows is not_found for kind/id, a
// uniqueness violation is invalid_state, anything else is wrapped.
func translate(err error, kind, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return store.NotFound(kind, id)
	case isUniqueViolation(err):
		return store.AlreadyExists(kind, id)
	}
	return wrap(err)
}

func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// wrap labels an unclassified error with the driver.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		// A caller forgot to translate; never let the sentinel escape.
		return errors.New("sqlite: unexpected: no rows")
	}
	return fmt.Errorf("sqlite: %w", err)
}

// SchemaVersion reports the migration version of the database file at path, and the
// latest this build has, without changing anything: the file is opened read-only,
// and a file that does not exist yet is version 0 (the daemon creates it).
func SchemaVersion(ctx context.Context, path string) (current, latest int, err error) {
	ms, err := store.Migrations(Migrations())
	if err != nil {
		return 0, 0, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		// The daemon creates the file, in a folder that must exist and take it.
		dir := filepath.Dir(path)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return 0, 0, fmt.Errorf("sqlite: %s: the folder for the database does not exist", dir)
		}
		if err := syscall.Access(dir, 2); err != nil { // 2: W_OK
			return 0, 0, fmt.Errorf("sqlite: %s: cannot create the database there: %w", dir, err)
		}
		return 0, len(ms), nil
	}
	params := url.Values{}
	params.Add("mode", "ro")
	params.Add("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+params.Encode())
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil {
		return 0, 0, wrap(err)
	}
	if tables > 0 {
		if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return 0, 0, wrap(err)
		}
	}
	return current, len(ms), nil
}
