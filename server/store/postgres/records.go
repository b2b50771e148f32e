package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

const snapshotColumns = `id, sandbox_id, org, project, pool, backend_ref, kind, size_bytes, state, created_at`

func scanSnapshot(row pgx.Row) (store.Snapshot, error) {
	var sn store.Snapshot
	err := row.Scan(&sn.ID, &sn.SandboxID, &sn.Org, &sn.Project, &sn.Pool, &sn.BackendRef, &sn.Kind,
		&sn.SizeBytes, &sn.State, &sn.CreatedAt)
	sn.CreatedAt = store.Timestamp(sn.CreatedAt)
	return sn, err
}

// CreateSnapshot implements store.Store.
func (s *Store) CreateSnapshot(ctx context.Context, now time.Time, sn store.Snapshot) (store.Snapshot, error) {
	if sn.ID == "" || sn.SandboxID == "" {
		return store.Snapshot{}, api.Errorf(api.CodeInvalidRequest, "snapshot id and sandbox id are required")
	}
	sn.CreatedAt = store.Timestamp(now)
	out, err := scanSnapshot(s.pool.QueryRow(ctx, `INSERT INTO snapshots (`+snapshotColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING `+snapshotColumns,
		sn.ID, sn.SandboxID, sn.Org, sn.Project, sn.Pool, sn.BackendRef, sn.Kind, sn.SizeBytes, sn.State, sn.CreatedAt))
	return out, translate(err, "snapshot", sn.ID)
}

// GetSnapshot implements store.Store.
func (s *Store) GetSnapshot(ctx context.Context, id string) (store.Snapshot, error) {
	sn, err := scanSnapshot(s.pool.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = $1`, id))
	return sn, translate(err, "snapshot", id)
}

// ListSnapshots implements store.Store.
func (s *Store) ListSnapshots(ctx context.Context, sandboxID string) ([]store.Snapshot, error) {
	return collectSnapshots(s.pool.Query(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE sandbox_id = $1 ORDER BY id`, sandboxID))
}

// ListSnapshotPage implements store.Store. A project's snapshots are found through
// the index on (org, project, id) (migration 017), a sandbox's through the one on
// (sandbox_id, id), all of them through the primary key, each in ID order.
func (s *Store) ListSnapshotPage(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, string, error) {
	limit, after, err := store.PageStart(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	var conds []string
	var args []any
	for _, c := range []struct{ cond, v string }{{"org = $%d", f.Org}, {"project = $%d", f.Project},
		{"sandbox_id = $%d", f.SandboxID}, {"id > $%d", after}} {
		if c.v != "" {
			args = append(args, c.v)
			conds = append(conds, fmt.Sprintf(c.cond, len(args)))
		}
	}
	q := `SELECT ` + snapshotColumns + ` FROM snapshots`
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, " AND ")
	}
	args = append(args, limit+1)
	q += fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	items, err := collectSnapshots(s.pool.Query(ctx, q, args...))
	if err != nil {
		return nil, "", err
	}
	items, next := store.PageBy(items, limit, func(sn store.Snapshot) string { return sn.ID })
	return items, next, nil
}

func collectSnapshots(rows pgx.Rows, err error) ([]store.Snapshot, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Snapshot
	for rows.Next() {
		sn, err := scanSnapshot(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, sn)
	}
	return out, wrap(rows.Err())
}

// DeleteSnapshot implements store.Store.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	return s.deleteOne(ctx, `DELETE FROM snapshots WHERE id = $1`, "snapshot", id)
}

func (s *Store) deleteOne(ctx context.Context, q, kind, id string) error {
	tag, err := s.pool.Exec(ctx, q, id)
	if err != nil {
		return wrap(err)
	}
	if tag.RowsAffected() == 0 {
		return store.NotFound(kind, id)
	}
	return nil
}

const tokenColumns = `id, hash, scope, org, project, name, created_at, last_used_at, expires_at`

func scanToken(row pgx.Row) (store.Token, error) {
	var t store.Token
	err := row.Scan(&t.ID, &t.Hash, &t.Scope, &t.Org, &t.Project, &t.Name, &t.CreatedAt, &t.LastUsedAt, &t.ExpiresAt)
	t.CreatedAt, t.LastUsedAt = store.Timestamp(t.CreatedAt), store.TimestampPtr(t.LastUsedAt)
	t.ExpiresAt = store.TimestampPtr(t.ExpiresAt)
	return t, err
}

// CreateToken implements store.Store.
func (s *Store) CreateToken(ctx context.Context, now time.Time, t store.Token) (store.Token, error) {
	if err := store.ValidateToken(t); err != nil {
		return store.Token{}, err
	}
	out, err := scanToken(s.pool.QueryRow(ctx, `INSERT INTO tokens (`+tokenColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+tokenColumns,
		t.ID, t.Hash, t.Scope, t.Org, t.Project, t.Name, store.Timestamp(now), store.TimestampPtr(t.LastUsedAt),
		store.TimestampPtr(t.ExpiresAt)))
	return out, translate(err, "token", t.ID)
}

// TokenByHash implements store.Store.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (store.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = $1`, hash))
	// The hash is a secret's digest: never put it in an error message.
	return t, translate(err, "token", "(by hash)")
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context) ([]store.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY id`)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, t)
	}
	return out, wrap(rows.Err())
}

// TouchToken implements store.Store.
func (s *Store) TouchToken(ctx context.Context, id string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tokens SET last_used_at = $2 WHERE id = $1`, id, store.Timestamp(now))
	if err != nil {
		return wrap(err)
	}
	if tag.RowsAffected() == 0 {
		return store.NotFound("token", id)
	}
	return nil
}

// DeleteToken implements store.Store.
func (s *Store) DeleteToken(ctx context.Context, id string) error {
	return s.deleteOne(ctx, `DELETE FROM tokens WHERE id = $1`, "token", id)
}

// GetPolicy implements store.Store.
func (s *Store) GetPolicy(ctx context.Context) (store.Policy, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, `SELECT doc FROM policy WHERE id = 1`).Scan(&doc)
	if isNoRows(err) {
		return store.Policy{}, nil
	}
	if err != nil {
		return store.Policy{}, wrap(err)
	}
	var p store.Policy
	return p, store.UnmarshalJSON(doc, &p)
}

// PutPolicy implements store.Store.
func (s *Store) PutPolicy(ctx context.Context, p store.Policy) error {
	doc, err := store.MarshalJSON(p)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO policy (id, doc) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc`, doc)
	return wrap(err)
}

// TryLease implements store.Store in one upsert: the update only happens when the lease is
// expired or already ours, and RETURNING says whether it did.
func (s *Store) TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	now = store.Timestamp(now)
	var got string
	err := s.pool.QueryRow(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
		WHERE leases.holder = EXCLUDED.holder OR leases.expires_at <= $4
		RETURNING holder`, name, holder, store.Timestamp(now.Add(ttl)), now).Scan(&got)
	if isNoRows(err) {
		return false, nil // held by someone else and not expired
	}
	return err == nil, wrap(err)
}

// ReleaseLease implements store.Store.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder)
	return wrap(err)
}
