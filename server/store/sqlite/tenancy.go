package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/different-ai/differently/server/store"
)

// rowQuerier is what the read pool and a write transaction have in common.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// usage sums the project's non-terminal sandboxes (the sandboxes_tenant_state index).
// total() sums in floating point where sum() fails on an integer overflow; the sums
// are clamped as store.Usage.Add does. Within the API's bounds (api/limits.go) they
// stay far below 2^53, where floats count exactly.
func usage(ctx context.Context, q rowQuerier, org, name string) (store.Usage, error) {
	var u store.Usage
	var memory, disk float64
	err := q.QueryRowContext(ctx, `SELECT count(*), total(cpu), total(memory_mib), total(disk_gib)
		FROM sandboxes WHERE org = ? AND project = ? AND state NOT IN ('terminated', 'failed')`,
		org, name).Scan(&u.Sandboxes, &u.CPU, &memory, &disk)
	u.CPU, u.MemoryMiB, u.DiskGiB = store.SaturateCPU(u.CPU), store.SaturateInt(memory), store.SaturateInt(disk)
	return u, wrap(err)
}

func admission(ctx context.Context, tx *sql.Tx, org, name string, now time.Time) (store.Admission, error) {
	var a store.Admission
	err := tx.QueryRowContext(ctx, `SELECT quota_sandboxes, quota_cpu, quota_memory_mib, quota_disk_gib
		FROM projects WHERE org = ? AND name = ?`, org, name).
		Scan(&a.Quota.Sandboxes, &a.Quota.CPU, &a.Quota.MemoryMiB, &a.Quota.DiskGiB)
	if err != nil && !isNoRows(err) {
		return a, wrap(err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(next_attempt_at <= ?), 0)
		FROM sandboxes WHERE state = 'queued'`, micros(now)).Scan(&a.Queued, &a.Due); err != nil {
		return a, wrap(err)
	}
	if !a.Quota.Limited() {
		return a, nil
	}
	a.Usage, err = usage(ctx, tx, org, name)
	return a, err
}

// ProjectUsage implements store.Store.
func (s *Store) ProjectUsage(ctx context.Context, org, name string) (store.Usage, error) {
	return usage(ctx, s.read, org, name)
}

const projectColumns = `org, name, quota_sandboxes, quota_cpu, quota_memory_mib, quota_disk_gib,
	created_at, updated_at, version`

func scanProject(row scanner) (store.Project, error) {
	var p store.Project
	err := row.Scan(&p.Org, &p.Name, &p.Quota.Sandboxes, &p.Quota.CPU, &p.Quota.MemoryMiB,
		&p.Quota.DiskGiB, timeCol{&p.CreatedAt}, timeCol{&p.UpdatedAt}, &p.Version)
	return p, err
}

// PutProject implements store.Store as one upsert in a write transaction.
func (s *Store) PutProject(ctx context.Context, now time.Time, p store.Project) (store.Project, error) {
	p, err := store.NormalizeProject(now, p)
	if err != nil {
		return store.Project{}, err
	}
	var out store.Project
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		q := p.Quota
		out, err = scanProject(tx.QueryRowContext(ctx, `INSERT INTO projects (`+projectColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org, name) DO UPDATE SET quota_sandboxes = excluded.quota_sandboxes,
				quota_cpu = excluded.quota_cpu, quota_memory_mib = excluded.quota_memory_mib,
				quota_disk_gib = excluded.quota_disk_gib, updated_at = excluded.updated_at,
				version = projects.version + 1
			RETURNING `+projectColumns, p.Org, p.Name, q.Sandboxes, q.CPU, q.MemoryMiB, q.DiskGiB,
			micros(p.CreatedAt), micros(p.UpdatedAt), p.Version))
		return translate(err, "project", store.ProjectKey(p.Org, p.Name))
	})
	return out, err
}

// GetProject implements store.Store.
func (s *Store) GetProject(ctx context.Context, org, name string) (store.Project, error) {
	p, err := scanProject(s.read.QueryRowContext(ctx, `SELECT `+projectColumns+` FROM projects WHERE org = ? AND name = ?`, org, name))
	return p, translate(err, "project", store.ProjectKey(org, name))
}

// ListProjects implements store.Store.
func (s *Store) ListProjects(ctx context.Context) ([]store.Project, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+projectColumns+` FROM projects ORDER BY org, name`)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, p)
	}
	return out, wrap(rows.Err())
}

// DeleteProject implements store.Store. The project's tokens are deleted with it, and
// the feed tells of each once the transaction has committed.
func (s *Store) DeleteProject(ctx context.Context, org, name string) error {
	key := store.ProjectKey(org, name)
	var revoked []string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		revoked = revoked[:0]
		var version int64
		if err := tx.QueryRowContext(ctx, `SELECT version FROM projects WHERE org = ? AND name = ?`, org, name).Scan(&version); err != nil {
			return translate(err, "project", key)
		}
		u, err := usage(ctx, tx, org, name)
		if err != nil {
			return err
		}
		if u.Sandboxes > 0 {
			return store.Conflict("project %s still has %d sandboxes that are not terminated", key, u.Sandboxes)
		}
		rows, err := tx.QueryContext(ctx, `DELETE FROM tokens WHERE `+store.ProjectTokensWhere+` RETURNING id`, org, name)
		if err != nil {
			return wrap(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return wrap(err)
			}
			revoked = append(revoked, id)
		}
		if err := rows.Err(); err != nil {
			return wrap(err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM projects WHERE org = ? AND name = ?`, org, name)
		return wrap(err)
	})
	if err != nil {
		return err
	}
	for _, id := range revoked {
		s.feed.publish(store.Change{Kind: store.ChangeToken, ID: id})
	}
	return nil
}

const profileColumns = `name, capabilities, cpu, memory_mib, disk_gib, template, placement, ttl_seconds,
	created_at, updated_at, version`

func scanProfile(row scanner) (store.Profile, error) {
	var p store.Profile
	var caps, placement string
	if err := row.Scan(&p.Name, &caps, &p.Resources.CPU, &p.Resources.MemoryMiB, &p.Resources.DiskGiB,
		&p.Template, &placement, &p.TTLSeconds, timeCol{&p.CreatedAt}, timeCol{&p.UpdatedAt}, &p.Version); err != nil {
		return p, err
	}
	if err := store.UnmarshalJSON([]byte(caps), &p.Capabilities); err != nil {
		return p, err
	}
	return p, store.UnmarshalJSON([]byte(placement), &p.Placement)
}

// PutProfile implements store.Store as one upsert.
func (s *Store) PutProfile(ctx context.Context, now time.Time, p store.Profile) (store.Profile, error) {
	p, err := store.NormalizeProfile(now, p)
	if err != nil {
		return store.Profile{}, err
	}
	caps, err := jsonText(p.Capabilities)
	if err != nil {
		return store.Profile{}, err
	}
	placement, err := jsonText(p.Placement)
	if err != nil {
		return store.Profile{}, err
	}
	var out store.Profile
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		out, err = scanProfile(tx.QueryRowContext(ctx, `INSERT INTO profiles (`+profileColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET capabilities = excluded.capabilities, cpu = excluded.cpu,
				memory_mib = excluded.memory_mib, disk_gib = excluded.disk_gib, template = excluded.template,
				placement = excluded.placement, ttl_seconds = excluded.ttl_seconds,
				updated_at = excluded.updated_at, version = profiles.version + 1
			RETURNING `+profileColumns, p.Name, caps, p.Resources.CPU, p.Resources.MemoryMiB,
			p.Resources.DiskGiB, p.Template, placement, p.TTLSeconds, micros(p.CreatedAt),
			micros(p.UpdatedAt), p.Version))
		return translate(err, "profile", p.Name)
	})
	return out, err
}

// GetProfile implements store.Store.
func (s *Store) GetProfile(ctx context.Context, name string) (store.Profile, error) {
	p, err := scanProfile(s.read.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM profiles WHERE name = ?`, name))
	return p, translate(err, "profile", name)
}

// ListProfiles implements store.Store.
func (s *Store) ListProfiles(ctx context.Context) ([]store.Profile, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+profileColumns+` FROM profiles ORDER BY name`)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Profile
	for rows.Next() {
		p, err := scanProfile(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, p)
	}
	return out, wrap(rows.Err())
}

// DeleteProfile implements store.Store.
func (s *Store) DeleteProfile(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM profiles WHERE name = ?`, name)
		if err != nil {
			return wrap(err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return wrap(err)
			}
			return store.NotFound("profile", name)
		}
		return nil
	})
}
