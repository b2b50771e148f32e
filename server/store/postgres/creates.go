package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// creates merges concurrent clear creates (createSandboxClear's one statement) into
// shared transactions, the way store.Batcher merges state changes: a create arriving
// while none is being written is sent at once, alone, as before; creates arriving
// meanwhile queue, and when the round trip in progress ends, the oldest of them
// leads the next one with all that queued, as BEGIN, the inserts and COMMIT in one
// round trip. Under load a replica thus pays one commit for many creates, and a lone
// create waits for nothing.
//
// Each insert keeps its own snapshot and its own conditions, and sees the inserts
// before it in the transaction, so a batch admits what the same creates sent one by
// one in that order would. An insert the server refuses aborts the transaction; its
// creates are then sent again one by one, so each gets the answer it would have got
// alone, and none is written twice.
type creates struct {
	s     *Store
	turns turns[*clearCreate]
}

// maxCreateBatch bounds one transaction's inserts: a batch holds its rows' index
// locks until it commits, and a larger one saves little more.
const maxCreateBatch = 32

// createTimeout bounds one shared transaction. It does not end with its leader's
// context, since it carries other callers' creates.
const createTimeout = 30 * time.Second

type clearCreate struct {
	sql  string
	args []any
	// row is the sandbox the insert writes, as a read would return it.
	row  store.Sandbox
	done chan createResult
}

type createResult struct {
	out      store.Sandbox
	inserted bool
	err      error
	// lead hands the next batch to this create's caller instead of a result.
	lead bool
	// alone asks the caller to send its insert again on its own: the shared
	// transaction was rolled back.
	alone bool
}

// insert runs one clear insert of row, alone or in a shared transaction: inserted
// is false, with nothing written, when the statement's conditions did not hold.
func (c *creates) insert(ctx context.Context, row store.Sandbox, sql string, args []any) (store.Sandbox, bool, error) {
	w := &clearCreate{sql: sql, args: args, row: row, done: make(chan createResult, 1)}
	r := await(c.turns.join(w), w.done, func(r createResult) bool { return r.lead }, func() { c.flush(ctx) })
	if r.alone {
		return c.s.insertClear(ctx, row, sql, args)
	}
	return r.out, r.inserted, r.err
}

// flush sends what is pending, then hands the lead on.
func (c *creates) flush(ctx context.Context) {
	batch := c.turns.take(oldest[*clearCreate](maxCreateBatch))
	defer c.handOn()
	answered := false
	defer func() {
		// A panic of the store's own code must not leave the batch's other callers
		// waiting for ever; it goes on up the leader's stack.
		if !answered {
			for _, w := range batch {
				w.done <- createResult{err: api.Errorf(api.CodeInternal, "the transaction creating sandbox %s was abandoned", w.row.ID)}
			}
		}
	}()
	if len(batch) == 1 {
		// The lone create of a quiet replica: its caller's context, no transaction.
		w := batch[0]
		out, ok, err := c.s.insertClear(ctx, w.row, w.sql, w.args)
		answered = true
		w.done <- createResult{out: out, inserted: ok, err: err}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	results, err := c.s.insertClears(ctx, batch)
	answered = true
	var pe *pgconn.PgError
	for i, w := range batch {
		switch {
		case err == nil:
			w.done <- results[i]
		case errors.As(err, &pe):
			// The server refused one insert and rolled back the rest.
			w.done <- createResult{alone: true}
		default:
			w.done <- createResult{err: wrap(err)}
		}
	}
}

// handOn gives the lead to the oldest create that queued meanwhile, or ends the
// busy period.
func (c *creates) handOn() {
	if w, ok := c.turns.next(); ok {
		w.done <- createResult{lead: true}
	}
}

// insertClear sends one clear insert of row on its own.
func (s *Store) insertClear(ctx context.Context, row store.Sandbox, sql string, args []any) (store.Sandbox, bool, error) {
	var id string
	err := s.pool.QueryRow(ctx, sql, args...).Scan(&id)
	switch {
	case isNoRows(err):
		return store.Sandbox{}, false, nil
	case err != nil:
		return store.Sandbox{}, false, translate(err, "sandbox", row.ID)
	}
	s.notify.sandbox(row)
	return row, true, nil
}

// insertClears sends the batch's inserts inside one transaction, in one round trip
// (inOneTrip, whose errors it returns as they are).
func (s *Store) insertClears(ctx context.Context, batch []*clearCreate) ([]createResult, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(batch))}
	for _, w := range batch {
		b.Queue(w.sql, w.args...)
	}
	var results []createResult
	err := s.inOneTrip(ctx, b, func(br pgx.BatchResults) (err error) {
		results, err = readClears(br, batch)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		if r.inserted {
			s.notify.sandbox(r.out)
		}
	}
	return results, nil
}

func readClears(br pgx.BatchResults, batch []*clearCreate) ([]createResult, error) {
	results := make([]createResult, len(batch))
	for i, w := range batch {
		var id string
		err := br.QueryRow().Scan(&id)
		switch {
		case isNoRows(err):
		case err != nil:
			return nil, err
		default:
			results[i] = createResult{out: w.row, inserted: true}
		}
	}
	return results, nil
}
