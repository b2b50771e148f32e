package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/server/store"
)

// SQLite has one writer, so events commit in seq order: a listing is in seq order
// and its cursor is the last seq it returned. A page shorter than the limit moves
// the cursor to the newest seq there was when it was read, so that a filtered
// follower does not read again what did not match; AUTOINCREMENT (migration 008)
// never hands a seq out twice, so nothing can be appended behind it.

// eventColumns is the column order of scanEvent and of eventArgs.
const eventColumns = `seq, sandbox_id, org, project, at, type, from_state, to_state, actor, pool,
	attempt, code, message, duration_ms, candidates`

// eventInsertColumns are the columns an append writes: eventColumns but seq.
const eventInsertColumns = `sandbox_id, org, project, at, type, from_state, to_state, actor, pool,
	attempt, code, message, duration_ms, candidates`

const eventInsertArity = 14

// maxEventsPerInsert keeps an insert under SQLite's bound on parameters (32766).
const maxEventsPerInsert = 1000

// appendEvents inserts the events in tx, in order, with as few statements as the
// parameter bound allows (one for any write's worth); none for no events.
func appendEvents(ctx context.Context, tx *sql.Tx, events []store.Event) error {
	for len(events) > 0 {
		chunk := events[:min(len(events), maxEventsPerInsert)]
		events = events[len(chunk):]
		args := make([]any, 0, len(chunk)*eventInsertArity)
		for _, e := range chunk {
			cands, err := store.CandidatesJSON(e.Candidates)
			if err != nil {
				return err
			}
			args = append(args, e.SandboxID, e.Org, e.Project, micros(e.At), string(e.Type),
				string(e.From), string(e.To), e.Actor, e.Pool, e.Attempt, e.Code, e.Message,
				e.DurationMs, cands)
		}
		row := "(" + placeholders(eventInsertArity) + ")"
		q := `INSERT INTO sandbox_events (` + eventInsertColumns + `) VALUES ` +
			strings.TrimSuffix(strings.Repeat(row+", ", len(chunk)), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return wrap(err)
		}
	}
	return nil
}

func scanEvent(row scanner) (store.Event, error) {
	var e store.Event
	var cands string
	err := row.Scan(&e.Seq, &e.SandboxID, &e.Org, &e.Project, timeCol{&e.At}, &e.Type, &e.From, &e.To,
		&e.Actor, &e.Pool, &e.Attempt, &e.Code, &e.Message, &e.DurationMs, &cands)
	if err != nil {
		return e, err
	}
	return e, store.UnmarshalJSON([]byte(cands), &e.Candidates)
}

// ListEvents implements store.Store; see the comment at the top of this file.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, string, error) {
	limit, err := store.CheckEventFilter(f)
	if err != nil {
		return nil, "", err
	}
	after, err := store.DecodeEventCursor(f.After)
	if err != nil {
		return nil, "", err
	}
	if after.Txid != 0 {
		return nil, "", store.InvalidEventCursor(f.After)
	}
	// The newest seq first: the rows up to it are committed, so a later statement
	// on any connection sees them all.
	var newest int64
	if err := s.read.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM sandbox_events`).Scan(&newest); err != nil {
		return nil, "", wrap(err)
	}
	where := []string{"seq > ?", "seq <= ?"}
	args := []any{after.Seq, newest}
	add := func(cond string, vs ...any) {
		where = append(where, cond)
		args = append(args, vs...)
	}
	if f.SandboxID != "" {
		add("sandbox_id = ?", f.SandboxID)
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
	if len(f.Types) > 0 {
		names := store.EventTypeNames(f.Types)
		vs := make([]any, len(names))
		for i, n := range names {
			vs[i] = n
		}
		add("type IN ("+placeholders(len(vs))+")", vs...)
	}
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, `SELECT `+eventColumns+` FROM sandbox_events WHERE `+
		strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, args...)
	if err != nil {
		return nil, "", wrap(err)
	}
	defer rows.Close()
	items := []store.Event{}
	next := after
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, "", wrap(err)
		}
		next.Seq = e.Seq
		e.Cursor = next.Encode()
		items = append(items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", wrap(err)
	}
	if len(items) < limit {
		next.Seq = max(next.Seq, newest)
	}
	return items, next.Encode(), nil
}

// pruneChunk bounds the sandboxes one pruning statement works on.
const pruneChunk = 1000

// PruneEvents implements store.Store. Every statement deletes at most
// store.EventPruneBatch rows in its own write transaction, so other writers wait
// for no more than one batch. When there is nothing to prune it reads an index
// entry or two per rule, not the table.
func (s *Store) PruneEvents(ctx context.Context, now time.Time, r store.EventRetention) (int, error) {
	if err := store.CheckRetention(r); err != nil {
		return 0, err
	}
	total := 0
	if r.AfterTerminal > 0 {
		n, err := s.pruneTerminal(ctx, micros(now.Add(-r.AfterTerminal)))
		total += n
		if err != nil {
			return total, err
		}
	}
	if r.PerSandbox > 0 {
		n, err := s.prunePerSandbox(ctx, r.PerSandbox)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneTerminal deletes the events of the sandboxes that have been terminated or
// failed since before cutoff. It finds them through the event that made them so
// (the partial index sandbox_events_terminal holds only those), checked against the
// sandbox itself; server/lifecycle records an event for every transition, and none
// leaves a terminal state. A sandbox's terminal event is deleted last, so that a
// prune cut short finds the sandbox again.
func (s *Store) pruneTerminal(ctx context.Context, cutoff int64) (int, error) {
	total := 0
	for {
		ids, err := s.sandboxIDs(ctx, `SELECT DISTINCT t.sandbox_id FROM sandbox_events t
			JOIN sandboxes s ON s.id = t.sandbox_id
			WHERE t.to_state IN ('terminated', 'failed') AND t.at < ?
				AND s.state IN ('terminated', 'failed') AND s.state_changed_at < ?
			LIMIT ?`, cutoff, cutoff, pruneChunk)
		if err != nil {
			return total, err
		}
		n, err := s.deleteBatches(ctx, `DELETE FROM sandbox_events WHERE seq IN (
			SELECT seq FROM sandbox_events WHERE sandbox_id IN (SELECT value FROM json_each(?))
			ORDER BY to_state IN ('terminated', 'failed'), seq LIMIT ?)`, ids)
		total += n
		if err != nil || len(ids) < pruneChunk {
			return total, err
		}
	}
}

// perSandboxMark is the meta key of prunePerSandbox's progress: "<PerSandbox>
// <seq>", every event up to the seq having been pruned to that bound.
const perSandboxMark = "events_pruned_per_sandbox"

// prunePerSandbox keeps the newest keep events of each sandbox. A sandbox can only
// go over the bound by appending, so only the sandboxes with events after the seq
// the last prune recorded are looked at. A new bound starts over from the first event.
func (s *Store) prunePerSandbox(ctx context.Context, keep int) (int, error) {
	var from int64
	var mark string
	err := s.read.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, perSandboxMark).Scan(&mark)
	switch {
	case err == nil:
		if k, seq, ok := strings.Cut(mark, " "); ok && k == strconv.Itoa(keep) {
			from, _ = strconv.ParseInt(seq, 10, 64)
		}
	case !isNoRows(err):
		return 0, wrap(err)
	}
	var newest int64
	if err := s.read.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM sandbox_events`).Scan(&newest); err != nil {
		return 0, wrap(err)
	}
	over, err := s.sandboxIDs(ctx, `SELECT c.sandbox_id FROM
		(SELECT DISTINCT sandbox_id FROM sandbox_events WHERE seq > ? AND seq <= ?) c
		WHERE EXISTS (SELECT 1 FROM sandbox_events e WHERE e.sandbox_id = c.sandbox_id LIMIT 1 OFFSET ?)`,
		from, newest, keep)
	if err != nil {
		return 0, err
	}
	total := 0
	for len(over) > 0 {
		chunk := over[:min(len(over), pruneChunk)]
		over = over[len(chunk):]
		n, err := s.deleteBatches(ctx, `DELETE FROM sandbox_events WHERE seq IN (
			SELECT e.seq FROM sandbox_events e
			WHERE e.sandbox_id IN (SELECT value FROM json_each(?))
				AND e.seq <= (SELECT x.seq FROM sandbox_events x WHERE x.sandbox_id = e.sandbox_id
					ORDER BY x.seq DESC LIMIT 1 OFFSET ?)
			LIMIT ?)`, chunk, keep)
		total += n
		if err != nil {
			return total, err
		}
	}
	if next := strconv.Itoa(keep) + " " + strconv.FormatInt(newest, 10); next != mark {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, perSandboxMark, next)
			return wrap(err)
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sandboxIDs runs a query of one text column on a read connection.
func (s *Store) sandboxIDs(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, wrap(err)
		}
		out = append(out, id)
	}
	return out, wrap(rows.Err())
}

// deleteBatches runs del (the IDs as a JSON array, then more, then the batch size
// last) in write transactions of its own until one deletes fewer rows than a
// batch, and returns how many it deleted.
func (s *Store) deleteBatches(ctx context.Context, del string, ids []string, more ...any) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	args := append(append([]any{string(list)}, more...), store.EventPruneBatch)
	total := 0
	for {
		var n int64
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, del, args...)
			if err != nil {
				return wrap(err)
			}
			n, err = res.RowsAffected()
			return wrap(err)
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < store.EventPruneBatch {
			return total, nil
		}
	}
}
