package sqlite

import (
	"context"
	"sync"

	"github.com/different-ai/differently/server/store"
)

// feed hands committed changes to the listeners of Watch. A SQLite file serves one
// daemon, so the writes of this process are all there is to report.
type feed struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(store.Change)
}

func (f *feed) add(fn func(store.Change)) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fns == nil {
		f.fns = map[int]func(store.Change){}
	}
	f.next++
	f.fns[f.next] = fn
	return f.next
}

func (f *feed) remove(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.fns, id)
}

// publish calls every listener. The lock is held throughout so that a Watch that
// returned is never called again; listeners must not block.
func (f *feed) publish(c store.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fn := range f.fns {
		fn(c)
	}
}

// sandboxWritten reports an update that changed the sandbox's state.
func (f *feed) sandboxWritten(before, after store.Sandbox) {
	if before.State != after.State {
		f.publish(store.SandboxChange(after))
	}
}

// Watch implements store.Watcher for this process's writes.
func (s *Store) Watch(ctx context.Context, fn func(store.Change)) error {
	id := s.feed.add(fn)
	defer s.feed.remove(id)
	fn(store.Change{Kind: store.ChangeResync})
	<-ctx.Done()
	return ctx.Err()
}
