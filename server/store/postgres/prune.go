package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/server/store"
)

// pruneChunk bounds the sandboxes one pruning statement works on.
const pruneChunk = 1000

// PruneEvents implements store.Store. Every statement deletes at most
// store.EventPruneBatch rows in its own transaction, picked by ctid (the table has
// no index on seq): rows are never updated, and none that the statement's own
// snapshot can see may be reclaimed and its ctid reused before it ends. When there
// is nothing to prune it reads an index entry or two per rule, not the table: see
// pruneTerminal and prunePerSandbox.
func (s *Store) PruneEvents(ctx context.Context, now time.Time, r store.EventRetention) (int, error) {
	if err := store.CheckRetention(r); err != nil {
		return 0, err
	}
	total := 0
	if r.AfterTerminal > 0 {
		n, err := s.pruneTerminal(ctx, store.Timestamp(now.Add(-r.AfterTerminal)))
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
func (s *Store) pruneTerminal(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		var ids []string
		err := s.pool.QueryRow(ctx, `SELECT array(
			SELECT DISTINCT t.sandbox_id FROM sandbox_events t JOIN sandboxes s ON s.id = t.sandbox_id
			WHERE t.to_state IN ('terminated', 'failed') AND t.at < $1
				AND s.state IN ('terminated', 'failed') AND s.state_changed_at < $1
			LIMIT $2)`, cutoff, pruneChunk).Scan(&ids)
		if err != nil {
			return total, wrap(err)
		}
		n, err := s.deleteBatches(ctx, `DELETE FROM sandbox_events WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM sandbox_events WHERE sandbox_id = ANY($1)
			ORDER BY to_state IN ('terminated', 'failed'), seq LIMIT $2))`, ids)
		total += n
		if err != nil || len(ids) < pruneChunk {
			return total, err
		}
	}
}

// perSandboxMark is the meta key of prunePerSandbox's progress: "<PerSandbox>
// <txid>", every event below the txid having been pruned to that bound.
const perSandboxMark = "events_pruned_per_sandbox"

// prunePerSandbox keeps the newest keep events of each sandbox. A sandbox can only
// go over the bound by appending, so only the sandboxes with events since the last
// prune are looked at: those with a txid at or above the horizon that prune
// recorded (rows below a horizon were all visible to the prune that read it; see
// events.go). A new bound starts over from the first event.
func (s *Store) prunePerSandbox(ctx context.Context, keep int) (int, error) {
	from := "0"
	var mark string
	err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, perSandboxMark).Scan(&mark)
	switch {
	case err == nil:
		if k, txid, ok := strings.Cut(mark, " "); ok && k == strconv.Itoa(keep) {
			from = txid
		}
	case !isNoRows(err):
		return 0, wrap(err)
	}
	var horizon string
	var over []string
	err = s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text, array(
		SELECT c.sandbox_id FROM (SELECT DISTINCT sandbox_id FROM sandbox_events WHERE txid >= $1::text::xid8) c
		WHERE EXISTS (SELECT FROM sandbox_events e WHERE e.sandbox_id = c.sandbox_id OFFSET $2))`,
		from, keep).Scan(&horizon, &over)
	if err != nil {
		return 0, wrap(err)
	}
	total := 0
	for len(over) > 0 {
		chunk := over[:min(len(over), pruneChunk)]
		over = over[len(chunk):]
		n, err := s.deleteBatches(ctx, `DELETE FROM sandbox_events WHERE ctid = ANY(ARRAY(
			SELECT d.ctid FROM unnest($1::text[]) AS c(id)
			CROSS JOIN LATERAL (SELECT ctid FROM sandbox_events WHERE sandbox_id = c.id
				ORDER BY seq DESC OFFSET $3) d
			LIMIT $2))`, chunk, keep)
		total += n
		if err != nil {
			return total, err
		}
	}
	if next := fmt.Sprintf("%d %s", keep, horizon); next != mark {
		if _, err := s.pool.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, perSandboxMark, next); err != nil {
			return total, wrap(err)
		}
	}
	return total, nil
}

// deleteBatches runs del (ids as $1, the batch size as $2, then more) until a run
// deletes fewer rows than a batch, and returns how many it deleted.
func (s *Store) deleteBatches(ctx context.Context, del string, ids []string, more ...any) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := append([]any{ids, store.EventPruneBatch}, more...)
	total := 0
	for {
		tag, err := s.pool.Exec(ctx, del, args...)
		if err != nil {
			return total, wrap(err)
		}
		n := int(tag.RowsAffected())
		total += n
		if n < store.EventPruneBatch {
			return total, nil
		}
	}
}
