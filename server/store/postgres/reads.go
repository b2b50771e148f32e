package postgres

import (
	"context"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// reads merges concurrent GetSandbox calls into shared statements, the way creates
// merges clear creates: a read arriving while none is in flight is sent at once,
// alone, as before; reads arriving meanwhile queue, and when the round trip in
// progress ends, the oldest of them leads the next one, one SELECT over every ID
// that queued. Each API call that names a sandbox (an exec, a file, a wait's
// re-read) reads its row, so under load this is most of a replica's statements,
// and each statement is a wake-up of a server process.
//
// A shared statement's snapshot is taken after every one of its reads was asked
// for, so each still sees every write committed before it was asked, as alone.
type reads struct {
	s     *Store
	turns turns[*sandboxRead]
}

// maxReadBatch bounds one shared statement's IDs.
const maxReadBatch = 64

// readTimeout bounds one shared statement. It does not end with its leader's
// context, since it carries other callers' reads.
const readTimeout = 30 * time.Second

type sandboxRead struct {
	id   string
	done chan readResult
}

type readResult struct {
	sb  store.Sandbox
	err error
	// lead hands the next batch to this read's caller instead of a result.
	lead bool
}

// getSandboxSQL reads one sandbox.
const getSandboxSQL = `SELECT ` + sandboxColumns + ` FROM sandboxes WHERE id = $1`

// getSandboxesSQL reads the sandboxes of a batch of reads, one index lookup each
// whatever the table's statistics say (see lockSandboxesSQL).
var getSandboxesSQL = `SELECT ` + prefixed("s.", sandboxColumns) + ` FROM unnest($1::text[]) AS v(id)
	CROSS JOIN LATERAL (SELECT ` + sandboxColumns + ` FROM sandboxes WHERE id = v.id LIMIT 1) s`

// get reads sandbox id, alone or with the reads queued beside it.
func (r *reads) get(ctx context.Context, id string) (store.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return store.Sandbox{}, wrap(err)
	}
	w := &sandboxRead{id: id, done: make(chan readResult, 1)}
	res := await(r.turns.join(w), w.done, func(res readResult) bool { return res.lead }, func() { r.flush(ctx) })
	return res.sb, res.err
}

// flush sends what is pending, then hands the lead on.
func (r *reads) flush(ctx context.Context) {
	batch := r.turns.take(readBatch)
	defer r.handOn()
	answered := false
	defer func() {
		// A panic of the store's own code must not leave the batch's other callers
		// waiting for ever; it goes on up the leader's stack.
		if !answered {
			for _, w := range batch {
				w.done <- readResult{err: api.Errorf(api.CodeInternal, "the read of sandbox %s was abandoned", w.id)}
			}
		}
	}()
	if len(batch) == 1 {
		// The lone read of a quiet replica: its caller's context, as before.
		w := batch[0]
		sb, err := scanSandbox(r.s.pool.QueryRow(ctx, getSandboxSQL, w.id))
		answered = true
		w.done <- readResult{sb: sb, err: translate(err, "sandbox", w.id)}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	ids := make([]string, len(batch))
	for i, w := range batch {
		ids[i] = w.id
	}
	q, err := r.s.pool.Query(ctx, getSandboxesSQL, ids)
	rows, err := collectSandboxesCap(q, err, len(ids))
	answered = true
	byID := make(map[string]int, len(rows))
	for i, sb := range rows {
		byID[sb.ID] = i
	}
	for _, w := range batch {
		switch i, ok := byID[w.id]; {
		case err != nil:
			w.done <- readResult{err: err}
		case !ok:
			w.done <- readResult{err: store.NotFound("sandbox", w.id)}
		default:
			w.done <- readResult{sb: rows[i]}
		}
	}
}

// readBatch picks the reads for one statement, at most maxReadBatch. A sandbox
// asked for twice stays pending for the next one: every caller gets a row of its
// own, whose maps and slices no other caller holds.
func readBatch(pending []*sandboxRead) (batch, rest []*sandboxRead) {
	seen := make(map[string]bool, min(len(pending), maxReadBatch))
	for _, w := range pending {
		if len(batch) == maxReadBatch || seen[w.id] {
			rest = append(rest, w)
			continue
		}
		seen[w.id] = true
		batch = append(batch, w)
	}
	return batch, rest
}

// handOn gives the lead to the oldest read that queued meanwhile, or ends the busy
// period.
func (r *reads) handOn() {
	if w, ok := r.turns.next(); ok {
		w.done <- readResult{lead: true}
	}
}
