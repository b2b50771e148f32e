// Package postgres is the PostgreSQL implementation of store.Store, on pgx's pool. It is the
// production store and the one for several replicas sharing a database.
//
// Migrations are embedded NNN_name.up.sql files (migrations/) applied by Open inside one
// transaction that first takes pg_advisory_xact_lock on a key derived from the current
// schema, so replicas starting together apply each migration exactly once; applied
// versions are recorded in schema_migrations.
//
// The schema follows the connection's search_path, which is how tests isolate themselves
// (a schema per test, set with the URL's search_path parameter).
//
// Concurrency: UpdateSandbox locks the row with SELECT ... FOR UPDATE; ClaimSandboxes picks
// rows with FOR UPDATE SKIP LOCKED so concurrent claimers never block on or share a row;
// idempotent creates rely on a partial unique index and INSERT ... ON CONFLICT DO NOTHING.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Migrations returns the embedded migrations, for tools that want to show them.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// Store is the PostgreSQL store. The zero value is not usable; call Open.
type Store struct {
	pool   *pgxpool.Pool
	url    string
	notify *notifier
	// creates merges concurrent creates into shared transactions.
	creates *creates
	// reads merges concurrent reads of sandboxes into shared statements.
	reads *reads
	// channel is the change feed's NOTIFY channel (watch.go, notify.go).
	channel string
	// closeOnce makes Close safe to call twice, as deferred cleanups do.
	closeOnce sync.Once
	// migrated is set once the schema is this build's: new connections are then
	// primed (prime.go).
	migrated atomic.Bool
	// stopPriming ends the priming of the connections Open found idle; primed is
	// closed when it has ended.
	stopPriming context.CancelFunc
	primed      chan struct{}
	// knownReread counts the rows UpdateKnownSandboxes could not write as known and
	// wrote through UpdateSandboxes instead.
	knownReread atomic.Int64
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (postgres:// or postgresql://, any pgx option),
// applies pending migrations and returns the store.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := poolConfig(url)
	if err != nil {
		return nil, err
	}
	s := &Store{url: url}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if !s.migrated.Load() {
			return nil // the statements may name what the migrations have yet to make
		}
		return s.primeConn(ctx, conn)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s.pool = pool
	s.creates = &creates{s: s}
	s.reads = &reads{s: s}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.migrated.Store(true)
	// The change feed's channel is named after the schema, as migration 003's
	// triggers name it: replicas on one schema hear each other, others do not.
	if err := pool.QueryRow(ctx, `SELECT 'differently_' || left(md5(current_schema()), 16)`).Scan(&s.channel); err != nil {
		pool.Close()
		return nil, wrap(err)
	}
	s.startNotifier()
	primeCtx, stopPriming := context.WithCancel(context.WithoutCancel(ctx))
	s.stopPriming, s.primed = stopPriming, make(chan struct{})
	go func() {
		defer close(s.primed)
		s.primeIdle(primeCtx)
	}()
	return s, nil
}

// DefaultConnectTimeout bounds each new connection, the server's first answer
// included, when neither the URL (connect_timeout) nor PGCONNECT_TIMEOUT sets a bound. pgx waits for ever without one,
// and a database that accepts connections but never answers would then hang the
// daemon's start with nothing in the log.
const DefaultConnectTimeout = 10 * time.Second

// poolConfig parses url with this store's defaults where the URL is silent.
func poolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse database url: %w", err)
	}
	// pgx defaults to max(4, CPUs) connections, which the API, the scheduler's
	// concurrent Creates and the reconciler share; waiting for a connection then
	// dominates a busy replica. An explicit pool_max_conns in the URL still wins.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, 16)
	}
	// Half the pool, up to 8, stays open, and primed (prime.go), through quiet
	// spells: a burst after one, such as the claims a warm pool is kept for, would
	// otherwise wait for connections to be made, each a new server process, which
	// took 40-50 ms on a loaded two-CPU machine. An explicit pool_min_conns wins here
	// too.
	if !strings.Contains(url, "pool_min_conns") {
		cfg.MinConns = min(cfg.MaxConns/2, 8)
	}
	// The connections kept open are made together, and would otherwise reach their
	// lifetime together, every hour, for a burst to find the pool making them again.
	if !strings.Contains(url, "pool_max_conn_lifetime_jitter") {
		cfg.MaxConnLifetimeJitter = cfg.MaxConnLifetime / 6
	}
	// Only where neither the URL nor PGCONNECT_TIMEOUT says anything: an explicit
	// connect_timeout=0 (wait for ever, as libpq has it) is the operator's choice too.
	if !strings.Contains(url, "connect_timeout") && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg, nil
}

// URL is the database URL the store was opened with (it may hold a password; do not log it).
func (s *Store) URL() string { return s.url }

// Close closes the connection pool.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopPriming()
		<-s.primed
		s.notify.close()
		s.pool.Close()
	})
	return nil
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap(s.pool.Ping(ctx))
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.Migrations(Migrations())
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// Serialise concurrent migrators on this schema; the lock ends with the transaction.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('differently.migrate:' || current_schema()))`); err != nil {
			return wrap(err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return wrap(err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return wrap(err)
		}
		if current > len(ms) {
			return fmt.Errorf("postgres: database schema is at version %d, newer than this build (%d)", current, len(ms))
		}
		for _, m := range ms[current:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("postgres: migration %03d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return wrap(err)
			}
		}
		return nil
	})
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrap(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return wrap(tx.Commit(ctx))
}

// InstallationID creates the ID on first use; ON CONFLICT makes concurrent first calls
// agree on whichever insert won.
func (s *Store) InstallationID(ctx context.Context) (string, error) {
	if _, err := s.pool.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('installation_id', $1) ON CONFLICT (key) DO NOTHING`,
		ids.New("inst")); err != nil {
		return "", wrap(err)
	}
	var id string
	if err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'installation_id'`).Scan(&id); err != nil {
		return "", wrap(err)
	}
	return id, nil
}

// translate maps a driver error to the store's errors: no rows is not_found for kind/id, a
// unique violation is invalid_state, anything else is wrapped.
func translate(err error, kind, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return store.NotFound(kind, id)
	case isUniqueViolation(err):
		return store.AlreadyExists(kind, id)
	}
	return wrap(err)
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// wrap labels an unclassified error with the driver, keeping *api.Error values as they are.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// A caller forgot to translate; never let the sentinel escape.
		return errors.New("postgres: unexpected: no rows")
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05") {
		// character_not_in_repertoire, untranslatable_character: a NUL character or
		// invalid UTF-8 that the API let through. The caller's input, not an outage.
		return api.Errorf(api.CodeInvalidRequest, "text holds a NUL character or invalid UTF-8, which the database cannot store")
	}
	if unreachable(err) {
		return fmt.Errorf("postgres: %w: %w", store.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %w", err)
}

// unreachable reports whether err says the server could not be reached or the
// connection broke, rather than that a statement failed.
//
// A failed connection attempt is asked about first: whatever the server answered
// while refusing it (57P03 starting up or in recovery, 53300 out of connection slots,
// 55000 not accepting connections to this database, ...), the statement never ran
// and may succeed once the server takes clients again. The server's code is in the
// chain of such an error too, so looking at the code first would call those a failed
// statement.
//
// Except a refusal that says the configuration is wrong (misconfigured): waiting
// will not mend a wrong password or a missing database, and an operator reads a
// logged internal error sooner than a 503 that tells clients to try again.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return !misconfigured(err)
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300": // shutting down, crashed, starting, too many connections
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// misconfigured reports whether the server refused a connection for a reason only a
// change of the database URL or of the server's roles and databases can remedy.
func misconfigured(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return false
	}
	switch {
	case strings.HasPrefix(pe.Code, "28"): // invalid_authorization_specification: 28000 login rejected, 28P01 wrong password
		return true
	case pe.Code == "3D000": // invalid_catalog_name: no such database
		return true
	case pe.Code == "42501": // insufficient_privilege: no CONNECT on the database
		return true
	}
	return false
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// SchemaVersion reports the migration version of the schema url names, and the
// latest this build has, without changing anything: one connection, two reads. A
// schema the daemon never started on is version 0.
func SchemaVersion(ctx context.Context, url string) (current, latest int, err error) {
	ms, err := store.Migrations(Migrations())
	if err != nil {
		return 0, 0, err
	}
	cfg, err := poolConfig(url)
	if err != nil {
		return 0, 0, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: connect: %w", wrap(err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	var exists bool
	// The table in the schema migrate uses (current_schema()), not whichever
	// schema_migrations the search_path finds first.
	var schema *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return 0, 0, wrap(err)
	}
	if schema == nil {
		return 0, 0, errors.New("postgres: no schema of the search_path exists, so the daemon would have nowhere to create its tables")
	}
	if err := conn.QueryRow(ctx, `SELECT to_regclass(format('%I.schema_migrations', current_schema())) IS NOT NULL`).Scan(&exists); err != nil {
		return 0, 0, wrap(err)
	}
	if exists {
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return 0, 0, wrap(err)
		}
	}
	return current, len(ms), nil
}
