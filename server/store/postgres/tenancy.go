package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
)

// querier is what a pool and a transaction have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lockProject takes the transaction-scoped advisory lock of one project. It works for
// projects that were never put (no row to lock FOR UPDATE). Two projects whose keys
// hash alike merely share a lock.
func lockProject(ctx context.Context, tx txConn, org, name string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('differently.project:' || $1 || '/' || $2, 0))`, org, name)
	return wrap(err)
}

// usage sums the project's non-terminal sandboxes. The states are listed rather than
// excluded so that the sandboxes_tenant_state index is scanned for live rows only,
// however many terminated ones the project has. The sums are numeric, clamped to the
// column types' largest values (see store.Usage.Add): a float8 sum past its range and
// a bigint cast of a larger sum are errors in PostgreSQL.
func usage(ctx context.Context, q querier, org, name string) (store.Usage, error) {
	var u store.Usage
	err := q.QueryRow(ctx, `SELECT count(*),
			least(coalesce(sum(cpu::numeric), 0), 1.7976931348623157e308)::float8,
			least(coalesce(sum(memory_mib), 0), 9223372036854775807)::bigint,
			least(coalesce(sum(disk_gib), 0), 9223372036854775807)::bigint
		FROM sandboxes WHERE org = $1 AND project = $2 AND state = ANY($3)`,
		org, name, statesArg(store.NonTerminalStates)).Scan(&u.Sandboxes, &u.CPU, &u.MemoryMiB, &u.DiskGiB)
	return u, wrap(err)
}

// admissionSQL reads a project's quota ($1, $2), the queue's length and how many
// queued sandboxes are due at $3, in one statement (the partial index
// sandboxes_claim holds exactly the queued rows, by next attempt).
const admissionSQL = `SELECT coalesce(p.quota_sandboxes, 0), coalesce(p.quota_cpu, 0),
		coalesce(p.quota_memory_mib, 0), coalesce(p.quota_disk_gib, 0),
		(SELECT count(*) FROM sandboxes WHERE state = 'queued'),
		(SELECT count(*) FROM sandboxes WHERE state = 'queued' AND next_attempt_at <= $3)
	FROM (VALUES (1)) AS one LEFT JOIN projects p ON p.org = $1 AND p.name = $2`

func scanAdmission(row pgx.Row, a *store.Admission) error {
	return wrap(row.Scan(&a.Quota.Sandboxes, &a.Quota.CPU, &a.Quota.MemoryMiB, &a.Quota.DiskGiB, &a.Queued, &a.Due))
}

// limitedAdmission completes an admission (a, read by admissionSQL) whose quota
// limits something: the project is locked (lockProject), its quota read again under
// the lock, and its usage summed. The lock serialises that project's creates, which
// unlimited projects need not pay for. A quota put while an unlimited create is under
// way applies from the next create on, as if put just after this one.
func limitedAdmission(ctx context.Context, tx txConn, org, name string, now time.Time, a *store.Admission) error {
	if err := lockProject(ctx, tx, org, name); err != nil {
		return err
	}
	if err := scanAdmission(tx.QueryRow(ctx, admissionSQL, org, name, now), a); err != nil {
		return err
	}
	var err error
	a.Usage, err = usage(ctx, tx, org, name)
	return err
}

// ProjectUsage implements store.Store.
func (s *Store) ProjectUsage(ctx context.Context, org, name string) (store.Usage, error) {
	return usage(ctx, s.pool, org, name)
}

const projectColumns = `org, name, quota_sandboxes, quota_cpu, quota_memory_mib, quota_disk_gib,
	created_at, updated_at, version`

func scanProject(row pgx.Row) (store.Project, error) {
	var p store.Project
	err := row.Scan(&p.Org, &p.Name, &p.Quota.Sandboxes, &p.Quota.CPU, &p.Quota.MemoryMiB,
		&p.Quota.DiskGiB, &p.CreatedAt, &p.UpdatedAt, &p.Version)
	p.CreatedAt, p.UpdatedAt = store.Timestamp(p.CreatedAt), store.Timestamp(p.UpdatedAt)
	return p, err
}

// PutProject implements store.Store as one upsert, under the project's lock so that a
// quota change and an admission of the same project never interleave.
func (s *Store) PutProject(ctx context.Context, now time.Time, p store.Project) (store.Project, error) {
	p, err := store.NormalizeProject(now, p)
	if err != nil {
		return store.Project{}, err
	}
	var out store.Project
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockProject(ctx, tx, p.Org, p.Name); err != nil {
			return err
		}
		q := p.Quota
		out, err = scanProject(tx.QueryRow(ctx, `INSERT INTO projects (`+projectColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (org, name) DO UPDATE SET quota_sandboxes = EXCLUDED.quota_sandboxes,
				quota_cpu = EXCLUDED.quota_cpu, quota_memory_mib = EXCLUDED.quota_memory_mib,
				quota_disk_gib = EXCLUDED.quota_disk_gib, updated_at = EXCLUDED.updated_at,
				version = projects.version + 1
			RETURNING `+projectColumns, p.Org, p.Name, q.Sandboxes, q.CPU, q.MemoryMiB, q.DiskGiB,
			p.CreatedAt, p.UpdatedAt, p.Version))
		return translate(err, "project", store.ProjectKey(p.Org, p.Name))
	})
	return out, err
}

// GetProject implements store.Store.
func (s *Store) GetProject(ctx context.Context, org, name string) (store.Project, error) {
	p, err := scanProject(s.pool.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE org = $1 AND name = $2`, org, name))
	return p, translate(err, "project", store.ProjectKey(org, name))
}

// ListProjects implements store.Store.
func (s *Store) ListProjects(ctx context.Context) ([]store.Project, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+projectColumns+` FROM projects ORDER BY org, name`)
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

// DeleteProject implements store.Store. The project's lock keeps an admission from
// slipping a sandbox in between the count and the delete. The project's tokens are
// deleted with it; the tokens table's trigger tells every replica's cache.
func (s *Store) DeleteProject(ctx context.Context, org, name string) error {
	key := store.ProjectKey(org, name)
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockProject(ctx, tx, org, name); err != nil {
			return err
		}
		var version int64
		if err := tx.QueryRow(ctx, `SELECT version FROM projects WHERE org = $1 AND name = $2`, org, name).Scan(&version); err != nil {
			return translate(err, "project", key)
		}
		u, err := usage(ctx, tx, org, name)
		if err != nil {
			return err
		}
		if u.Sandboxes > 0 {
			return store.Conflict("project %s still has %d sandboxes that are not terminated", key, u.Sandboxes)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE `+store.ProjectTokensWhere, org, name); err != nil {
			return wrap(err)
		}
		_, err = tx.Exec(ctx, `DELETE FROM projects WHERE org = $1 AND name = $2`, org, name)
		return wrap(err)
	})
}

const profileColumns = `name, capabilities, cpu, memory_mib, disk_gib, template, placement, ttl_seconds,
	created_at, updated_at, version`

func scanProfile(row pgx.Row) (store.Profile, error) {
	var p store.Profile
	var caps, placement []byte
	if err := row.Scan(&p.Name, &caps, &p.Resources.CPU, &p.Resources.MemoryMiB, &p.Resources.DiskGiB,
		&p.Template, &placement, &p.TTLSeconds, &p.CreatedAt, &p.UpdatedAt, &p.Version); err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = store.Timestamp(p.CreatedAt), store.Timestamp(p.UpdatedAt)
	if err := store.UnmarshalJSON(caps, &p.Capabilities); err != nil {
		return p, err
	}
	return p, store.UnmarshalJSON(placement, &p.Placement)
}

// PutProfile implements store.Store as one upsert.
func (s *Store) PutProfile(ctx context.Context, now time.Time, p store.Profile) (store.Profile, error) {
	p, err := store.NormalizeProfile(now, p)
	if err != nil {
		return store.Profile{}, err
	}
	caps, err := store.MarshalJSON(p.Capabilities)
	if err != nil {
		return store.Profile{}, err
	}
	placement, err := store.MarshalJSON(p.Placement)
	if err != nil {
		return store.Profile{}, err
	}
	out, err := scanProfile(s.pool.QueryRow(ctx, `INSERT INTO profiles (`+profileColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (name) DO UPDATE SET capabilities = EXCLUDED.capabilities, cpu = EXCLUDED.cpu,
			memory_mib = EXCLUDED.memory_mib, disk_gib = EXCLUDED.disk_gib, template = EXCLUDED.template,
			placement = EXCLUDED.placement, ttl_seconds = EXCLUDED.ttl_seconds,
			updated_at = EXCLUDED.updated_at, version = profiles.version + 1
		RETURNING `+profileColumns, p.Name, caps, p.Resources.CPU, p.Resources.MemoryMiB,
		p.Resources.DiskGiB, p.Template, placement, p.TTLSeconds, p.CreatedAt, p.UpdatedAt, p.Version))
	return out, translate(err, "profile", p.Name)
}

// GetProfile implements store.Store.
func (s *Store) GetProfile(ctx context.Context, name string) (store.Profile, error) {
	p, err := scanProfile(s.pool.QueryRow(ctx, `SELECT `+profileColumns+` FROM profiles WHERE name = $1`, name))
	return p, translate(err, "profile", name)
}

// ListProfiles implements store.Store.
func (s *Store) ListProfiles(ctx context.Context) ([]store.Profile, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+profileColumns+` FROM profiles ORDER BY name`)
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
	tag, err := s.pool.Exec(ctx, `DELETE FROM profiles WHERE name = $1`, name)
	if err != nil {
		return wrap(err)
	}
	if tag.RowsAffected() == 0 {
		return store.NotFound("profile", name)
	}
	return nil
}
