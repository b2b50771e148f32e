package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txConn is what a transaction's statements run on: a pgx.Tx, or the connection of
// a pipelined transaction.
type txConn interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pipelinedTx is a read-modify-write transaction in two round trips where inTx
// takes four: BEGIN travels with the reads (beginPipelined), the writes with COMMIT
// (commit). The hot writes (a create, a state change, the scheduler's batches) are
// such transactions; on a database shared by a few busy replicas the round trips,
// each a wake-up of the server process, are what their cost is made of. Statements
// that depend on the reads in other ways run between the two on conn.
//
// A caller defers Rollback as soon as beginPipelined returns: a panic in the Go
// code between the reads and Commit (a caller's update callback) must not leave a
// connection checked out inside a transaction that holds its rows' locks.
type pipelinedTx struct {
	ctx  context.Context
	conn *pgxpool.Conn
	// ended is set once Commit or Rollback has ended the transaction.
	ended bool
}

// rollbackTimeout bounds the ROLLBACK of a transaction that failed; a connection
// left inside a transaction is closed by the pool on release anyway.
const rollbackTimeout = 5 * time.Second

// beginPipelined takes a connection and sends BEGIN and reads' statements in one
// round trip; read consumes the statements' results in order. On error the
// transaction is rolled back and nothing is left to end.
func (s *Store) beginPipelined(ctx context.Context, reads *pgx.Batch, read func(pgx.BatchResults) error) (*pipelinedTx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	t := &pipelinedTx{ctx: ctx, conn: conn}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(reads.QueuedQueries)+1)}
	b.Queue("BEGIN")
	b.QueuedQueries = append(b.QueuedQueries, reads.QueuedQueries...)
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		t.rollback()
		return nil, wrap(err)
	}
	if err := read(br); err != nil {
		br.Close()
		t.rollback()
		return nil, err
	}
	if err := br.Close(); err != nil {
		t.rollback()
		return nil, wrap(err)
	}
	return t, nil
}

// QueryRow and Exec run a statement inside the transaction.
func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Commit sends writes' statements and COMMIT in one round trip, hands the
// statements' results to read in order, and releases the connection. When a
// statement fails on the server, the transaction is rolled back and the error
// returned. A nil writes commits alone.
//
// The COMMIT travels with the writes, so the server runs it unless one of them
// failed there: an error that read itself makes of a result the server sent (a
// row it cannot decode) comes too late to undo the writes, which stand committed
// while Commit returns that error. The writes that use Commit read back only rows
// they locked and columns they wrote.
func (t *pipelinedTx) Commit(writes *pgx.Batch, read func(pgx.BatchResults) error) error {
	t.ended = true
	b := &pgx.Batch{}
	if writes != nil {
		b.QueuedQueries = append(make([]*pgx.QueuedQuery, 0, len(writes.QueuedQueries)+1), writes.QueuedQueries...)
	}
	b.Queue("COMMIT")
	br := t.conn.SendBatch(t.ctx, b)
	if read != nil {
		if err := read(br); err != nil {
			br.Close()
			t.rollback()
			return err
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		t.rollback()
		return wrap(err)
	}
	if err := br.Close(); err != nil {
		t.rollback()
		return wrap(err)
	}
	t.conn.Release()
	return nil
}

// Rollback ends the transaction without writing and releases the connection, unless
// Commit or Rollback already ended it (so that it can be deferred). A
// ROLLBACK that fails (the context ended, the connection broke) leaves the
// connection inside a transaction, which the pool then closes rather than reuse.
func (t *pipelinedTx) Rollback() {
	if !t.ended {
		t.rollback()
	}
}

// rollback is Rollback whether or not the transaction has ended.
func (t *pipelinedTx) rollback() {
	t.ended = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), rollbackTimeout)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
	t.conn.Release()
}

// inOneTrip runs b's statements in a transaction of their own, sent with BEGIN and
// COMMIT in a single round trip, and hands their results to read in order. An error
// that is a *pgconn.PgError means the server refused a statement, or the commit,
// and nothing was written; any other may mean anything, as for a lone statement
// whose connection broke. Errors come back unwrapped, for callers that tell those
// apart.
func (s *Store) inOneTrip(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	all := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+2)}
	all.Queue("BEGIN")
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	all.Queue("COMMIT")
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, all)
	err = readOneTrip(br, read)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A statement that failed leaves the transaction aborted, and its COMMIT
		// rolls back; end it here in case the failure was the client's, so the
		// connection goes back to the pool outside any transaction.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_, _ = conn.Exec(rctx, "ROLLBACK")
	}
	return err
}

func readOneTrip(br pgx.BatchResults, read func(pgx.BatchResults) error) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	if err := read(br); err != nil {
		return err
	}
	// COMMIT answers ROLLBACK, without an error, when the transaction had failed;
	// every failure before it has been returned above.
	tag, err := br.Exec()
	if err == nil && tag.String() != "COMMIT" {
		err = &pgconn.PgError{Code: "40000", Message: "the transaction was rolled back"}
	}
	return err
}
