package sqlite

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/different-ai/differently/server/store"
)

// sandboxColumns is the column order of sandboxArgs and scanSandbox.
const sandboxColumns = `id, org, project, state, pool, region, backend_ref, template, profile,
	capabilities, cpu, memory_mib, disk_gib, labels, env, ttl_seconds, expires_at, from_snapshot,
	placement, attempts, reason, next_attempt_at, claimed_by, claim_expires_at, idempotency_key,
	created_at, updated_at, state_changed_at, version, avoid_pool, avoid_until, request_hash, init_commands`

func scanSandbox(row scanner) (store.Sandbox, error) {
	var sb store.Sandbox
	var caps, labels, env, placement, initCommands string
	err := row.Scan(&sb.ID, &sb.Org, &sb.Project, &sb.State, &sb.Pool, &sb.Region, &sb.BackendRef,
		&sb.Template, &sb.Profile, &caps, &sb.Resources.CPU, &sb.Resources.MemoryMiB,
		&sb.Resources.DiskGiB, &labels, &env, &sb.TTLSeconds, nullTimeCol{&sb.ExpiresAt}, &sb.FromSnapshot,
		&placement, &sb.Attempts, &sb.Reason, timeCol{&sb.NextAttemptAt}, &sb.ClaimedBy,
		nullTimeCol{&sb.ClaimExpiresAt}, &sb.IdempotencyKey, timeCol{&sb.CreatedAt},
		timeCol{&sb.UpdatedAt}, timeCol{&sb.StateChangedAt}, &sb.Version, &sb.AvoidPool,
		nullTimeCol{&sb.AvoidUntil}, &sb.RequestHash, &initCommands)
	if err != nil {
		return sb, err
	}
	for _, f := range []struct {
		s string
		v any
	}{{caps, &sb.Capabilities}, {labels, &sb.Labels}, {env, &sb.Env}, {placement, &sb.Placement}, {initCommands, &sb.InitCommands}} {
		if err := store.UnmarshalJSON([]byte(f.s), f.v); err != nil {
			return sb, err
		}
	}
	if len(sb.InitCommands) == 0 {
		sb.InitCommands = nil // [] in the column, none either way
	}
	return sb, nil
}

func sandboxArgs(sb store.Sandbox) ([]any, error) {
	var js [5]string
	initCommands := sb.InitCommands
	if initCommands == nil {
		initCommands = []string{} // as the column's default has it
	}
	for i, v := range []any{sb.Capabilities, sb.Labels, sb.Env, sb.Placement, initCommands} {
		s, err := jsonText(v)
		if err != nil {
			return nil, err
		}
		js[i] = s
	}
	return []any{sb.ID, sb.Org, sb.Project, string(sb.State), sb.Pool, sb.Region, sb.BackendRef,
		sb.Template, sb.Profile, js[0], sb.Resources.CPU, sb.Resources.MemoryMiB, sb.Resources.DiskGiB,
		js[1], js[2], sb.TTLSeconds, microsPtr(sb.ExpiresAt), sb.FromSnapshot, js[3], sb.Attempts,
		sb.Reason, micros(sb.NextAttemptAt), sb.ClaimedBy, microsPtr(sb.ClaimExpiresAt),
		sb.IdempotencyKey, micros(sb.CreatedAt), micros(sb.UpdatedAt), micros(sb.StateChangedAt),
		sb.Version, sb.AvoidPool, microsPtr(sb.AvoidUntil), sb.RequestHash, js[4]}, nil
}

func collectSandboxes(rows *sql.Rows, err error) ([]store.Sandbox, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, sb)
	}
	return out, wrap(rows.Err())
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// CreateSandbox implements store.Store. The lookup and the insert share one write
// transaction, which no other writer can interleave with, so a key makes one sandbox.
func (s *Store) CreateSandbox(ctx context.Context, now time.Time, sb store.Sandbox) (store.Sandbox, bool, error) {
	return s.createSandbox(ctx, now, sb, false, nil)
}

// CreateSandboxAdmitted implements store.Store. The write transaction is the project's
// lock: no other writer runs between the usage read and the insert.
func (s *Store) CreateSandboxAdmitted(ctx context.Context, now time.Time, sb store.Sandbox, admit func(store.Admission, *store.Sandbox) error) (store.Sandbox, bool, error) {
	return s.createSandbox(ctx, now, sb, true, admit)
}

func (s *Store) createSandbox(ctx context.Context, now time.Time, sb store.Sandbox, admitted bool, admit func(store.Admission, *store.Sandbox) error) (store.Sandbox, bool, error) {
	sb, err := store.NormalizeSandbox(now, sb)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	var out store.Sandbox
	created := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		ins := sb
		if sb.IdempotencyKey != "" {
			out, err = scanSandbox(tx.QueryRowContext(ctx, selectByKeySQL, sb.Org, sb.Project, sb.IdempotencyKey))
			if err == nil || !isNoRows(err) {
				return wrap(err)
			}
		}
		if admitted {
			a, err := admission(ctx, tx, sb.Org, sb.Project, now)
			if err != nil {
				return err
			}
			if admit != nil {
				if err := admit(a, &ins); err != nil {
					return err
				}
			}
		}
		args, err := sandboxArgs(ins)
		if err != nil {
			return err
		}
		created = true
		out, err = scanSandbox(tx.QueryRowContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
			VALUES (`+placeholders(len(args))+`) RETURNING `+sandboxColumns, args...))
		if err != nil {
			return translate(err, "sandbox", sb.ID)
		}
		return appendEvents(ctx, tx, store.PendingEvents(ins, ins.CreatedAt))
	})
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if created {
		s.feed.publish(store.SandboxChange(out))
	}
	return out, created, nil
}

// GetSandbox implements store.Store.
func (s *Store) GetSandbox(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := scanSandbox(s.read.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	return sb, translate(err, "sandbox", id)
}

// ListSandboxes implements store.Store. Each wanted label is an EXISTS over json_each of
// the labels document, which is exact for any key (no JSON-path quoting involved).
func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, string, error) {
	limit, after, err := store.PageStart(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	q, args := sandboxQuery(f, after, limit+1)
	items, err := collectSandboxes(s.read.QueryContext(ctx, q, args...))
	if err != nil {
		return nil, "", err
	}
	items, next := store.Page(items, limit)
	return items, next, nil
}

// EachSandbox implements store.Store with one query on a read connection.
func (s *Store) EachSandbox(ctx context.Context, f store.SandboxFilter, fn func(store.Sandbox) error) error {
	q, args := sandboxQuery(f, "", 0)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return wrap(err)
		}
		if err := fn(sb); err != nil {
			return err
		}
	}
	return wrap(rows.Err())
}

// sandboxQuery selects the sandboxes f names (Limit and Cursor aside) with IDs
// above after, in ID order, limit of them (0: all).
func sandboxQuery(f store.SandboxFilter, after string, limit int) (string, []any) {
	where := []string{"id > ?"}
	args := []any{after}
	add := func(cond string, vs ...any) {
		where = append(where, cond)
		args = append(args, vs...)
	}
	if f.Org != "" {
		add("org = ?", f.Org)
	}
	if f.Project != "" {
		add("project = ?", f.Project)
	}
	if f.Pool != "" {
		add("pool = ?", f.Pool)
	}
	if len(f.States) > 0 {
		add("state IN ("+placeholders(len(f.States))+")", statesArgs(f.States)...)
	}
	if f.ExpiresBy != nil {
		add("expires_at IS NOT NULL AND expires_at <= ?", micros(*f.ExpiresBy))
	}
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(`EXISTS (SELECT 1 FROM json_each(sandboxes.labels) AS l WHERE l.key = ? AND l.type = 'text' AND l.value = ?)`,
			k, f.Labels[k])
	}
	q := `SELECT ` + sandboxColumns + ` FROM sandboxes WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	return q, args
}

func statesArgs(states []store.State) []any {
	out := make([]any, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}

// UpdateSandbox implements store.Store. The write transaction is the lock: no other
// writer, in this process or another, runs between the read and the write.
func (s *Store) UpdateSandbox(ctx context.Context, id string, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	var out, before store.Sandbox
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var rowErr, err error
		before, out, rowErr, err = updateSandbox(ctx, tx, id, now, fn)
		if err != nil {
			return err
		}
		return rowErr
	})
	if err != nil {
		return out, err
	}
	s.feed.sandboxWritten(before, out)
	return out, nil
}

// UpdateSandboxes implements store.Store: one write transaction, rows in ID order.
func (s *Store) UpdateSandboxes(ctx context.Context, ids []string, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	index, err := store.BatchIndex(ids)
	if err != nil {
		return nil, nil, err
	}
	order := slices.Sorted(maps.Keys(index))
	out := make([]store.Sandbox, len(ids))
	before := make([]store.Sandbox, len(ids))
	errs := make([]error, len(ids))
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		for _, id := range order {
			i := index[id]
			var err error
			before[i], out[i], errs[i], err = updateSandbox(ctx, tx, id, now, func(sb *store.Sandbox) error { return fn(i, sb) })
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range ids {
		if errs[i] == nil {
			s.feed.sandboxWritten(before[i], out[i])
		}
	}
	return out, errs, nil
}

// UpdateKnownSandboxes implements store.Store as UpdateSandboxes of the known
// sandboxes' IDs: reading a row again costs an in-process lookup here, not a round
// trip, so the known values save nothing worth the second code path.
func (s *Store) UpdateKnownSandboxes(ctx context.Context, known []store.Sandbox, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	return s.UpdateSandboxes(ctx, store.SandboxIDs(known), now, fn)
}

// updateSandbox reads, changes and writes one sandbox inside tx. rowErr concerns this
// sandbox alone (it is missing, fn refused it) and nothing was written; err means the
// transaction itself failed.
func updateSandbox(ctx context.Context, tx *sql.Tx, id string, now time.Time, fn func(*store.Sandbox) error) (before, after store.Sandbox, rowErr, err error) {
	cur, err := scanSandbox(tx.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if isNoRows(err) {
		return cur, cur, store.NotFound("sandbox", id), nil
	}
	if err != nil {
		return cur, cur, nil, wrap(err)
	}
	next, err := store.ApplyUpdate(cur, now, fn)
	if err != nil {
		return cur, cur, err, nil
	}
	args, err := sandboxArgs(next)
	if err != nil {
		return cur, cur, err, nil
	}
	// Every column but id (args[0], the key, last here), created_at (args[25]),
	// request_hash and init_commands (the last two), which never change.
	set := append(append(append([]any{}, args[1:25]...), args[26:len(args)-2]...), id)
	out, err := scanSandbox(tx.QueryRowContext(ctx, `UPDATE sandboxes SET org = ?, project = ?, state = ?,
		pool = ?, region = ?, backend_ref = ?, template = ?, profile = ?, capabilities = ?,
		cpu = ?, memory_mib = ?, disk_gib = ?, labels = ?, env = ?, ttl_seconds = ?,
		expires_at = ?, from_snapshot = ?, placement = ?, attempts = ?, reason = ?,
		next_attempt_at = ?, claimed_by = ?, claim_expires_at = ?, idempotency_key = ?,
		updated_at = ?, state_changed_at = ?, version = ?, avoid_pool = ?, avoid_until = ?
		WHERE id = ? RETURNING `+sandboxColumns, set...))
	if err != nil {
		return cur, out, nil, translate(err, "sandbox", id)
	}
	return cur, out, nil, appendEvents(ctx, tx, store.PendingEvents(next, now))
}

// ClaimSandboxes implements store.Store as one UPDATE in a write transaction; writers are
// serialised, so two claimers never see the same row unclaimed.
func (s *Store) ClaimSandboxes(ctx context.Context, now time.Time, claimer string, lease time.Duration, limit int) ([]store.Sandbox, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []store.Sandbox
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = collectSandboxes(tx.QueryContext(ctx, `UPDATE sandboxes SET claimed_by = ?, claim_expires_at = ?
			WHERE id IN (
				SELECT id FROM sandboxes
				WHERE state = 'queued' AND next_attempt_at <= ?
				  AND (claim_expires_at IS NULL OR claim_expires_at <= ?)
				ORDER BY next_attempt_at, id
				LIMIT ?)
			RETURNING `+sandboxColumns, claimer, micros(now.Add(lease)), micros(now), micros(now), limit))
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no order; restore the claim order.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].NextAttemptAt.Equal(out[j].NextAttemptAt) {
			return out[i].NextAttemptAt.Before(out[j].NextAttemptAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// CountSandboxesByPool implements store.Store.
func (s *Store) CountSandboxesByPool(ctx context.Context, states []store.State) (map[string]int, error) {
	return s.countBy(ctx, "pool", states)
}

// CountSandboxesByState implements store.Store.
func (s *Store) CountSandboxesByState(ctx context.Context, states []store.State) (map[store.State]int, error) {
	byName, err := s.countBy(ctx, "state", states)
	return store.KeyedByState(byName), err
}

// countBy counts the sandboxes in states grouped by column, a constant of this file.
func (s *Store) countBy(ctx context.Context, column string, states []store.State) (map[string]int, error) {
	out := map[string]int{}
	if len(states) == 0 {
		return out, nil
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+column+`, count(*) FROM sandboxes WHERE state IN (`+
		placeholders(len(states))+`) GROUP BY `+column, statesArgs(states)...)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return nil, wrap(err)
		}
		out[key] = n
	}
	return out, wrap(rows.Err())
}

// selectByKeySQL finds the sandbox holding an idempotency key in a project. The
// redundant idempotency_key <> ” is the predicate of the unique index
// sandboxes_idempotency, which SQLite uses only when the statement states it; without
// it the lookup walks the project's every sandbox (TestKeyLookupUsesItsIndex).
const selectByKeySQL = `SELECT ` + sandboxColumns + ` FROM sandboxes
	WHERE org = ? AND project = ? AND idempotency_key = ? AND idempotency_key <> ''`

// selectWarmSQL reads the ready warm sandbox of a shape's project on a pool that has
// waited longest. The organisation and the state are constants, as in the predicate
// of the index sandboxes_warm_ready (migration 013), which SQLite uses only then.
const selectWarmSQL = `SELECT ` + sandboxColumns + ` FROM sandboxes
	WHERE org = '` + store.WarmOrg + `' AND state = 'running' AND project = ? AND pool = ?
	ORDER BY state_changed_at, id LIMIT 1`

// ClaimWarm implements store.Store. The write transaction is the project's lock, and
// the only writer: no other claim can take the same warm sandbox meanwhile.
func (s *Store) ClaimWarm(ctx context.Context, now time.Time, sb store.Sandbox, pool, project string,
	claim func(store.Admission, store.Sandbox, *store.Sandbox) error) (store.Sandbox, bool, error) {
	var out store.Sandbox
	created := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if sb.IdempotencyKey != "" {
			got, err := scanSandbox(tx.QueryRowContext(ctx, selectByKeySQL, sb.Org, sb.Project, sb.IdempotencyKey))
			if err == nil {
				out = got
				return nil
			}
			if !isNoRows(err) {
				return wrap(err)
			}
		}
		a, err := admission(ctx, tx, sb.Org, sb.Project, now)
		if err != nil {
			return err
		}
		warm, err := scanSandbox(tx.QueryRowContext(ctx, selectWarmSQL, project, pool))
		if isNoRows(err) {
			return store.ErrNoWarm
		}
		if err != nil {
			return wrap(err)
		}
		ins := sb
		if err := claim(a, warm, &ins); err != nil {
			return err
		}
		ins.ID = warm.ID
		if ins, err = store.NormalizeSandbox(now, ins); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, warm.ID); err != nil {
			return wrap(err)
		}
		args, err := sandboxArgs(ins)
		if err != nil {
			return err
		}
		out, err = scanSandbox(tx.QueryRowContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
			VALUES (`+placeholders(len(args))+`) RETURNING `+sandboxColumns, args...))
		if err != nil {
			return translate(err, "sandbox", ins.ID)
		}
		created = true
		return appendEvents(ctx, tx, store.PendingEvents(ins, ins.CreatedAt))
	})
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if created {
		s.feed.publish(store.SandboxChange(out))
	}
	return out, created, nil
}
