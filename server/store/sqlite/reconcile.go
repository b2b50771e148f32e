package sqlite

import (
	"context"
	"database/sql"

	"github.com/different-ai/differently/server/store"
)

const passColumns = `id, started_at, ended_at, replica, trigger, token_id, error, pools`

// RecordReconcilePass implements store.Store: the insert and the prune share one
// transaction, so the table never holds more than keep rows once it commits.
func (s *Store) RecordReconcilePass(ctx context.Context, p store.ReconcilePass, keep int) (store.ReconcilePass, error) {
	if err := store.ValidateReconcilePass(p); err != nil {
		return store.ReconcilePass{}, err
	}
	pools := p.Pools
	if pools == nil {
		pools = []store.ReconcilePoolReport{}
	}
	b, err := store.MarshalJSON(pools)
	if err != nil {
		return store.ReconcilePass{}, err
	}
	var out store.ReconcilePass
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanPass(tx.QueryRowContext(ctx, `INSERT INTO reconcile_passes
			(started_at, ended_at, replica, trigger, token_id, error, pools)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING `+passColumns,
			micros(p.StartedAt), micros(p.EndedAt), p.Replica, string(p.Trigger), p.TokenID, p.Error, string(b)))
		if err != nil {
			return wrap(err)
		}
		if keep <= 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM reconcile_passes WHERE id <=
			(SELECT id FROM reconcile_passes ORDER BY id DESC LIMIT 1 OFFSET ?)`, keep)
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
	q := `SELECT ` + passColumns + ` FROM reconcile_passes ORDER BY id DESC LIMIT ?`
	args := []any{limit + 1}
	if before > 0 {
		q = `SELECT ` + passColumns + ` FROM reconcile_passes WHERE id < ? ORDER BY id DESC LIMIT ?`
		args = []any{before, limit + 1}
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
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

func scanPass(row interface{ Scan(...any) error }) (store.ReconcilePass, error) {
	var p store.ReconcilePass
	var trigger, pools string
	if err := row.Scan(&p.ID, timeCol{&p.StartedAt}, timeCol{&p.EndedAt}, &p.Replica, &trigger, &p.TokenID, &p.Error, &pools); err != nil {
		return store.ReconcilePass{}, err
	}
	p.Trigger = store.ReconcileTrigger(trigger)
	if err := store.UnmarshalJSON([]byte(pools), &p.Pools); err != nil {
		return store.ReconcilePass{}, err
	}
	return p, nil
}
