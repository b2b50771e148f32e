package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/different-ai/differently/server/store"
)

const poolColumns = `name, adapter, trust, region, max_concurrency, max_starting, cost_cpu_hour,
	cost_memory_gib_hour, config, credentials_env, features, source, created_at, updated_at, version, warm`

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface{ Scan(dest ...any) error }

func scanPool(row scanner) (store.Pool, error) {
	var p store.Pool
	var config, features, warm string
	if err := row.Scan(&p.Name, &p.Adapter, &p.Trust, &p.Region, &p.MaxConcurrency, &p.MaxStarting,
		&p.CostModel.CPUHour, &p.CostModel.MemoryGiBHour, &config, &p.CredentialsEnv, &features,
		&p.Source, timeCol{&p.CreatedAt}, timeCol{&p.UpdatedAt}, &p.Version, &warm); err != nil {
		return p, err
	}
	if err := store.UnmarshalJSON([]byte(config), &p.Config); err != nil {
		return p, err
	}
	if err := store.UnmarshalJSON([]byte(warm), &p.Warm); err != nil || len(p.Warm) == 0 {
		p.Warm = nil
		if err != nil {
			return p, err
		}
	}
	return p, store.UnmarshalJSON([]byte(features), &p.Features)
}

func poolArgs(p store.Pool) ([]any, error) {
	config, err := jsonText(p.Config)
	if err != nil {
		return nil, err
	}
	features, err := jsonText(p.Features)
	if err != nil {
		return nil, err
	}
	warm, err := jsonText(warmOrEmpty(p.Warm))
	if err != nil {
		return nil, err
	}
	return []any{p.Name, p.Adapter, string(p.Trust), p.Region, p.MaxConcurrency, p.MaxStarting,
		p.CostModel.CPUHour, p.CostModel.MemoryGiBHour, config, p.CredentialsEnv, features,
		string(p.Source), micros(p.CreatedAt), micros(p.UpdatedAt), p.Version, warm}, nil
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
	var out store.Pool
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		out, err = scanPool(tx.QueryRowContext(ctx, `INSERT INTO pools (`+poolColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+poolColumns, args...))
		return translate(err, "pool", p.Name)
	})
	return out, err
}

// GetPool implements store.Store.
func (s *Store) GetPool(ctx context.Context, name string) (store.Pool, error) {
	p, err := scanPool(s.read.QueryRowContext(ctx, `SELECT `+poolColumns+` FROM pools WHERE name = ?`, name))
	return p, translate(err, "pool", name)
}

// ListPools implements store.Store.
func (s *Store) ListPools(ctx context.Context) ([]store.Pool, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+poolColumns+` FROM pools ORDER BY name`)
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

// UpdatePool implements store.Store; the write transaction holds the only write lock, so
// the version read and the update cannot interleave with another writer.
func (s *Store) UpdatePool(ctx context.Context, now time.Time, p store.Pool) (store.Pool, error) {
	if err := store.ValidatePool(p); err != nil {
		return store.Pool{}, err
	}
	var out store.Pool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var version int64
		if err := tx.QueryRowContext(ctx, `SELECT version FROM pools WHERE name = ?`, p.Name).Scan(&version); err != nil {
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
		// Everything but name (the key, last here) and created_at (args[12]).
		set := append(append([]any{}, args[1:12]...), args[13], args[14], args[15], p.Name)
		out, err = scanPool(tx.QueryRowContext(ctx, `UPDATE pools SET adapter = ?, trust = ?, region = ?,
			max_concurrency = ?, max_starting = ?, cost_cpu_hour = ?, cost_memory_gib_hour = ?,
			config = ?, credentials_env = ?, features = ?, source = ?, updated_at = ?, version = ?, warm = ?
			WHERE name = ? RETURNING `+poolColumns, set...))
		return translate(err, "pool", p.Name)
	})
	return out, err
}

// DeletePool implements store.Store.
func (s *Store) DeletePool(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var source store.PoolSource
		if err := tx.QueryRowContext(ctx, `SELECT source FROM pools WHERE name = ?`, name).Scan(&source); err != nil {
			return translate(err, "pool", name)
		}
		if source == store.PoolFromConfig {
			return store.ConfigPool(name)
		}
		var live int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE pool = ? AND state NOT IN ('terminated', 'failed')`,
			name).Scan(&live); err != nil {
			return wrap(err)
		}
		if live > 0 {
			return store.Conflict("pool %q still has %d sandboxes that are not terminated", name, live)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM warm_stats WHERE pool = ?`, name); err != nil {
			return wrap(err)
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM pools WHERE name = ?`, name)
		return wrap(err)
	})
}

// AddWarmStats implements store.Store: the write transaction is the only writer, so
// each shape's row is read, added to and written back.
func (s *Store) AddWarmStats(ctx context.Context, deltas []store.WarmStats) error {
	if len(deltas) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, d := range deltas {
			// Counts flushed after the pool's delete must not come back with a pool
			// created later under the same name.
			var pools int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pools WHERE name = ?`, d.Pool).Scan(&pools); err != nil {
				return wrap(err)
			}
			if pools == 0 {
				continue
			}
			cur := store.WarmStats{Pool: d.Pool, Shape: d.Shape}
			var counts string
			err := tx.QueryRowContext(ctx, `SELECT hits, misses, claim_counts, claim_seconds FROM warm_stats
				WHERE pool = ? AND shape = ?`, d.Pool, d.Shape).Scan(&cur.Hits, &cur.Misses, &counts, &cur.ClaimSeconds)
			switch {
			case err == nil:
				if err := json.Unmarshal([]byte(counts), &cur.ClaimCounts); err != nil {
					return fmt.Errorf("sqlite: warm_stats %s/%s: claim_counts: %w", d.Pool, d.Shape, err)
				}
			case !isNoRows(err):
				return wrap(err)
			}
			cur.Add(d)
			if cur.ClaimCounts == nil {
				cur.ClaimCounts = []int64{}
			}
			enc, err := json.Marshal(cur.ClaimCounts)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO warm_stats (pool, shape, hits, misses, claim_counts, claim_seconds)
				VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pool, shape) DO UPDATE SET hits = excluded.hits,
				misses = excluded.misses, claim_counts = excluded.claim_counts, claim_seconds = excluded.claim_seconds`,
				cur.Pool, cur.Shape, cur.Hits, cur.Misses, string(enc), cur.ClaimSeconds); err != nil {
				return wrap(err)
			}
		}
		return nil
	})
}

// ListWarmStats implements store.Store.
func (s *Store) ListWarmStats(ctx context.Context, pool string) ([]store.WarmStats, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT pool, shape, hits, misses, claim_counts, claim_seconds
		FROM warm_stats WHERE pool = ? ORDER BY shape`, pool)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.WarmStats
	for rows.Next() {
		var w store.WarmStats
		var counts string
		if err := rows.Scan(&w.Pool, &w.Shape, &w.Hits, &w.Misses, &counts, &w.ClaimSeconds); err != nil {
			return nil, wrap(err)
		}
		if err := json.Unmarshal([]byte(counts), &w.ClaimCounts); err != nil {
			return nil, fmt.Errorf("sqlite: warm_stats %s/%s: claim_counts: %w", w.Pool, w.Shape, err)
		}
		out = append(out, w)
	}
	return out, wrap(rows.Err())
}

// warmOrEmpty stores a pool without warm shapes as an empty array, as the column's
// default has it, rather than as null.
func warmOrEmpty(w []store.WarmShape) []store.WarmShape {
	if w == nil {
		return []store.WarmShape{}
	}
	return w
}
