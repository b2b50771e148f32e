// Package changes fans a store's change feed out inside one replica: to waiters on
// one sandbox (the API's wait route) and to listeners of every change (the
// scheduler's wake-ups, the API's caches). Changes are hints to look again; the
// hub remembers none of them, so a slow waiter loses nothing but a duplicate wake-up.
package changes

import (
	"context"
	"sync"

	"github.com/different-ai/differently/server/store"
)

// Hub distributes changes. The zero value is not usable; call New.
type Hub struct {
	mu        sync.Mutex
	bySandbox map[string]map[*Sub]struct{}
	listeners map[int]func(store.Change)
	next      int
	closed    chan struct{}
	closeOnce sync.Once
}

// New returns an empty hub.
func New() *Hub {
	return &Hub{
		bySandbox: map[string]map[*Sub]struct{}{},
		listeners: map[int]func(store.Change){},
		closed:    make(chan struct{}),
	}
}

// Sub is one waiter's subscription to one sandbox.
type Sub struct {
	// C receives a value after each change of the sandbox, or of everything (a
	// resync); wake-ups arriving while one is pending merge into it.
	C          <-chan struct{}
	c          chan struct{}
	id         string
	hub        *Hub
	interested func(store.State) bool
}

// Sandbox subscribes to the changes of sandbox id into the states for which
// interested returns true (nil: every change). A resync wakes every subscription.
// Subscribe before reading the sandbox: a change committed between the read and the
// subscription would be missed. Close the Sub when done.
func (h *Hub) Sandbox(id string, interested func(store.State) bool) *Sub {
	c := make(chan struct{}, 1)
	s := &Sub{C: c, c: c, id: id, hub: h, interested: interested}
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.bySandbox[id]
	if subs == nil {
		subs = map[*Sub]struct{}{}
		h.bySandbox[id] = subs
	}
	subs[s] = struct{}{}
	return s
}

// Close ends the subscription.
func (s *Sub) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if subs := h.bySandbox[s.id]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(h.bySandbox, s.id)
		}
	}
}

// Listen calls fn with every change until stop is called. fn runs on the
// publisher's goroutine and must not block.
func (h *Hub) Listen(fn func(store.Change)) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	id := h.next
	h.listeners[id] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.listeners, id)
	}
}

// Publish hands c to the waiters it concerns and to every listener.
func (h *Hub) Publish(c store.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch c.Kind {
	case store.ChangeSandbox:
		for s := range h.bySandbox[c.ID] {
			if s.interested == nil || s.interested(c.State) {
				s.wake()
			}
		}
	case store.ChangeResync:
		for _, subs := range h.bySandbox {
			for s := range subs {
				s.wake()
			}
		}
	}
	for _, fn := range h.listeners {
		fn(c)
	}
}

func (s *Sub) wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// Run feeds the hub from w until ctx ends.
func (h *Hub) Run(ctx context.Context, w store.Watcher) error {
	return w.Watch(ctx, h.Publish)
}

// Close tells waiters that the replica is stopping (Closed is closed), so that long
// waits answer now instead of holding up a graceful shutdown. Safe to call twice.
func (h *Hub) Close() {
	h.closeOnce.Do(func() { close(h.closed) })
}

// Closed is closed once Close was called.
func (h *Hub) Closed() <-chan struct{} { return h.closed }
