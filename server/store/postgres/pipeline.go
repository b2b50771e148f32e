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
type pipelinedTx struct {
	ctx  context.Context
	conn *pgxpool.Conn
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
		t.Rollback()
		return nil, wrap(err)
	}
	if err := read(br); err != nil {
		br.Close()
		t.Rollback()
		return nil, err
	}
	if err := br.Close(); err != nil {
		t.Rollback()
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
// statements' results to read in order, and releases the connection. When read or
// any statement fails, the transaction is rolled back instead and the error
// returned. A nil writes commits alone.
func (t *pipelinedTx) Commit(writes *pgx.Batch, read func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	if writes != nil {
		b.QueuedQueries = append(make([]*pgx.QueuedQuery, 0, len(writes.QueuedQueries)+1), writes.QueuedQueries...)
	}
	b.Queue("COMMIT")
	br := t.conn.SendBatch(t.ctx, b)
	if read != nil {
		if err := read(br); err != nil {
			br.Close()
			t.Rollback()
			return err
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		t.Rollback()
		return wrap(err)
	}
	if err := br.Close(); err != nil {
		t.Rollback()
		return wrap(err)
	}
	t.conn.Release()
	return nil
}

// Rollback ends the transaction without writing and releases the connection. A
// ROLLBACK that fails (the context ended, the connection broke) leaves the
// connection inside a transaction, which the pool then closes rather than reuse.
func (t *pipelinedTx) Rollback() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), rollbackTimeout)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
	t.conn.Release()
}
