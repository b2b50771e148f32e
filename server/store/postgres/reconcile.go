package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
)

const passColumns = `id, started_at, ended_at, replica, trigger, token_id, error, pools`

// RecordReconcilePass implements store.Store: the insert and the prune share one
// transaction, so the table never holds more than keep rows once it commits.
func (s *Store) RecordReconcilePass(ctx context.Context, p store.ReconcilePass, keep int) (store.ReconcilePass, error) {
	if err := store.ValidateReconcilePass(p); err != nil {
		return store.ReconcilePass{}, err
	}
	pools, err := store.MarshalJSON(nonNilPools(p.Pools))
	if err != nil {
		return store.ReconcilePass{}, err
	}
	var out store.ReconcilePass
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// One recorder at a time: a prune that could not see another's uncommitted
		// insert would leave more than keep rows. A pass is recorded every interval,
		// so the lock costs nothing.
		if _, err := tx.Exec(ctx, `LOCK TABLE reconcile_passes IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return wrap(err)
		}
		var err error
		out, err = scanPass(tx.QueryRow(ctx, `INSERT INTO reconcile_passes
			(started_at, ended_at, replica, trigger, token_id, error, pools)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+passColumns,
			store.Timestamp(p.StartedAt), store.Timestamp(p.EndedAt), p.Replica, string(p.Trigger), p.TokenID, p.Error, string(pools)))
		if err != nil {
			return wrap(err)
		}
		if keep <= 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM reconcile_passes WHERE id <=
			(SELECT id FROM reconcile_passes ORDER BY id DESC OFFSET $1 LIMIT 1)`, keep)
		return wrap(err)
	})
	return out, err
}

// ListReconcilePasses implements store.Store.
func (s *Store) ListReconcilePasses(ctx context.Context, f store.ReconcilePassFilter) ([]store.ReconcilePass, string, error) {
	limit, err := store.PageLimit(f.Limit)
	if err != nil {
		return nil, "", err
	}
	before, err := store.DecodePassCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + passColumns + ` FROM reconcile_passes ORDER BY id DESC LIMIT $1`
	args := []any{limit + 1}
	if before > 0 {
		q = `SELECT ` + passColumns + ` FROM reconcile_passes WHERE id < $2 ORDER BY id DESC LIMIT $1`
		args = append(args, before)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", wrap(err)
	}
	defer rows.Close()
	var out []store.ReconcilePass
	for rows.Next() {
		p, err := scanPass(rows)
		if err != nil {
			return nil, "", wrap(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, "", wrap(err)
	}
	items, next := store.PagePasses(out, limit)
	return items, next, nil
}

func scanPass(row pgx.Row) (store.ReconcilePass, error) {
	var p store.ReconcilePass
	var trigger, pools string
	if err := row.Scan(&p.ID, &p.StartedAt, &p.EndedAt, &p.Replica, &trigger, &p.TokenID, &p.Error, &pools); err != nil {
		return store.ReconcilePass{}, err
	}
	p.StartedAt, p.EndedAt, p.Trigger = p.StartedAt.UTC(), p.EndedAt.UTC(), store.ReconcileTrigger(trigger)
	if err := store.UnmarshalJSON([]byte(pools), &p.Pools); err != nil {
		return store.ReconcilePass{}, err
	}
	return p, nil
}

func nonNilPools(p []store.ReconcilePoolReport) []store.ReconcilePoolReport {
	if p == nil {
		return []store.ReconcilePoolReport{}
	}
	return p
}
