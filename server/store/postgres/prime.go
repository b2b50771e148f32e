package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// A connection pays for a statement's first run: PostgreSQL parses it, fills the
// backend's catalogue caches for the tables and indexes it touches, and plans it;
// pgx asks for its description first, a round trip of its own. That is about a
// millisecond of the server's time per statement, so a burst of warm claims or
// creates landing on connections that never ran them took several times as long
// as the next burst (docs/benchmarks.md, "The first burst"). prime pays it when a
// connection opens instead, off the path of any request once the pool has its
// connections.
//
// Every hot statement runs once, so that pgx files it in the connection's
// statement cache, which drops a statement that fails (after a migration changed
// a column's type, say) and prepares it again; a statement prepared by name would
// fail until the connection closed. The runs change nothing: they are inside a
// savepoint rolled back before the transaction commits.

// primeTimeout bounds the priming of one connection: a lock held on the sandboxes
// table (an index being built) must not hold a connection, and the request that
// asked for it, for long.
const primeTimeout = 5 * time.Second

// deleteSandboxSQL removes a sandbox row; a claim deletes the warm one it takes.
const deleteSandboxSQL = `DELETE FROM sandboxes WHERE id = $1`

// primedStatement is a hot statement and a run of it that writes nothing anyone
// keeps: it matches no row, inserts a row prime's savepoint takes back, or sends
// a notification that goes with it.
type primedStatement struct {
	sql  string
	args func() ([]any, error)
}

// primedStatements are the hot statements. Those that follow genericPlansSQL in a
// claim or a batch update run after it here too, so that the generic plans those
// keep are made here.
var primedStatements = []primedStatement{
	{selectByKeySQL, fixed("", "", "")},
	{admissionSQL, fixed("", "", time.Time{})},
	{selectWarmUnlimitedSQL, fixed("", "", "", "")},
	{selectWarmSQL, fixed("", "")},
	{lockSandboxesSQL, fixed([]string{})},
	{updateSandboxesSQL, func() ([]any, error) { var c updateColumns; return c.args(), nil }},
	{updateSandboxesEventsSQL, func() ([]any, error) {
		var c updateColumns
		var e eventArrays
		return append(c.args(), e.args()...), nil
	}},
	{updateKnownSandboxesSQL, func() ([]any, error) {
		var c updateColumns
		var k knownColumns
		var e eventArrays
		return append(append(c.args(), k.args()...), e.args()...), nil
	}},
	{getSandboxSQL, fixed("")},
	{getSandboxesSQL, fixed([]string{})},
	{deleteSandboxSQL, fixed("")},
	{notifySQL, fixed("differently_primed", "")},
	{insertClearSQL, primedInsert(false)},
	{insertClearEventsSQL, primedInsert(true)},
	{insertSandboxSQL, primedInsert(false)},
	{insertSandboxEventsSQL, primedInsert(true)},
	{claimInsertSQL, primedInsert(false)},
	{claimInsertEventsSQL, primedInsert(true)},
}

func fixed(args ...any) func() ([]any, error) {
	return func() ([]any, error) { return args, nil }
}

// primedInsert inserts a sandbox of a fresh ID, which no concurrent priming shares,
// with no events when evented (the statement takes the arrays and inserts none).
func primedInsert(evented bool) func() ([]any, error) {
	return func() ([]any, error) {
		sb, err := store.NormalizeSandbox(time.Now(), store.Sandbox{ID: ids.New("sbx"), Org: "_primed", Project: "_primed"})
		if err != nil {
			return nil, err
		}
		args, err := sandboxArgs(sb)
		if evented {
			var e eventArrays
			args = append(args, e.args()...)
		}
		return args, err
	}
}

// primeBatch is prime's one round trip. Its COMMIT and BEGIN are the shared
// creates' own (creates.go).
func primeBatch() (*pgx.Batch, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SAVEPOINT primed")
	b.Queue(genericPlansSQL)
	for _, p := range primedStatements {
		args, err := p.args()
		if err != nil {
			return nil, err
		}
		b.Queue(p.sql, args...)
	}
	b.Queue("ROLLBACK TO SAVEPOINT primed")
	b.Queue("COMMIT")
	return b, nil
}

// prime readies conn for the hot statements; the schema must be migrated. A failure
// leaves conn outside any transaction, or returns an error saying it could not.
func prime(ctx context.Context, conn *pgx.Conn) error {
	b, err := primeBatch()
	if err != nil {
		return err
	}
	err = conn.SendBatch(ctx, b).Close()
	if err != nil && conn.PgConn().TxStatus() != 'I' {
		// The statements after a failed one were skipped, its ROLLBACK included.
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

// primeConn primes conn, within primeTimeout, and keeps it when priming failed but
// left it usable: priming saves time, which is not worth a connection. The error
// is for a connection that cannot be used. Only the statement cache (pgx's
// default mode) keeps what priming prepares; in other modes there is nothing to do.
func (s *Store) primeConn(ctx context.Context, conn *pgx.Conn) error {
	if conn.Config().DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, primeTimeout)
	defer cancel()
	err := prime(ctx, conn)
	if err != nil && !conn.IsClosed() && conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	return err
}

// primeIdle primes the connections idle in the pool, those opened before the
// schema was migrated; the later ones are primed as they open (Open's
// AfterConnect). It runs in the background from Open, so that a short-lived
// store (a command line tool's) does not wait for it.
func (s *Store) primeIdle(ctx context.Context) {
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		if err := s.primeConn(ctx, c.Conn()); err != nil {
			c.Hijack().Close(context.WithoutCancel(ctx)) //nolint:errcheck // the connection is dropped either way
			continue
		}
		c.Release()
	}
}
