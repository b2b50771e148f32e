package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

const snapshotColumns = `id, sandbox_id, org, project, pool, backend_ref, kind, size_bytes, state, created_at`

func scanSnapshot(row scanner) (store.Snapshot, error) {
	var sn store.Snapshot
	err := row.Scan(&sn.ID, &sn.SandboxID, &sn.Org, &sn.Project, &sn.Pool, &sn.BackendRef, &sn.Kind,
		&sn.SizeBytes, &sn.State, timeCol{&sn.CreatedAt})
	return sn, err
}

// CreateSnapshot implements store.Store.
func (s *Store) CreateSnapshot(ctx context.Context, now time.Time, sn store.Snapshot) (store.Snapshot, error) {
	if sn.ID == "" || sn.SandboxID == "" {
		return store.Snapshot{}, api.Errorf(api.CodeInvalidRequest, "snapshot id and sandbox id are required")
	}
	var out store.Snapshot
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanSnapshot(tx.QueryRowContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+snapshotColumns,
			sn.ID, sn.SandboxID, sn.Org, sn.Project, sn.Pool, sn.BackendRef, sn.Kind, sn.SizeBytes, sn.State, micros(now)))
		return translate(err, "snapshot", sn.ID)
	})
	return out, err
}

// GetSnapshot implements store.Store.
func (s *Store) GetSnapshot(ctx context.Context, id string) (store.Snapshot, error) {
	sn, err := scanSnapshot(s.read.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = ?`, id))
	return sn, translate(err, "snapshot", id)
}

// ListSnapshots implements store.Store.
func (s *Store) ListSnapshots(ctx context.Context, sandboxID string) ([]store.Snapshot, error) {
	return collectSnapshots(s.read.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE sandbox_id = ? ORDER BY id`, sandboxID))
}

// ListSnapshotPage implements store.Store, through the indexes PostgreSQL's uses
// (migration 015 adds the one on (org, project, id)).
func (s *Store) ListSnapshotPage(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, string, error) {
	limit, after, err := store.PageStart(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	var conds []string
	var args []any
	for _, c := range []struct{ cond, v string }{{"org = ?", f.Org}, {"project = ?", f.Project},
		{"sandbox_id = ?", f.SandboxID}, {"id > ?", after}} {
		if c.v != "" {
			conds, args = append(conds, c.cond), append(args, c.v)
		}
	}
	q := `SELECT ` + snapshotColumns + ` FROM snapshots`
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, " AND ")
	}
	q += ` ORDER BY id LIMIT ?`
	items, err := collectSnapshots(s.read.QueryContext(ctx, q, append(args, limit+1)...))
	if err != nil {
		return nil, "", err
	}
	items, next := store.PageBy(items, limit, func(sn store.Snapshot) string { return sn.ID })
	return items, next, nil
}

func collectSnapshots(rows *sql.Rows, err error) ([]store.Snapshot, error) {
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
	return s.execOne(ctx, "snapshot", id, `DELETE FROM snapshots WHERE id = ?`, id)
}

// execOne runs a write that must touch exactly one row; none is not_found.
func (s *Store) execOne(ctx context.Context, kind, id, q string, args ...any) error {
	return s.exec(ctx, func(n int64) error {
		if n == 0 {
			return store.NotFound(kind, id)
		}
		return nil
	}, q, args...)
}

// exec runs one write statement in a write transaction. Even a single statement takes
// the BEGIN IMMEDIATE path: an autocommit write starts as a reader and could meet
// SQLITE_BUSY when it upgrades. check sees the number of rows affected.
func (s *Store) exec(ctx context.Context, check func(int64) error, q string, args ...any) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return wrap(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return wrap(err)
		}
		if check != nil {
			return check(n)
		}
		return nil
	})
}

const tokenColumns = `id, hash, scope, org, project, name, created_at, last_used_at, expires_at`

func scanToken(row scanner) (store.Token, error) {
	var t store.Token
	err := row.Scan(&t.ID, &t.Hash, &t.Scope, &t.Org, &t.Project, &t.Name, timeCol{&t.CreatedAt}, nullTimeCol{&t.LastUsedAt},
		nullTimeCol{&t.ExpiresAt})
	return t, err
}

// CreateToken implements store.Store.
func (s *Store) CreateToken(ctx context.Context, now time.Time, t store.Token) (store.Token, error) {
	if err := store.ValidateToken(t); err != nil {
		return store.Token{}, err
	}
	var out store.Token
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanToken(tx.QueryRowContext(ctx, `INSERT INTO tokens (`+tokenColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+tokenColumns,
			t.ID, t.Hash, t.Scope, t.Org, t.Project, t.Name, micros(now), microsPtr(t.LastUsedAt), microsPtr(t.ExpiresAt)))
		return translate(err, "token", t.ID)
	})
	return out, err
}

// TokenByHash implements store.Store.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (store.Token, error) {
	t, err := scanToken(s.read.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = ?`, hash))
	// The hash is a secret's digest: never put it in an error message.
	return t, translate(err, "token", "(by hash)")
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context) ([]store.Token, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY id`)
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
	return s.execOne(ctx, "token", id, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, micros(now), id)
}

// DeleteToken implements store.Store.
func (s *Store) DeleteToken(ctx context.Context, id string) error {
	if err := s.execOne(ctx, "token", id, `DELETE FROM tokens WHERE id = ?`, id); err != nil {
		return err
	}
	s.feed.publish(store.Change{Kind: store.ChangeToken, ID: id})
	return nil
}

// GetPolicy implements store.Store.
func (s *Store) GetPolicy(ctx context.Context) (store.Policy, error) {
	var doc string
	err := s.read.QueryRowContext(ctx, `SELECT doc FROM policy WHERE id = 1`).Scan(&doc)
	if isNoRows(err) {
		return store.Policy{}, nil
	}
	if err != nil {
		return store.Policy{}, wrap(err)
	}
	var p store.Policy
	return p, store.UnmarshalJSON([]byte(doc), &p)
}

// PutPolicy implements store.Store.
func (s *Store) PutPolicy(ctx context.Context, p store.Policy) error {
	doc, err := jsonText(p)
	if err != nil {
		return err
	}
	if err := s.exec(ctx, nil, `INSERT INTO policy (id, doc) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET doc = excluded.doc`, doc); err != nil {
		return err
	}
	s.feed.publish(store.Change{Kind: store.ChangePolicy})
	return nil
}

// TryLease implements store.Store in one upsert: the update only happens when the lease is
// expired or already ours, and RETURNING says whether it did.
func (s *Store) TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	var got bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leases.holder = excluded.holder OR leases.expires_at <= ?
			RETURNING holder`, name, holder, micros(now.Add(ttl)), micros(now))
		if err != nil {
			return wrap(err)
		}
		defer rows.Close()
		got = rows.Next()
		for rows.Next() {
		}
		return wrap(rows.Err())
	})
	return got, err
}

// ReleaseLease implements store.Store.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	return s.exec(ctx, nil, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder)
}
