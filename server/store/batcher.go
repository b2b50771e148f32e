package store

import (
	"context"
	"sync"
	"time"

	"github.com/different-ai/differently/api"
)

// Batcher merges concurrent sandbox writes into shared transactions (group
// commit). A write arriving while none is in progress is written at once, so a
// lone write waits for nothing; writes arriving meanwhile queue, and when the
// transaction in progress commits, one of them leads the next transaction with all
// that queued. Under load a replica thus pays one commit for many sandboxes instead
// of one each, and still never delays a write behind a timer. The scheduler and the
// API's state changes share one Batcher per replica.
type Batcher struct {
	st  Store
	now func() time.Time

	mu      sync.Mutex
	busy    bool
	pending []*write
	// held is each sandbox as the last write of it through this Batcher returned
	// it, at most heldLimit of them, none terminal. A later repeatable write of
	// the sandbox starts from it, so that a transaction of such writes can go
	// through UpdateKnownSandboxes: the API's delete of a sandbox the scheduler
	// just recorded running is then written, on PostgreSQL, in one round trip. The
	// store trusts a held row only after checking it is still the stored one, so a
	// write made elsewhere meanwhile (another replica, a pass) costs the read it
	// would have cost anyway.
	held      map[string]Sandbox
	heldLimit int
}

// heldLimit bounds Batcher.held: a few megabytes of rows, which covers the
// sandboxes a replica changes within seconds of each other.
const heldLimit = 4096

// NewBatcher returns a Batcher writing to st, stamping each transaction with now().
func NewBatcher(st Store, now func() time.Time) *Batcher {
	return &Batcher{st: st, now: now, held: make(map[string]Sandbox), heldLimit: heldLimit}
}

type write struct {
	id string
	// known is the sandbox as the store last returned it to the writer, if it holds it.
	known *Sandbox
	// repeatable says fn may run twice (UpdateKnownSandbox's rule), so that a held
	// row may stand in for the stored one.
	repeatable bool
	fn         func(*Sandbox) error
	done       chan written
}

type written struct {
	sb  Sandbox
	err error
	// lead hands the next transaction to this write's caller instead of a result.
	lead bool
	// panicked is what this write's callback panicked with; its caller panics with
	// it again.
	panicked any
}

// errPanicked stands for a callback's panic inside the store: that write alone is
// left out of its transaction.
var errPanicked = api.Errorf(api.CodeInternal, "the write's callback panicked")

// UpdateSandbox is Store.UpdateSandbox through the batch, stamped with the
// transaction's time rather than a caller's. fn is called under the row lock as
// there; its error is this write's alone, and so is its panic, which UpdateSandbox
// raises again on the caller's goroutine (where an API request's recoverer may
// catch it) once the rest of the transaction has committed. The write is made even
// when ctx ends while it waits: it shares a transaction with others (flushTimeout
// bounds it).
func (b *Batcher) UpdateSandbox(ctx context.Context, id string, fn func(*Sandbox) error) (Sandbox, error) {
	return b.update(ctx, &write{id: id, fn: fn, done: make(chan written, 1)})
}

// UpdateKnownSandbox is UpdateSandbox for a writer that holds the sandbox as the
// store last returned it (known). A transaction whose writes are all of such
// sandboxes goes through Store.UpdateKnownSandboxes, which may write them without
// reading them first; fn may then run twice, and what its last run decides stands.
func (b *Batcher) UpdateKnownSandbox(ctx context.Context, known Sandbox, fn func(*Sandbox) error) (Sandbox, error) {
	return b.update(ctx, &write{id: known.ID, known: &known, repeatable: true, fn: fn, done: make(chan written, 1)})
}

// UpdateSandboxRepeatable is UpdateSandbox for a callback that may run twice, as
// UpdateKnownSandbox's may: first on the sandbox as this Batcher's last write of
// it left it, when it holds one, then on the stored row if that turned out to
// differ. fn must leave what it returns, and any state of its own, as its last
// run decided.
func (b *Batcher) UpdateSandboxRepeatable(ctx context.Context, id string, fn func(*Sandbox) error) (Sandbox, error) {
	return b.update(ctx, &write{id: id, repeatable: true, fn: fn, done: make(chan written, 1)})
}

func (b *Batcher) update(ctx context.Context, w *write) (Sandbox, error) {
	b.mu.Lock()
	b.pending = append(b.pending, w)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	var r written
	if !lead {
		r = <-w.done
	}
	if lead || r.lead {
		b.flush(ctx)
		r = <-w.done
	}
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.sb, r.err
}

// flushTimeout bounds one batch transaction. A batch holds other callers' writes, so
// it does not end with its leader's context (a pass cut short by a shutdown still
// records the outcomes of its Creates), only with this bound.
const flushTimeout = 30 * time.Second

// flush writes what is pending in one transaction, then hands the lead to the
// oldest write that queued meanwhile, or ends the busy period.
func (b *Batcher) flush(ctx context.Context) {
	b.mu.Lock()
	batch := b.takeBatch()
	b.mu.Unlock()
	// A panic of the store itself takes the whole transaction down (the store rolls
	// it back) and goes on up the leader's stack; the API's recoverer may catch it
	// there and keep the replica serving. The batch's other writes must then fail
	// rather than wait forever, and the lead must pass on, or every later write of
	// the replica would queue behind a transaction that ended.
	answered := false
	defer func() {
		if answered {
			return
		}
		p := recover()
		for _, w := range batch {
			w.done <- written{err: api.Errorf(api.CodeInternal,
				"the transaction writing sandbox %s was abandoned: a write sharing it failed unexpectedly", w.id)}
		}
		b.handOn()
		if p != nil { // nil: runtime.Goexit, which goes on by itself
			panic(p)
		}
	}()

	ids := make([]string, len(batch))
	known := make([]Sandbox, 0, len(batch))
	for i, w := range batch {
		ids[i] = w.id
		if w.known != nil {
			known = append(known, *w.known)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	panics := make([]any, len(batch))
	fn := func(i int, sb *Sandbox) (err error) {
		panics[i] = nil // a run on the known value, then one on the stored value
		defer func() {
			if p := recover(); p != nil {
				panics[i], err = p, errPanicked
			}
		}()
		return batch[i].fn(sb)
	}
	var out []Sandbox
	var errs []error
	var err error
	if len(known) == len(batch) {
		// Only when all are known: a batch that must read some rows pays the round
		// trip of their reads anyway, and the locks it takes then are all its rows'.
		out, errs, err = b.st.UpdateKnownSandboxes(ctx, known, b.now(), fn)
	} else {
		out, errs, err = b.st.UpdateSandboxes(ctx, ids, b.now(), fn)
	}
	answered = true
	b.hold(batch, out, errs, err)
	for i, w := range batch {
		switch {
		case panics[i] != nil && (err != nil || errs[i] == errPanicked):
			// A panic of a run on a held value whose stored row then went unread
			// (it is gone) is not this write's outcome; the store's answer is.
			w.done <- written{panicked: panics[i]}
		case err != nil:
			w.done <- written{err: err}
		default:
			w.done <- written{sb: out[i], err: errs[i]}
		}
	}
	b.handOn()
}

// handOn hands the lead to the oldest write that queued during a transaction, or
// ends the busy period.
func (b *Batcher) handOn() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.busy = false
		return
	}
	b.pending[0].done <- written{lead: true}
}

// takeBatch removes the pending writes for one transaction. A sandbox written twice
// stays pending for the next one: a batch names each row once. A repeatable write
// starts from the held row when that is newer than what its writer holds.
func (b *Batcher) takeBatch() []*write {
	seen := make(map[string]bool, len(b.pending))
	var batch, rest []*write
	for _, w := range b.pending {
		if seen[w.id] {
			rest = append(rest, w)
			continue
		}
		seen[w.id] = true
		if h, ok := b.held[w.id]; ok && w.repeatable && newer(h, w.known) {
			h = h.clone()
			w.known = &h
		}
		batch = append(batch, w)
	}
	b.pending = rest
	return batch
}

// newer reports whether h is a later version of the sandbox than known, or known
// is nil. A sandbox deleted and stored again under its ID is another sandbox,
// which its creation time tells apart.
func newer(h Sandbox, known *Sandbox) bool {
	return known == nil || h.CreatedAt.Equal(known.CreatedAt) && h.Version > known.Version
}

// hold records in b.held what a transaction wrote, and forgets the sandboxes it
// left terminal, found gone, or did not write: their held rows may be stale.
func (b *Batcher) hold(batch []*write, out []Sandbox, errs []error, err error) {
	if err != nil {
		return // nothing was written
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, w := range batch {
		if errs[i] != nil || out[i].State.IsTerminal() {
			delete(b.held, w.id)
			continue
		}
		if _, ok := b.held[w.id]; !ok && len(b.held) >= b.heldLimit {
			for id := range b.held { // any one: map order is random enough
				delete(b.held, id)
				break
			}
		}
		b.held[w.id] = out[i].clone()
	}
}
