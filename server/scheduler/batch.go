package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/different-ai/differently/server/store"
)

// batcher merges the scheduler's concurrent sandbox writes into shared transactions
// (group commit). A write arriving while none is in progress is written at once, so
// a lone write waits for nothing; writes arriving meanwhile queue, and when the
// transaction in progress commits, one of them leads the next transaction with all
// that queued. Under load a replica thus pays one commit for many sandboxes instead
// of one each, and still never delays a write behind a timer.
type batcher struct {
	st  store.Store
	now func() time.Time

	mu      sync.Mutex
	busy    bool
	pending []*write
}

type write struct {
	id   string
	fn   func(*store.Sandbox) error
	done chan written
}

type written struct {
	sb  store.Sandbox
	err error
	// lead hands the next transaction to this write's caller instead of a result.
	lead bool
}

// update is store.UpdateSandbox through the batch. fn is called under the row lock
// as there; its error is this write's alone.
func (b *batcher) update(ctx context.Context, id string, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	w := &write{id: id, fn: fn, done: make(chan written, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if !lead {
		r := <-w.done
		if !r.lead {
			return r.sb, r.err
		}
	}
	b.flush(ctx)
	r := <-w.done
	return r.sb, r.err
}

// flushTimeout bounds one batch transaction. A batch holds other callers' writes, so
// it does not end with its leader's context (a pass cut short by a shutdown still
// records the outcomes of its Creates), only with this bound.
const flushTimeout = 30 * time.Second

// flush writes what is pending in one transaction, then hands the lead to the
// oldest write that queued meanwhile, or ends the busy period.
func (b *batcher) flush(ctx context.Context) {
	b.mu.Lock()
	batch := b.takeBatch()
	b.mu.Unlock()

	ids := make([]string, len(batch))
	for i, w := range batch {
		ids[i] = w.id
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	out, errs, err := b.st.UpdateSandboxes(ctx, ids, b.now(), func(i int, sb *store.Sandbox) error {
		return batch[i].fn(sb)
	})
	for i, w := range batch {
		switch {
		case err != nil:
			w.done <- written{err: err}
		default:
			w.done <- written{sb: out[i], err: errs[i]}
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.busy = false
		return
	}
	b.pending[0].done <- written{lead: true}
}

// takeBatch removes the pending writes for one transaction. A sandbox written twice
// stays pending for the next one: a batch names each row once.
func (b *batcher) takeBatch() []*write {
	seen := make(map[string]bool, len(b.pending))
	var batch, rest []*write
	for _, w := range b.pending {
		if seen[w.id] {
			rest = append(rest, w)
			continue
		}
		seen[w.id] = true
		batch = append(batch, w)
	}
	b.pending = rest
	return batch
}
