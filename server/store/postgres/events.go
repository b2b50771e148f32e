package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
)

// How ListEvents follows the table without missing an event.
//
// Sequence numbers are taken when a row is inserted, not when it commits: a
// transaction may take seq 10, another seq 11 and commit first, and a follower
// that had read up to 11 would never see 10. So a listing that does not name a
// sandbox is ordered by (txid, seq) and shows a row only once txid is below the
// xmin of the listing's snapshot: every transaction with a lower ID has then ended,
// and any row that commits later has a txid at least that xmin (migration 010 says
// why a row's txid is never below its own transaction's ID). The cursor is the
// (txid, seq) of the last row returned; a page shorter than the limit has shown
// every row below the horizon, so its cursor moves to (xmin, 0), which lets a
// filtered follower skip what did not match, and an empty page never moves it
// back. An event is thus shown once every transaction that had taken an ID when
// it was appended has ended: a long transaction elsewhere on the server holds the
// follow back, never breaks it.
//
// A listing of one sandbox needs none of this: its writes hold the sandbox's row
// lock, so its events take their seq in commit order, and the cursor is the last seq.
// The two kinds of cursor are not interchangeable; one passed to a listing of the
// other kind is invalid_request.

// eventColumns is the column order of scanEvent, after the txid.
const eventColumns = `seq, sandbox_id, org, project, at, type, from_state, to_state, actor, pool,
	attempt, code, message, duration_ms, candidates`

// eventInsertColumns are the columns an append writes, in eventArrays' order.
const eventInsertColumns = `sandbox_id, org, project, at, type, from_state, to_state, actor, pool,
	attempt, code, message, duration_ms, candidates`

// eventArrayTypes are the array types of eventInsertColumns.
var eventArrayTypes = []string{"text", "text", "text", "timestamptz", "text", "text", "text", "text",
	"text", "int4", "text", "text", "int8", "text"}

// eventsInsert appends the events of arrays bound from $first on (eventArrays.args),
// in array order, which their seq follows; cond, unless "", must hold for any to be
// appended. Only the first array is unnested; the others are read by subscript at
// its ordinality, since an unnest of n arrays is n function scans, each materialised
// in a tuplestore of its own, and allocating and freeing those on every statement
// cost the server more than the rows' insertion.
//
// The rows come from an unnest rather than a generate_series over the array's
// length so that the statement's generic plan is chosen: for a parameter the
// planner guesses 10 elements of an unnest but 1000 rows of a generate_series, and
// the generic plan of such an insert looks dearer than a custom plan for the real
// length, so every execution would be planned again (the whole statement, the
// sandbox write it rides on included). TestStatementsKeepGenericPlans checks it.
func eventsInsert(first int, cond string) string {
	cols := strings.Split(eventInsertColumns, ",")
	exprs := make([]string, len(eventArrayTypes))
	exprs[0] = "e.first AS " + strings.TrimSpace(cols[0])
	for i := 1; i < len(eventArrayTypes); i++ {
		exprs[i] = fmt.Sprintf("($%d::%s[])[e.i] AS %s", first+i, eventArrayTypes[i], strings.TrimSpace(cols[i]))
	}
	q := `INSERT INTO sandbox_events (` + eventInsertColumns + `)
	SELECT ` + strings.Join(exprs, ", ") + `
	FROM unnest($` + strconv.Itoa(first) + `::` + eventArrayTypes[0] + `[]) WITH ORDINALITY AS e(first, i)`
	if cond != "" {
		q += ` WHERE ` + cond
	}
	return q + ` ORDER BY e.i`
}

// updateColumnCount is the number of parameters of updateSandboxesSQL.
const updateColumnCount = 30

// updateSandboxesEventsSQL is updateSandboxesSQL appending the events bound after
// its parameters: one statement rather than two, which is most of what an
// append costs the server.
var updateSandboxesEventsSQL = `WITH ev AS (` + eventsInsert(updateColumnCount+1, "") + `) ` + updateSandboxesSQL

// sandboxParamCount is the number of parameters of sandboxArgs.
const sandboxParamCount = 33

// withEvents makes a sandbox insert (sandboxArgs' parameters, RETURNING columns)
// also append the events bound after them, in the same statement and only when it
// inserts the row: an idempotent replay, which inserts nothing, appends nothing, and
// a create costs no more round trips with events than without.
func withEvents(insert, columns string) string {
	return `WITH ins AS (` + insert + `),
	ev AS (` + eventsInsert(sandboxParamCount+1, `EXISTS (SELECT FROM ins)`) + `)
	SELECT ` + columns + ` FROM ins`
}

var (
	insertSandboxEventsSQL = withEvents(insertSandboxSQL, sandboxColumns)
	insertClearEventsSQL   = withEvents(insertClearSQL, "id")
)

// insertArgs returns the statement that inserts sb, plain when sb has no pending
// events and evented otherwise, and its arguments.
func insertArgs(sb store.Sandbox, plain, evented string) (string, []any, error) {
	args, err := sandboxArgs(sb)
	if err != nil {
		return "", nil, err
	}
	events := store.PendingEvents(sb, sb.CreatedAt)
	if len(events) == 0 {
		return plain, args, nil
	}
	var ev eventArrays
	if err := ev.add(events); err != nil {
		return "", nil, err
	}
	return evented, append(args, ev.args()...), nil
}

// eventArrays holds events column by column, in the order of eventInsertColumns.
type eventArrays struct {
	sandboxID, org, project []string
	at                      []time.Time
	typ, from, to           []string
	actor, pool             []string
	attempt                 []int32
	code, message           []string
	durationMs              []int64
	candidates              []string
}

// add appends the events, all of them or, when one's candidates fail to encode,
// none.
func (a *eventArrays) add(events []store.Event) error {
	cands := make([]string, len(events))
	for i, e := range events {
		c, err := store.CandidatesJSON(e.Candidates)
		if err != nil {
			return err
		}
		cands[i] = c
	}
	for i, e := range events {
		a.sandboxID = append(a.sandboxID, e.SandboxID)
		a.org = append(a.org, e.Org)
		a.project = append(a.project, e.Project)
		a.at = append(a.at, e.At)
		a.typ = append(a.typ, string(e.Type))
		a.from = append(a.from, string(e.From))
		a.to = append(a.to, string(e.To))
		a.actor = append(a.actor, e.Actor)
		a.pool = append(a.pool, e.Pool)
		a.attempt = append(a.attempt, int32(e.Attempt))
		a.code = append(a.code, e.Code)
		a.message = append(a.message, e.Message)
		a.durationMs = append(a.durationMs, e.DurationMs)
		a.candidates = append(a.candidates, cands[i])
	}
	return nil
}

func (a *eventArrays) len() int { return len(a.sandboxID) }

// truncate drops the events after the first n.
func (a *eventArrays) truncate(n int) {
	a.sandboxID, a.org, a.project, a.at = a.sandboxID[:n], a.org[:n], a.project[:n], a.at[:n]
	a.typ, a.from, a.to, a.actor, a.pool = a.typ[:n], a.from[:n], a.to[:n], a.actor[:n], a.pool[:n]
	a.attempt, a.code, a.message = a.attempt[:n], a.code[:n], a.message[:n]
	a.durationMs, a.candidates = a.durationMs[:n], a.candidates[:n]
}

func (a *eventArrays) args() []any {
	return []any{a.sandboxID, a.org, a.project, a.at, a.typ, a.from, a.to, a.actor, a.pool,
		a.attempt, a.code, a.message, a.durationMs, a.candidates}
}

// scanEvent reads txid::text and eventColumns.
func scanEvent(row pgx.Row) (store.Event, uint64, error) {
	var e store.Event
	var txid, cands string
	err := row.Scan(&txid, &e.Seq, &e.SandboxID, &e.Org, &e.Project, &e.At, &e.Type, &e.From, &e.To,
		&e.Actor, &e.Pool, &e.Attempt, &e.Code, &e.Message, &e.DurationMs, &cands)
	if err != nil {
		return e, 0, err
	}
	x, err := strconv.ParseUint(txid, 10, 64)
	if err != nil {
		return e, 0, fmt.Errorf("read txid %q: %w", txid, err)
	}
	e.At = store.Timestamp(e.At)
	return e, x, store.UnmarshalJSON([]byte(cands), &e.Candidates)
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
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	bySandbox := f.SandboxID != ""
	order := "seq"
	if bySandbox {
		if after.Txid != 0 {
			return nil, "", store.InvalidEventCursor(f.After)
		}
		add("seq > $%d", after.Seq)
		add("sandbox_id = $%d", f.SandboxID)
	} else {
		if f.After != "" && after.Txid == 0 {
			return nil, "", store.InvalidEventCursor(f.After)
		}
		args = append(args, strconv.FormatUint(after.Txid, 10), after.Seq)
		where = append(where, "(txid, seq) > ($1::text::xid8, $2::int8)",
			"txid < pg_snapshot_xmin(pg_current_snapshot())")
		order = "txid, seq"
	}
	if f.Org != "" {
		add("org = $%d", f.Org)
	}
	if f.Project != "" {
		add("project = $%d", f.Project)
	}
	if f.Pool != "" {
		add("pool = $%d", f.Pool)
	}
	if len(f.Types) > 0 {
		add("type = ANY($%d)", store.EventTypeNames(f.Types))
	}
	args = append(args, limit)
	q := fmt.Sprintf(`SELECT txid::text, %s FROM sandbox_events WHERE %s ORDER BY %s LIMIT $%d`,
		eventColumns, strings.Join(where, " AND "), order, len(args))

	var b pgx.Batch
	if !bySandbox {
		b.Queue(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text`)
	}
	b.Queue(q, args...)
	br := s.pool.SendBatch(ctx, &b)
	defer br.Close()
	var horizon uint64
	if !bySandbox {
		var h string
		if err := br.QueryRow().Scan(&h); err != nil {
			return nil, "", wrap(err)
		}
		if horizon, err = strconv.ParseUint(h, 10, 64); err != nil {
			return nil, "", wrap(fmt.Errorf("read xmin %q: %w", h, err))
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, "", wrap(err)
	}
	defer rows.Close()
	items := []store.Event{}
	next := after
	for rows.Next() {
		e, txid, err := scanEvent(rows)
		if err != nil {
			return nil, "", wrap(err)
		}
		next = store.EventCursor{Txid: txid, Seq: e.Seq}
		if bySandbox {
			next.Txid = 0
		}
		e.Cursor = next.Encode()
		items = append(items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", wrap(err)
	}
	if h := (store.EventCursor{Txid: horizon}); !bySandbox && len(items) < limit && next.Less(h) {
		next = h
	}
	return items, next.Encode(), nil
}
