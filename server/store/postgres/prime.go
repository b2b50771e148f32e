package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// A connection pays for a statement's first run: PostgreSQL parses it, fills the
// backend's catalogue caches for the tables and indexes it touches, and plans it;
// pgx asks for its description first, a round trip of its own. That is about a
// millisecond of the server's time per statement, so a burst of warm claims or
// creates landing on connections that never ran them took several times as long
// as the next burst (docs/benchmarks.md, "The first burst"). prime pays it when a
// connection opens instead, off the path of any request once the pool has its
// connections.

// deleteSandboxSQL removes a sandbox row; a claim deletes the warm one it takes.
const deleteSandboxSQL = `DELETE FROM sandboxes WHERE id = $1`

// primedReads are the hot statements that read, or write rows only where they
// match: prime runs each once, matching nothing, inside a transaction it rolls
// back and on generic plans (genericPlansSQL), as claims and batch updates do, so
// that the plans those keep are made here. args gives a run's arguments.
var primedReads = []struct {
	sql  string
	args func() []any
}{
	{selectByKeySQL, func() []any { return []any{"", "", ""} }},
	{admissionSQL, func() []any { return []any{"", "", time.Time{}} }},
	{selectWarmUnlimitedSQL, func() []any { return []any{"", "", "", ""} }},
	{selectWarmSQL, func() []any { return []any{"", ""} }},
	{lockSandboxesSQL, func() []any { return []any{[]string{}} }},
	{updateSandboxesSQL, func() []any { var c updateColumns; return c.args() }},
	{updateSandboxesEventsSQL, func() []any {
		var c updateColumns
		var e eventArrays
		return append(c.args(), e.args()...)
	}},
	{getSandboxSQL, func() []any { return []any{""} }},
	{getSandboxesSQL, func() []any { return []any{[]string{}} }},
	{deleteSandboxSQL, func() []any { return []any{""} }},
	// A notification sent in a transaction that rolls back is never delivered.
	{notifySQL, func() []any { return []any{"differently_primed", ""} }},
}

// primedWrites are the hot statements that would write whatever their arguments:
// prime only prepares them (parse and description). A shared create's transaction
// sends COMMIT as a statement of its own.
var primedWrites = []string{
	insertClearSQL, insertClearEventsSQL,
	insertSandboxSQL, insertSandboxEventsSQL,
	claimInsertSQL, claimInsertEventsSQL,
	"COMMIT",
}

// prime readies conn for the hot statements (primedReads, primedWrites). The
// schema must be migrated. A failure leaves conn outside any transaction, or
// returns an error saying it could not.
func prime(ctx context.Context, conn *pgx.Conn) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(genericPlansSQL)
	for _, r := range primedReads {
		b.Queue(r.sql, r.args()...)
	}
	b.Queue("ROLLBACK")
	err := conn.SendBatch(ctx, b).Close()
	if err != nil {
		// The statements after a failed one were skipped, its ROLLBACK included.
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	for _, q := range primedWrites {
		// The SQL as the name is how pgx files a statement that a later run of the
		// same SQL uses.
		if _, err := conn.Prepare(ctx, q, q); err != nil {
			return err
		}
	}
	return nil
}

// primeConn primes conn and keeps it when priming failed but left it usable:
// priming saves time, which is not worth a connection. The error is for a
// connection that cannot be used.
func (s *Store) primeConn(ctx context.Context, conn *pgx.Conn) error {
	err := prime(ctx, conn)
	if err != nil && !conn.IsClosed() && conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	return err
}
