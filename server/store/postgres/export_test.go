package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// PreparedPlan is one row of pg_prepared_statements: how often the statement ran
// on a plan made for its parameters (custom) and on its generic plan.
type PreparedPlan struct {
	Statement            string
	GenericPlans, Custom int64
}

// PreparedPlans lists the statements prepared on one of the pool's connections;
// a test that opens the store with pool_max_conns=1 sees every statement it ran.
func (s *Store) PreparedPlans(ctx context.Context) ([]PreparedPlan, error) {
	rows, err := s.pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PreparedPlan
	for rows.Next() {
		var p PreparedPlan
		if err := rows.Scan(&p.Statement, &p.GenericPlans, &p.Custom); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// HookCreates calls queued with the number of creates waiting whenever one queues
// for a shared transaction, and sent with the size of each batch before it is sent.
// queued runs under the queue's lock: it must not call the store.
func (s *Store) HookCreates(queued, sent func(n int)) {
	s.creates.turns.hook(queued, sent)
}

// HookReads calls queued with the number of reads waiting whenever one queues for
// a shared statement, and sent with the size of each batch before it is sent.
// queued runs under the queue's lock: it must not call the store.
func (s *Store) HookReads(queued, sent func(n int)) {
	s.reads.turns.hook(queued, sent)
}

// Statements a test explains, with their numbers of parameters.
var (
	LockSandboxesSQL       = lockSandboxesSQL
	GetSandboxesSQL        = getSandboxesSQL
	SelectWarmSQL          = selectWarmSQL
	SelectWarmUnlimitedSQL = selectWarmUnlimitedSQL
	SelectByKeySQL         = selectByKeySQL
	UpdateSandboxesSQL     = updateSandboxesSQL
	UpdateSandboxesEvsSQL  = updateSandboxesEventsSQL
	UpdateSandboxesParams  = updateColumnCount
	UpdateSandboxesEvsArgs = updateColumnCount + len(eventArrayTypes)
	UpdateKnownSQL         = updateKnownSandboxesSQL
	UpdateKnownArgs        = updateColumnCount + 4 + len(eventArrayTypes)
)

// ExplainGeneric returns the generic plan PostgreSQL makes for sql, a statement of
// params parameters, as EXPLAIN prints it: the plan a connection keeps for the
// statement once it has run it a few times. The first parameter is given as
// '{sbx_1,sbx_2}' (an array of IDs, or a text), the others as NULL.
func (s *Store) ExplainGeneric(ctx context.Context, sql string, params int) (string, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	simple := pgx.QueryExecModeSimpleProtocol
	for _, q := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE explained AS " + sql} {
		if _, err := conn.Exec(ctx, q, simple); err != nil {
			return "", err
		}
	}
	defer conn.Exec(ctx, "DEALLOCATE explained; RESET plan_cache_mode", simple)
	args := "'{sbx_1,sbx_2}'" + strings.Repeat(", NULL", params-1)
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE explained("+args+")", simple)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// PrimedStatements are the hot statements a new connection is primed with, and
// PrimeBatch every statement priming sends, theirs and the transaction's.
func PrimedStatements() (hot, all []string) {
	for _, p := range primedStatements {
		hot = append(hot, p.sql)
	}
	b, err := primeBatch()
	if err != nil {
		panic(err)
	}
	for _, q := range b.QueuedQueries {
		all = append(all, q.SQL)
	}
	return hot, all
}

// WaitPrimed waits until the connections Open found idle are primed.
func (s *Store) WaitPrimed() { <-s.primed }

// ResetPool closes the pool's connections: the next statement runs on a new one.
func (s *Store) ResetPool() { s.pool.Reset() }

// SetNotifyGap sets the least time between two of the store's NOTIFYs.
func (s *Store) SetNotifyGap(d time.Duration) { s.notify.gap.Store(int64(d)) }

// NotifyChannel is the channel the store's changes are announced on.
func (s *Store) NotifyChannel() string { return s.channel }

// KnownReread is how many rows UpdateKnownSandboxes has written through
// UpdateSandboxes since the store opened.
func (s *Store) KnownReread() int64 { return s.knownReread.Load() }
