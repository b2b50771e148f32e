package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
)

const poolColumns = `name, adapter, trust, region, max_concurrency, max_starting, cost_cpu_hour,
	cost_memory_gib_hour, config, credentials_env, features, source, created_at, updated_at, version, warm`

func scanPool(row pgx.Row) (store.Pool, error) {
	var p store.Pool
	var config, features, warm []byte
	if err := row.Scan(&p.Name, &p.Adapter, &p.Trust, &p.Region, &p.MaxConcurrency, &p.MaxStarting,
		&p.CostModel.CPUHour, &p.CostModel.MemoryGiBHour, &config, &p.CredentialsEnv, &features,
		&p.Source, &p.CreatedAt, &p.UpdatedAt, &p.Version, &warm); err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = store.Timestamp(p.CreatedAt), store.Timestamp(p.UpdatedAt)
	if err := store.UnmarshalJSON(config, &p.Config); err != nil {
		return p, err
	}
	if err := store.UnmarshalJSON(warm, &p.Warm); err != nil || len(p.Warm) == 0 {
		p.Warm = nil
		if err != nil {
			return p, err
		}
	}
	return p, store.UnmarshalJSON(features, &p.Features)
}

func poolArgs(p store.Pool) ([]any, error) {
	config, err := store.MarshalJSON(p.Config)
	if err != nil {
		return nil, err
	}
	features, err := store.MarshalJSON(p.Features)
	if err != nil {
		return nil, err
	}
	warm, err := store.MarshalJSON(warmOrEmpty(p.Warm))
	if err != nil {
		return nil, err
	}
	return []any{p.Name, p.Adapter, string(p.Trust), p.Region, p.MaxConcurrency, p.MaxStarting,
		p.CostModel.CPUHour, p.CostModel.MemoryGiBHour, config, p.CredentialsEnv, features,
		string(p.Source), p.CreatedAt, p.UpdatedAt, p.Version, warm}, nil
}

// CreatePool implements store.Store.
func (s *Store) CreatePool(ctx context.Context, now time.Time, p store.Pool) (store.Pool, error) {
	p, err := store.NewPool(now, p)
	if err != nil {
		return store.Pool{}, err
	}
	args, err := poolArgs(p)
	if err != nil {
		return store.Pool{}, err
	}
	row := s.pool.QueryRow(ctx, `INSERT INTO pools (`+poolColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING `+poolColumns, args...)
	out, err := scanPool(row)
	return out, translate(err, "pool", p.Name)
}

// GetPool implements store.Store.
func (s *Store) GetPool(ctx context.Context, name string) (store.Pool, error) {
	p, err := scanPool(s.pool.QueryRow(ctx, `SELECT `+poolColumns+` FROM pools WHERE name = $1`, name))
	return p, translate(err, "pool", name)
}

// ListPools implements store.Store.
func (s *Store) ListPools(ctx context.Context) ([]store.Pool, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+poolColumns+` FROM pools ORDER BY name`)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Pool
	for rows.Next() {
		p, err := scanPool(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, p)
	}
	return out, wrap(rows.Err())
}

// UpdatePool implements store.Store: the row is locked, its version compared, then written.
func (s *Store) UpdatePool(ctx context.Context, now time.Time, p store.Pool) (store.Pool, error) {
	if err := store.ValidatePool(p); err != nil {
		return store.Pool{}, err
	}
	var out store.Pool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var version int64
		if err := tx.QueryRow(ctx, `SELECT version FROM pools WHERE name = $1 FOR UPDATE`, p.Name).Scan(&version); err != nil {
			return translate(err, "pool", p.Name)
		}
		if version != p.Version {
			return store.Conflict("pool %q was changed concurrently (version %d, not %d)", p.Name, version, p.Version)
		}
		p.UpdatedAt, p.Version = store.Timestamp(now), version+1
		args, err := poolArgs(p)
		if err != nil {
			return err
		}
		// created_at (args[12]) is deliberately not written.
		args = append(args[:12], args[13:]...)
		row := tx.QueryRow(ctx, `UPDATE pools SET adapter = $2, trust = $3, region = $4,
			max_concurrency = $5, max_starting = $6, cost_cpu_hour = $7, cost_memory_gib_hour = $8,
			config = $9, credentials_env = $10, features = $11, source = $12, updated_at = $13, version = $14,
			warm = $15
			WHERE name = $1 RETURNING `+poolColumns, args...)
		out, err = scanPool(row)
		return translate(err, "pool", p.Name)
	})
	return out, err
}

// DeletePool implements store.Store. The pool row is locked first so that two deletes
// (or a delete and an update) queue behind each other.
func (s *Store) DeletePool(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var source store.PoolSource
		if err := tx.QueryRow(ctx, `SELECT source FROM pools WHERE name = $1 FOR UPDATE`, name).Scan(&source); err != nil {
			return translate(err, "pool", name)
		}
		if source == store.PoolFromConfig {
			return store.ConfigPool(name)
		}
		var live int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sandboxes WHERE pool = $1 AND state NOT IN ('terminated', 'failed')`,
			name).Scan(&live); err != nil {
			return wrap(err)
		}
		if live > 0 {
			return store.Conflict("pool %q still has %d sandboxes that are not terminated", name, live)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM warm_stats WHERE pool = $1`, name); err != nil {
			return wrap(err)
		}
		_, err := tx.Exec(ctx, `DELETE FROM pools WHERE name = $1`, name)
		return wrap(err)
	})
}

// addWarmStatsSQL adds one shape's counts to the stored ones, bucket by bucket (a
// shorter array counts as zeros beyond its end), unless the pool is gone: counts a
// replica flushes after the pool's delete must not come back with a pool created
// later under the same name.
const addWarmStatsSQL = `INSERT INTO warm_stats AS w (pool, shape, hits, misses, claim_counts, claim_seconds)
	SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bigint[], $6::double precision
	WHERE EXISTS (SELECT FROM pools WHERE name = $1)
	ON CONFLICT (pool, shape) DO UPDATE SET
		hits = w.hits + EXCLUDED.hits, misses = w.misses + EXCLUDED.misses,
		claim_seconds = w.claim_seconds + EXCLUDED.claim_seconds,
		claim_counts = ARRAY(SELECT coalesce(a, 0) + coalesce(b, 0)
			FROM unnest(w.claim_counts, EXCLUDED.claim_counts) WITH ORDINALITY AS t(a, b, i) ORDER BY i)`

// AddWarmStats implements store.Store in one round trip.
func (s *Store) AddWarmStats(ctx context.Context, deltas []store.WarmStats) error {
	if len(deltas) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, d := range deltas {
			counts := d.ClaimCounts
			if counts == nil {
				counts = []int64{}
			}
			b.Queue(addWarmStatsSQL, d.Pool, d.Shape, d.Hits, d.Misses, counts, d.ClaimSeconds)
		}
		return wrap(tx.SendBatch(ctx, &b).Close())
	})
}

// ListWarmStats implements store.Store.
func (s *Store) ListWarmStats(ctx context.Context, pool string) ([]store.WarmStats, error) {
	rows, err := s.pool.Query(ctx, `SELECT pool, shape, hits, misses, claim_counts, claim_seconds
		FROM warm_stats WHERE pool = $1 ORDER BY shape`, pool)
	if err != nil {
		return nil, wrap(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.WarmStats, error) {
		var w store.WarmStats
		err := r.Scan(&w.Pool, &w.Shape, &w.Hits, &w.Misses, &w.ClaimCounts, &w.ClaimSeconds)
		return w, err
	})
	return out, wrap(err)
}

// warmOrEmpty stores a pool without warm shapes as an empty array, as the column's
// default has it, rather than as null.
func warmOrEmpty(w []store.WarmShape) []store.WarmShape {
	if w == nil {
		return []store.WarmShape{}
	}
	return w
}
